"""The LLM window tracker and the LLM policy, against a scripted chat server."""

from __future__ import annotations

import json

import gymnasium
import numpy as np
import pytest
from chat_server import http_error

import wmkit.envs  # noqa: F401  (registers the wmkit/* ids)
from wmkit.agents.llm_agents import LLMPolicy, LLMWindowTracker
from wmkit.agents.policies import RandomPolicy
from wmkit.agents.trackers import LLMTracker
from wmkit.agents.types import Agent
from wmkit.evals.runner import play_episode
from wmkit.llm import ChatClient, LLMStatusError
from wmkit.world.types import Fact, WorldState


def _client(server, **kwargs) -> ChatClient:
    return ChatClient(server.url, "m", max_retries=0, backoff=0, **kwargs)


def _facts(*triples) -> str:
    keys = ("subject", "relation", "object")
    return json.dumps([dict(zip(keys, t, strict=True)) for t in triples])


def test_the_window_tracker_holds_what_the_last_reply_lists(chat_server):
    chat_server.script(
        _facts(("Parcel:PX-1", "location", "Hub:Lyon")),
        _facts(("parcel:px-1", "location", "hub:lyon"), ("parcel:px-1", "location", "hub:nice")),
    )
    tracker = LLMWindowTracker(_client(chat_server), k=2)
    tracker.reset("PX-1 is at the Lyon hub.", {})
    assert tracker.state == WorldState([Fact("parcel:px-1", "location", "hub:lyon")])
    tracker.update("wait", "PX-1 moved to Nice.", {})
    # one object per (subject, relation), the last listed winning
    assert tracker.state == WorldState([Fact("parcel:px-1", "location", "hub:nice")])
    last = chat_server.requests[-1]["messages"][-1]["content"]
    assert "PX-1 is at the Lyon hub." in last and "Command: wait" in last


def test_what_scrolls_out_of_the_window_is_not_shown_again(chat_server):
    chat_server.script("[]", "[]", "[]")
    tracker = LLMWindowTracker(_client(chat_server), k=2)
    tracker.reset("alpha", {})
    tracker.update("a", "beta", {})
    tracker.update("b", "gamma", {})
    shown = chat_server.requests[-1]["messages"][-1]["content"]
    assert "alpha" not in shown and "beta" in shown and "gamma" in shown


def test_the_window_tracker_constrains_its_replies(chat_server):
    chat_server.script("[]")
    tracker = LLMWindowTracker(_client(chat_server, constrain="json_object"), max_facts=5)
    tracker.reset("obs", {})
    schema = chat_server.requests[0]["response_format"]["schema"]
    assert schema["type"] == "array" and schema["maxItems"] == 5


def test_questions_are_answered_from_the_window_unknown_is_none(chat_server):
    chat_server.script("[]", json.dumps({"1": "Hub:Lyon", "2": "unknown"}))
    tracker = LLMWindowTracker(_client(chat_server, constrain="json_object"))
    tracker.reset("PX-1 is at the Lyon hub.", {})
    answers = tracker.answer([("parcel:px-1", "location"), ("parcel:px-9", "status")])
    assert answers == ["hub:lyon", None]
    request = chat_server.requests[-1]
    asked = request["messages"][-1]["content"]
    assert asked.endswith(
        "Task: Questions\n1. What is the location of parcel:px-1?\n"
        "2. What is the status of parcel:px-9?"
    )
    # the same system prompt and observations as the facts request: a prompt cache reuses them
    facts_request = chat_server.requests[0]["messages"]
    assert facts_request[0] == request["messages"][0]
    assert asked.startswith(facts_request[1]["content"].rsplit("\n", 1)[0])
    assert request["response_format"]["schema"]["required"] == ["1", "2"]
    assert tracker.answer([]) == []  # nothing asked, no request
    assert len(chat_server.requests) == 2


