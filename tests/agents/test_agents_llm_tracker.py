"""The LLM tracker against a real local chat-completions server and a real Parcel episode."""

import json

import gymnasium
import pytest
from chat_server import (
    ChatServer,
    http_error,
    no_choices,
    raw,
    slow,
    think_json,
    truncated,
)
from hydra import compose, initialize_config_module
from hydra.utils import instantiate
from omegaconf import OmegaConf

import wmkit.envs  # noqa: F401  (registers the wmkit/* ids)
from wmkit.agents.policies import GreedyPolicy
from wmkit.agents.trackers import ClaimMemory, LLMTracker
from wmkit.envs.parcel import read
from wmkit.evals.suite import EvalConfig, fingerprint
from wmkit.llm import ChatClient, LLMConfigError, LLMStatusError
from wmkit.llm.prompts import OBSERVATION_HEADER
from wmkit.world.types import Fact, WorldState, agent_view


@pytest.fixture
def server():
    with ChatServer() as chat_server:
        yield chat_server


def _tracker(server, **kwargs):
    client = ChatClient(server.url, "test-model", timeout=0.3, max_retries=1, backoff=0.01)
    return LLMTracker(client, params={"temperature": 0}, **kwargs)


def _update(entity_id, reason="stated in the observation", **attributes):
    return {
        "kind": "update_entity",
        "entity_id": entity_id,
        "attributes": attributes,
        "reason": reason,
    }


class PerfectReader:
    """Plays a model that reads every observation right: the env's own reader, as actions.

    Answers in three formats in turn (prose + fenced JSON, THINK + JSON, <think> + bare
    JSON) so every step also exercises the reply parser.
    """

    def __init__(self):
        self.memory = ClaimMemory()  # to resolve "the parcel Ann sent to Bo"
        self.answered = 0

    def actions(self, observation):
        attributes = {}
        for claim in read(observation):
            subject = self.memory.resolve(claim.subject)
            self.memory.apply([claim])
            if subject is not None:
                attributes.setdefault(subject, {})[claim.relation] = claim.object
        return [_update(s, **a) for s, a in attributes.items()]

    def __call__(self, request):
        # The first user message holds the observation (later ones are corrections).
        observation = request["messages"][1]["content"].split(OBSERVATION_HEADER, 1)[1]
        actions = self.actions(observation)
        self.answered += 1
        body = json.dumps(actions)
        return [
            f"Updating the log.\n```json\n{body}\n```",
            f"THINK: {len(actions)} entities changed.\n```json\n{body}\n```",
            f"<think>reading the scans</think>\n{body}",
        ][self.answered % 3]


def _truth(info, mentioned):
    return WorldState(info["wm.state"]).restrict(mentioned)


def test_tracks_a_parcel_episode_exactly_when_the_model_reads_right(server):
    server.responder = PerfectReader()
    tracker, policy = _tracker(server), GreedyPolicy()
    env = gymnasium.make("wmkit/Parcel-v0", horizon=20, ground_truth=True)
    observation, info = env.reset(seed=3)
    tracker.reset(observation, agent_view(info))
    mentioned, steps, done = set(info["wm.mentioned"]), 0, False
    while not done:
        assert tracker.state == _truth(info, mentioned), f"step {steps}"
        if steps == 4:  # one malformed reply: the correction round recovers the step
            server.script('```json\n[{"kind": "update_entity", "entity_id": }]\n```')
        command = policy.act(observation, agent_view(info), tracker.state)
        shown = tracker.state
        observation, _, terminated, truncated_, info = env.step(command)
        tracker.update(command, observation, agent_view(info))
        mentioned.update(info["wm.mentioned"])
        steps += 1
        done = terminated or truncated_
    assert tracker.state == _truth(info, mentioned)
    assert len(tracker.state) > 20
    stats = tracker.stats
    assert (stats.replies, stats.repaired, stats.failed, stats.request_errors) == (
        steps + 1,
        1,
        0,
        0,
    )
    assert stats.applied > steps // 2 and stats.dropped == 0
    # The model saw the facts it had built up, and the command that was sent.
    last = server.requests[-1]["messages"][1]["content"]
    assert all(f"{s} | {r} | {o}\n" in last for s, r, o in shown)
    assert f"Command: {command}" in last
    assert server.requests[-1]["temperature"] == 0


