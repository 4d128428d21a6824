import json

import pytest
from chat_server import http_error, ok, think_json, truncated
from pydantic import BaseModel, ConfigDict

from wmkit.llm import (
    ChatClient,
    LLMStatusError,
    ask_structured,
    extract_json,
    parse_reply,
    split_think,
)
from wmkit.world.actions import UpdateEntity, parse_actions

ASK = [{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": "Go."}]
ACTION = {
    "kind": "update_entity",
    "entity_id": "lamp:1",
    "attributes": {"brightness": "30"},
    "reason": "asked to dim",
}


class Point(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: int
    y: int


def _fenced(value) -> str:
    return f"Here you go.\n```json\n{json.dumps(value)}\n```\n"


def _client(server, **kwargs):
    return ChatClient(server.url, "test-model", timeout=2.0, backoff=0.01, **kwargs)


# --- finding JSON in a reply -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('```json\n{"x": 1}\n```', {"x": 1}),
        ("```\n[1, 2]\n```", [1, 2]),
        ('```python\nprint([1])\n```\n```JSON\n{"a": [1]}\n```', {"a": [1]}),
        (
            'The answer is {"x": 1, "s": "a } in a string"} and more',
            {"x": 1, "s": "a } in a string"},
        ),
        ("See [note 3]. Then [1, 2] done", [1, 2]),  # prose in brackets is skipped
        ('{"a": {"b": [1, {"c": "]"}]}}', {"a": {"b": [1, {"c": "]"}]}}),
    ],
)
def test_extract_json_finds_the_block(text, expected):
    assert json.loads(extract_json(text)) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no json here", "no JSON found"),
        ("", "no JSON found"),
        ("{'single': 'quotes'}", "not valid JSON"),
        ('```json\n[{"kind": "update', "never closed"),
        ('```json\n{"x": 1,}\n```', "not valid JSON"),
        ('[{"kind": "update_entity"}, {"kind": "add_rel', "never closed"),
        ('[{"a": 1}, {"b": "unterminated', "never closed"),
    ],
)
def test_extract_json_says_why_it_failed(text, message):
    with pytest.raises(ValueError, match=message):
        extract_json(text)


def test_a_truncated_list_never_yields_one_of_its_items():
    # The first item is complete JSON, but taking it would apply half of the reply.
    with pytest.raises(ValueError, match="cut off"):
        extract_json('[{"x": 1}, {"x": 2')


@pytest.mark.parametrize(
    ("text", "think", "rest"),
    [
        ("<think>hmm [1]</think>\n[2]", "hmm [1]", "\n[2]"),
        ("<THINKING>a</THINKING>b", "a", "b"),
        ("<think>never closed [1]", "never closed [1]", ""),
        ("THINK: lamp dims\nJSON:\n[2]", " lamp dims\n", "JSON:\n[2]"),
        ("## THINK\nreason\n```json\n[2]\n```", "\nreason\n", "```json\n[2]\n```"),
        ("just [2]", None, "just [2]"),
        ("I think: [2]", None, "I think: [2]"),  # not a heading at a line start
    ],
)
def test_split_think(text, think, rest):
    assert split_think(text) == (think, rest)


def test_parse_reply_prefers_the_json_block_and_falls_back_to_think():
    parse = parse_actions
    good = json.dumps([ACTION])
    assert parse_reply(f"THINK: [1]\n```json\n{good}\n```", parse)[1] == "json"
    value, source = parse_reply(f"THINK: I will send {good}\n```json\n[{{oops\n```", parse)
    assert source == "think" and value == (UpdateEntity.model_validate(ACTION),)
    why = parse_reply("THINK: no idea\n```json\n[1]\n```", parse)
    assert isinstance(why, str) and why.startswith("JSON block: invalid action: 0:")


# --- ask_structured against the local server -------------------------------------------


def test_good_reply_is_ok(chat_server):
    chat_server.script(_fenced({"x": 1, "y": 2}))
    result = ask_structured(_client(chat_server), ASK, schema=Point, params={"temperature": 0})
    assert (result.status, result.value, result.source) == ("ok", Point(x=1, y=2), "json")
    assert result.attempts == 1 and result.errors == () and result.ok
    assert chat_server.requests[0]["temperature"] == 0