def test_an_unusable_answer_or_a_transient_failure_answers_unknown(chat_server):
    chat_server.script(_facts(("a:b", "c", "d")), json.dumps({"1": "x"}), http_error(503))
    tracker = LLMWindowTracker(_client(chat_server))
    tracker.reset("obs", {})
    assert tracker.answer([("a:b", "c"), ("a:b", "e")]) == [None, None]  # "2" missing
    tracker.update("wait", "obs 2", {})  # the 503: the step is lost, the facts stay
    assert tracker.state == WorldState([Fact("a:b", "c", "d")])
    assert tracker.client.usage.failed == 1


def test_a_request_that_cannot_succeed_stops_the_episode(chat_server):
    chat_server.script(http_error(401))
    tracker = LLMWindowTracker(_client(chat_server))
    with pytest.raises(LLMStatusError, match="401"):
        tracker.reset("obs", {})


def test_the_policy_picks_a_listed_command_from_an_enum(chat_server):
    chat_server.script(json.dumps({"command": "open door"}))
    policy = LLMPolicy(_client(chat_server, constrain="json_object"), goal="get out")
    policy.reset(np.random.default_rng(0))
    tracked = WorldState([Fact("door:oak", "state", "closed")])
    command = policy.act("A door.", {"admissible_actions": ["look", "open door"]}, tracked)
    assert command == "open door" and policy.fallbacks == 0
    request = chat_server.requests[0]
    enum = request["response_format"]["schema"]["properties"]["command"]["enum"]
    assert enum == ["look", "open door"]
    shown = request["messages"][-1]["content"]
    assert "door:oak | state | closed" in shown and "Goal: get out" in shown


def test_a_command_not_listed_falls_back_to_a_random_admissible_one(chat_server):
    chat_server.script(json.dumps({"command": "fly away"}), "no json at all")
    policy = LLMPolicy(_client(chat_server), memory="window")
    policy.reset(np.random.default_rng(0))
    info = {"admissible_actions": ["look", "wait"]}
    assert policy.act("one", info, WorldState()) in info["admissible_actions"]
    assert policy.act("two", info, WorldState()) in info["admissible_actions"]
    assert policy.fallbacks == 2
    shown = chat_server.requests[-1]["messages"][-1]["content"]
    assert "Earlier observations" in shown and "one" in shown  # its window memory
    assert policy.client.usage.failed == 2


def test_an_episode_records_the_models_cost_and_its_answers(chat_server):
    env = gymnasium.make("wmkit/Parcel-v0", horizon=20, ground_truth=True)
    asked = []

    def respond(request):
        text = request["messages"][-1]["content"]
        if "Task: Questions" in text:
            asked_part = text.split("Task: Questions", 1)[1]
            numbers = [line.split(".")[0] for line in asked_part.splitlines() if line[:1].isdigit()]
            asked.append(len(numbers))
            return json.dumps({n: "unknown" for n in numbers})
        return "[]"

    chat_server.responder = respond
    client = _client(chat_server)
    agent = Agent("llm_window", LLMWindowTracker(client, k=2), RandomPolicy())
    record = play_episode(env, agent, seed=0)
    assert record.usage is not None
    assert record.usage["calls"] == len(chat_server.requests) == len(record.steps) + len(asked)
    assert record.usage["valid"] == record.usage["calls"]
    due = [step.probes for step in record.steps[:-1] if step.probes]
    assert sum(map(len, due)) == sum(asked)  # the final step's probes are not asked
    assert all(a is None for step in record.steps[:-1] for a in step.answers)


def test_an_agent_without_a_model_costs_nothing_and_a_shared_client_counts_once(chat_server):
    assert Agent("r", LLMWindowTracker.__new__(LLMWindowTracker), RandomPolicy()).usage() is None
    client = _client(chat_server)
    client.usage.calls = 3
    agent = Agent("both", LLMTracker(client), LLMPolicy(client))
    assert agent.usage().calls == 3