def test_broken_replies_never_change_the_tracked_state(server):
    server.responder = PerfectReader()
    tracker = _tracker(server, max_repairs=1)
    env = gymnasium.make("wmkit/Parcel-v0", horizon=40, ground_truth=True)
    observation, info = env.reset(seed=0)
    tracker.reset(observation, agent_view(info))
    for _ in range(2):
        tracker.update("wait", env.step("wait")[0], {})
    before = tracker.state
    assert len(before) >= 20
    good = json.dumps([_update("parcel:px-9999", status="booked")])
    broken = {
        "failed": [
            ('```json\n[{"kind": "update_entity",, }]\n```',) * 2,  # malformed JSON
            (truncated(f"```json\n{good}\n```", 40),) * 2,  # cut off at the token limit
            (f"```json\n{json.dumps([{**json.loads(good)[0], 'colour': 'red'}])}\n```",) * 2,
            ("Sorry, I can only answer questions about parcels.",) * 2,  # no JSON at all
        ],
        "request_errors": [
            (slow(3.0, good), slow(3.0, good)),  # past the 0.3 s timeout, retried once
            (http_error(500), http_error(503)),  # server errors, retried once
            (no_choices(),),  # garbled responses are not retried
            (raw('{"choices": [{"message": {"content": "[]"'),),
        ],
    }
    for counter, scripts in broken.items():
        for n, script in enumerate(scripts, start=1):
            server.script(*script)
            tracker.update("wait", env.step("wait")[0], {})
            assert tracker.state == before, script
            assert getattr(tracker.stats, counter) == n
            assert server.pending == 0
    notes = "\n".join(tracker.notes)
    assert "finish_reason=length" in notes and "colour" in notes and "within 0.3s" in notes
    assert tracker.stats.applied + tracker.stats.dropped > 0 and tracker.stats.dropped == 0

    # One reply, three actions: the valid one applies, the two the world refuses drop.
    parcel = sorted(before.subjects())[0]
    applied = tracker.stats.applied
    server.script(
        json.dumps(
            [
                _update(parcel, location="hub:test"),
                {
                    "kind": "remove_relation",
                    "src": parcel,
                    "relation": "x",
                    "dst": "hub:nowhere",
                    "reason": "r",
                },
                _update(parcel, last_updated="3"),  # reserved by the registry
            ]
        )
    )
    tracker.update("wait", env.step("wait")[0], {})
    old = [f for f in before if f.subject == parcel and f.relation == "location"]
    assert tracker.state == WorldState(
        (before.facts - set(old)) | {Fact(parcel, "location", "hub:test")}
    )
    assert (tracker.stats.applied, tracker.stats.dropped) == (applied + 1, 2)
    assert "unknown entity 'hub:nowhere'" in tracker.notes[-2]
    assert "last_updated" in tracker.notes[-1]


def test_a_misconfigured_endpoint_stops_with_the_cause(server):
    server.script("[]")
    tracker = _tracker(server)
    tracker.reset("PX-1000 was booked.", {})
    server.script(http_error(401, "invalid api key"))
    with pytest.raises(LLMStatusError, match="invalid api key"):
        tracker.update("wait", "You wait.", {})
    assert tracker.state == WorldState()


