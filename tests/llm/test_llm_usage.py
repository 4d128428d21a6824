"""Accounting (calls, tokens, seconds, cost, outcomes), constrained output, bounded schemas."""

from __future__ import annotations

import json

import pytest
from chat_server import http_error, ok
from pydantic import TypeAdapter, ValidationError

from wmkit.llm import ChatClient, LLMConfigError, ReplyCache, ask_structured, extract_json
from wmkit.llm.client import response_format
from wmkit.llm.schema import bounded_schema
from wmkit.llm.types import Usage
from wmkit.world.actions import AtomicAction, UpdateEntity

ASK = [{"role": "user", "content": "facts?"}]


def test_the_client_counts_calls_tokens_time_and_cost(chat_server):
    chat_server.script(ok("a", tokens=(1000, 10)), ok("b", tokens=(2000, 30)))
    client = ChatClient(chat_server.url, "m", price_in=0.5, price_out=2.0, cache=ReplyCache())
    client.chat(ASK)
    client.chat([{"role": "user", "content": "other"}])
    client.chat(ASK)  # the cache answers: a call, no tokens, no cost
    usage = client.usage
    assert (usage.calls, usage.cached, usage.tokens_in, usage.tokens_out) == (3, 1, 3000, 40)
    assert usage.cost == pytest.approx((3000 * 0.5 + 40 * 2.0) / 1e6)
    assert usage.seconds > 0
    assert len(chat_server.requests) == 2


def test_a_failed_call_costs_time_but_is_not_counted_as_answered(chat_server):
    chat_server.script(http_error(400))
    client = ChatClient(chat_server.url, "m", max_retries=0)
    with pytest.raises(Exception, match="400"):
        client.chat(ASK)
    assert (client.usage.calls, client.usage.tokens_in) == (0, 0)
    assert client.usage.seconds > 0


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        ("json_object", {"type": "json_object", "schema": {"type": "object"}}),
        (
            "json_schema",
            {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": {"type": "object"}, "strict": True},
            },
        ),
    ],
)
def test_json_schema_goes_out_in_the_servers_own_form(chat_server, style, expected):
    chat_server.script("{}")
    client = ChatClient(chat_server.url, "m", constrain=style)
    client.chat(ASK, json_schema={"type": "object"}, temperature=0)
    [request] = chat_server.requests
    assert request["response_format"] == expected
    assert "json_schema" not in request and request["temperature"] == 0


def test_constrain_none_sends_no_response_format(chat_server):
    chat_server.script("{}")
    ChatClient(chat_server.url, "m").chat(ASK, json_schema={"type": "object"})
    assert "response_format" not in chat_server.requests[0]


def test_a_bad_constrain_style_or_price_is_refused():
    with pytest.raises(LLMConfigError, match="constrain must be one of"):
        ChatClient("http://127.0.0.1:9/v1", "m", constrain="grammar")  # type: ignore[arg-type]
    with pytest.raises(LLMConfigError, match="price_in"):
        ChatClient("http://127.0.0.1:9/v1", "m", price_in=-1)
    with pytest.raises(LLMConfigError):
        response_format("xml", {})


def test_the_constraint_is_part_of_the_cache_key(chat_server):
    chat_server.script("[]", "[]")
    client = ChatClient(chat_server.url, "m", constrain="json_object", cache=ReplyCache())
    client.chat(ASK)
    client.chat(ASK, json_schema={"type": "array"})  # another request, not a cache hit
    assert len(chat_server.requests) == 2


def test_ask_structured_counts_each_outcome_in_the_clients_usage(chat_server):
    chat_server.script("```json\n[]\n```", "no json", "```json\n[]\n```", "nope", "still no")
    client = ChatClient(chat_server.url, "m")
    parse = TypeAdapter(list[int]).validate_json
    assert ask_structured(client, ASK, parse_fn=parse, max_repairs=0).status == "ok"
    assert ask_structured(client, ASK, parse_fn=parse, max_repairs=1).status == "repaired"
    assert ask_structured(client, ASK, parse_fn=parse, max_repairs=1).status == "failed"
    usage = client.usage
    assert (usage.valid, usage.repaired, usage.failed, usage.calls) == (1, 1, 1, 5)


def test_ask_structured_sends_the_schema_with_every_try(chat_server):
    chat_server.script("not json", "[1]")
    client = ChatClient(chat_server.url, "m", constrain="json_object")
    schema = {"type": "array", "items": {"type": "integer"}}
    result = ask_structured(client, ASK, schema=list[int], max_repairs=1, json_schema=schema)
    assert result.value == [1]
    assert [r["response_format"]["schema"] for r in chat_server.requests] == [schema, schema]


def test_usage_adds_subtracts_and_sums():
    a, b = Usage(calls=2, tokens_in=10, cost=0.5), Usage(calls=1, tokens_in=4, failed=1)
    assert (a + b).as_dict()["tokens_in"] == 14
    assert (a - b).calls == 1
    assert Usage.total([a, b, b]).failed == 2
    assert Usage.total([]) == Usage()
    with pytest.raises(ValueError, match="unknown structured outcome"):
        a.count("maybe")


def test_bounded_schema_bounds_every_string_and_list_and_puts_the_kind_first():
    schema = bounded_schema(list[AtomicAction], max_string=20, max_items=3)
    assert schema["maxItems"] == 3
    text = json.dumps(schema)
    assert "description" not in text and "title" not in text
    update = schema["$defs"]["UpdateEntity"]
    assert next(iter(update["properties"])) == "kind"
    assert update["required"][0] == "kind"
    assert update["properties"]["entity_id"]["maxLength"] == 20
    assert update["properties"]["attributes"]["maxProperties"] == 3

    def strings(node):
        if isinstance(node, dict):
            if node.get("type") == "string" and "const" not in node and "enum" not in node:
                yield node
            for value in node.values():
                yield from strings(value)
        elif isinstance(node, list):
            for value in node:
                yield from strings(value)

    assert all(s["maxLength"] <= 20 for s in strings(schema))


def test_what_the_bounded_schema_admits_still_validates():
    schema = bounded_schema(UpdateEntity, max_string=40)
    reply = {
        "kind": "update_entity",
        "entity_id": "parcel:px-1",
        "attributes": {"location": "hub:lyon"},
        "reason": "scan",
    }
    assert schema["properties"]["attributes"]["minProperties"] == 1  # kept from pydantic
    assert set(schema["required"]) <= set(reply)
    UpdateEntity.model_validate(reply)
    with pytest.raises(ValidationError):
        UpdateEntity.model_validate({**reply, "extra": 1})  # extra=forbid, as the schema says
    with pytest.raises(ValueError, match="bounds must be >= 1"):
        bounded_schema(UpdateEntity, max_items=0)


def test_a_bare_newline_inside_a_string_is_escaped_not_refused():
    # llama.cpp's grammar lets raw control characters into strings (seen with SmolLM2).
    reply = '{ "colour": "red", "fruit": "banana}\n" }'
    text = extract_json(reply)
    assert json.loads(text) == {"colour": "red", "fruit": "banana}\n"}
    assert extract_json("```json\n[\"a\tb\"]\n```") == '["a\\tb"]'
    with pytest.raises(ValueError, match="no JSON found"):
        extract_json("{not json}")