def test_think_plus_json_reply_is_ok(chat_server):
    chat_server.script(think_json("the user dimmed the lamp", [ACTION]))
    result = ask_structured(_client(chat_server), ASK, parse_fn=parse_actions)
    assert result.status == "ok" and result.value == (UpdateEntity.model_validate(ACTION),)


def test_broken_json_block_is_repaired_from_the_think_block(chat_server):
    think = f"THINK: the lamp goes to 30, so {json.dumps([ACTION])}\n"
    chat_server.script(think + '```json\n[{"kind": "update_entity", "entity_id": \n```')
    result = ask_structured(_client(chat_server), ASK, parse_fn=parse_actions)
    assert (result.status, result.source, result.attempts) == ("repaired", "think", 1)
    assert result.value[0].attributes == {"brightness": "30"}
    assert len(chat_server.requests) == 1  # no correction round was needed


def test_invalid_reply_gets_a_correction_quoting_the_field_path(chat_server):
    bad = dict(ACTION, colour="red")
    del bad["reason"]
    chat_server.script(_fenced([bad]), _fenced([ACTION]))
    result = ask_structured(_client(chat_server), ASK, parse_fn=parse_actions, hint="A list.")
    assert (result.status, result.source, result.attempts) == ("repaired", "json", 2)
    assert len(result.errors) == 1 and "0.update_entity.reason" in result.errors[0]
    retry = chat_server.requests[1]["messages"]
    assert retry[:2] == ASK
    assert retry[2] == {"role": "assistant", "content": _fenced([bad])}
    correction = retry[3]
    assert correction["role"] == "user"
    assert "0.update_entity.reason: Field required" in correction["content"]
    assert "0.update_entity.colour" in correction["content"] and "A list." in correction["content"]


def test_schema_errors_name_fields(chat_server):
    chat_server.script(_fenced({"x": "one", "y": 2}), _fenced({"x": 1}), _fenced({"x": 1, "y": 2}))
    result = ask_structured(_client(chat_server), ASK, schema=Point, max_repairs=2)
    assert result.status == "repaired" and result.attempts == 3
    assert "x:" in result.errors[0] and "y: Field required" in result.errors[1]


def test_truncated_replies_fail_with_the_reason(chat_server):
    whole = _fenced([ACTION, ACTION])
    chat_server.script(truncated(whole, 60), truncated(whole, 80))
    result = ask_structured(_client(chat_server), ASK, parse_fn=parse_actions, max_repairs=1)
    assert (result.status, result.value, result.source) == ("failed", None, None)
    assert not result.ok and result.attempts == 2 and len(result.errors) == 2
    assert "cut off" in result.reason and "finish_reason=length" in result.reason
    assert result.reply == whole[:80]


def test_no_repairs_means_one_request(chat_server):
    chat_server.script("I cannot help with that.", "never sent")
    result = ask_structured(_client(chat_server), ASK, schema=Point, max_repairs=0)
    assert result.status == "failed" and "no JSON found" in result.reason
    assert len(chat_server.requests) == 1 and chat_server.pending == 1


def test_empty_reply_fails_clearly(chat_server):
    chat_server.script(ok(""))
    result = ask_structured(_client(chat_server), ASK, schema=Point, max_repairs=0)
    assert result.status == "failed" and "no JSON found" in result.reason


def test_request_errors_propagate(chat_server):
    chat_server.script(*[http_error(500)] * 3)
    with pytest.raises(LLMStatusError):
        ask_structured(_client(chat_server, max_retries=2), ASK, schema=Point)


def test_exactly_one_of_schema_and_parse_fn(chat_server):
    client = _client(chat_server)
    with pytest.raises(TypeError, match="exactly one"):
        ask_structured(client, ASK)
    with pytest.raises(TypeError, match="exactly one"):
        ask_structured(client, ASK, schema=Point, parse_fn=parse_actions)
    with pytest.raises(ValueError, match="max_repairs"):
        ask_structured(client, ASK, schema=Point, max_repairs=-1)
    assert chat_server.requests == []