def test_scheduled_events_fire_when_due_and_conditions_use_names(server):
    light, leo = "light:kitchen", "person:leo"
    when_home = {
        "kind": "schedule_event",
        "event_id": "welcome",
        "delay": 1,
        "condition": f"fact('{leo}', 'location') == 'home'",
        "retry_steps": 5,
        "actions": [_update(light, "brighten when he is back", brightness="100")],
        "reason": "when my son gets home, brighten it",
    }
    timer = {
        "kind": "schedule_event",
        "event_id": "off",
        "delay": 2,
        "actions": [_update(light, "timer", brightness="0")],
        "reason": "turn it off in two minutes",
    }
    server.script(
        think_json(
            "dim now, brighten later",
            [_update(light, brightness="30"), _update(leo, location="away"), when_home, timer],
        ),
        json.dumps([{"kind": "cancel_event", "event_id": "off", "reason": "never mind"}]),
        json.dumps([_update(leo, location="home")]),
        "[]",
    )
    tracker = _tracker(server)
    tracker.reset("Leo is out. Dim the kitchen light to 30; brighten it when he is back.", {})
    assert tracker.state.value(light, "brightness") == "30"
    tracker.update("wait", "Actually leave the light on.", {})  # step 1: Leo still away
    prompt = server.requests[-1]["messages"][1]["content"]
    assert "welcome: waits for its condition, at most 5 more steps" in prompt
    assert "off: due in 1 steps (turn it off in two minutes)" in prompt
    assert tracker.state.value(light, "brightness") == "30"
    tracker.update("wait", "Leo comes home.", {})  # step 2: checked before Leo is home
    assert tracker.state.value(leo, "location") == "home"
    assert tracker.state.value(light, "brightness") == "30"
    tracker.update("wait", "Quiet evening.", {})  # step 3: the condition now holds
    # The event fired before the model was asked, and the model saw its effect.
    assert f"{light} | brightness | 100\n" in server.requests[-1]["messages"][1]["content"]
    # Entities made by name alone carry no invented status fact.
    assert tracker.state == WorldState(
        [Fact(light, "brightness", "100"), Fact(leo, "location", "home")]
    )
    assert (tracker.stats.events_fired, tracker.stats.events_dropped) == (1, 0)
    assert tracker.stats.applied == 6


def _compose_llm_agent():
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        config = compose("eval", overrides=["agents=[llm]"])
    return EvalConfig.model_validate(OmegaConf.to_container(config, resolve=True))


def test_llm_agent_config_builds_a_tracker_for_the_endpoint(server, monkeypatch):
    monkeypatch.setenv("WMKIT_LLM_BASE_URL", server.url)
    monkeypatch.setenv("WMKIT_LLM_MODEL", "served-model")
    monkeypatch.delenv("WMKIT_LLM_CACHE", raising=False)
    spec = _compose_llm_agent().agents["llm"]
    tracker = instantiate(spec.tracker)
    assert isinstance(tracker, LLMTracker)
    server.script("```json\n[]\n```")
    tracker.reset("The parcel desk opens for the day.", {})
    [request] = server.requests
    assert (request["model"], request["temperature"]) == ("served-model", 0)


def test_llm_agent_config_without_endpoint_says_what_to_set(monkeypatch):
    monkeypatch.delenv("WMKIT_LLM_BASE_URL", raising=False)
    monkeypatch.setenv("WMKIT_LLM_MODEL", "served-model")
    spec = _compose_llm_agent().agents["llm"]
    with pytest.raises(Exception, match="WMKIT_LLM_BASE_URL") as caught:
        instantiate(spec.tracker)
    assert isinstance(caught.value, LLMConfigError) or isinstance(
        caught.value.__cause__, LLMConfigError
    )


def test_a_rotated_api_key_keeps_the_run_resumable(monkeypatch):
    # The key is a credential, not a setting: rows made with the old key still count.
    monkeypatch.setenv("WMKIT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("WMKIT_LLM_API_KEY", "old-key")
    old = _compose_llm_agent()
    monkeypatch.setenv("WMKIT_LLM_API_KEY", "new-key")
    new = _compose_llm_agent()
    assert old.agents["llm"] != new.agents["llm"]  # the key did reach the spec
    env = old.envs["parcel"]
    assert fingerprint(env, old.agents["llm"]) == fingerprint(env, new.agents["llm"])
    monkeypatch.setenv("WMKIT_LLM_MODEL", "another-model")
    assert fingerprint(env, _compose_llm_agent().agents["llm"]) != fingerprint(
        env, old.agents["llm"]
    )
