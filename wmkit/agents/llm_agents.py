"""A language model as the context-is-the-world baseline, and as a policy.

- :class:`LLMWindowTracker` (``llm_window``): the model keeps no state of its own. Each
  step it reads its last ``k`` observations and lists the facts they state (the
  tracked state drift and confusion are scored on), and when the evaluation asks
  probes it answers them as questions from those observations alone, ``unknown``
  allowed. It is :class:`~wmkit.agents.trackers.WindowTracker` with a real model for a
  reader: what scrolled out of its window is gone.
- :class:`LLMPolicy`: the model picks one of the admissible commands, remembering
  either its tracked facts (``memory="structured"``, whatever tracker the agent has:
  the ``llm`` tracker's engine state for ``llm_structured``) or its last ``k``
  observations (``memory="window"``).

Both constrain their replies to a JSON schema where the client can
(:func:`wmkit.llm.schema.bounded_schema`; the command is an ``enum`` of the admissible
ones), keep the THINK-and-repair path of :func:`wmkit.llm.ask_structured` for servers
that cannot, and count every request and reply in the client's ``usage``. A request
that fails transiently (timeout, 5xx after retries) costs the step, never the episode:
the tracker keeps its last facts and answers ``unknown``, the policy falls back to a
random admissible command (counted in ``fallbacks``); one that retrying cannot fix
(refused connection, 401) stops the run with its cause.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from wmkit.llm.errors import LLMError
from wmkit.llm.prompts import (
    POLICY_SYSTEM,
    WINDOW_SYSTEM,
    answer_user,
    policy_user,
    window_user,
)
from wmkit.llm.schema import bounded_schema
from wmkit.llm.structured import StructuredResult, ask_structured
from wmkit.llm.types import ChatModel, Message
from wmkit.world.types import UNKNOWN, Fact, WorldState

__all__ = ["LLMPolicy", "LLMWindowTracker"]

log = logging.getLogger(__name__)

T = TypeVar("T")

Window = deque[tuple[str | None, str]]


class _FactReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subject: str = Field(min_length=1, max_length=80)
    relation: str = Field(min_length=1, max_length=80)
    object: str = Field(min_length=1, max_length=80)


class _CommandReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str


def _ask(
    client: ChatModel,
    messages: list[Message],
    parse_fn: Callable[[str], T],
    *,
    schema: Mapping[str, Any] | None,
    max_repairs: int,
    hint: str,
    params: Mapping[str, Any],
    what: str,
) -> StructuredResult[T] | None:
    """``ask_structured``, except that a transient request error is logged and gives None."""
    try:
        return ask_structured(
            client,
            messages,
            parse_fn=parse_fn,
            max_repairs=max_repairs,
            hint=hint,
            params=params,
            json_schema=schema,
        )
    except LLMError as err:
        if not err.transient:
            raise
        log.warning("%s: request failed, step skipped: %s", what, err)
        return None


def _norm(value: str) -> str:
    return " ".join(value.strip().lower().split())


def _parse_facts(text: str) -> tuple[Fact, ...]:
    replies = json.loads(text)
    if not isinstance(replies, list):
        raise ValueError("the JSON must be a list of facts")
    facts = [_FactReply.model_validate(item) for item in replies]
    return tuple(Fact(_norm(f.subject), _norm(f.relation), _norm(f.object)) for f in facts)


_FACTS_HINT = 'Wanted: a JSON list of {"subject": ..., "relation": ..., "object": ...} facts.'
_ANSWERS_HINT = 'Wanted: one JSON object {"1": "<answer or unknown>", ...}, every question.'
_COMMAND_HINT = 'Wanted: {"command": "<one of the commands, copied exactly>"}.'


class LLMWindowTracker:
    """The model reads its last ``k`` observations, and only those, into facts and answers.

    Args:
        client: the chat model (a ``wmkit.llm.ChatClient``).
        k: observations kept (the window), the latest included.
        max_facts: the most facts a reply may list (bounds the reply).
        constrained: send the reply's JSON schema with every request (the client's
            ``constrain`` says how; a client without it ignores it).
        max_repairs: correction rounds after a reply that does not validate.
        params: request fields for every request, e.g. ``{"temperature": 0}``.

    Attributes:
        window: the ``(command, observation)`` pairs in view, oldest first.
    """

    def __init__(
        self,
        client: ChatModel,
        *,
        k: int = 5,
        max_facts: int = 24,
        constrained: bool = True,
        max_repairs: int = 0,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        if k < 1 or max_facts < 1 or max_repairs < 0:
            raise ValueError(
                f"LLMWindowTracker needs k >= 1, max_facts >= 1 and max_repairs >= 0, "
                f"got {k}, {max_facts}, {max_repairs}"
            )
        self.client = client
        self.k = k
        self.max_facts = max_facts
        self.max_repairs = max_repairs
        self.params = dict(params or {})
        self.window: Window = deque(maxlen=k)
        self._facts_schema = (
            bounded_schema(list[_FactReply], max_string=40, max_items=max_facts)
            if constrained
            else None
        )
        self.constrained = constrained
        self._state = WorldState()

    @property
    def state(self) -> WorldState:  # noqa: D102
        return self._state

    def reset(self, observation: str, info: Mapping[str, Any]) -> None:  # noqa: D102
        self.window.clear()
        self._state = WorldState()
        self._observe(None, observation)

    def update(self, action: str, observation: str, info: Mapping[str, Any]) -> None:  # noqa: D102
        self._observe(action, observation)

    def _observe(self, command: str | None, observation: str) -> None:
        self.window.append((command, observation))
        messages: list[Message] = [
            {"role": "system", "content": WINDOW_SYSTEM},
            {"role": "user", "content": window_user(self.window)},
        ]
        result = _ask(
            self.client,
            messages,
            _parse_facts,
            schema=self._facts_schema,
            max_repairs=self.max_repairs,
            hint=_FACTS_HINT,
            params=self.params,
            what="LLMWindowTracker",
        )
        if result is not None and result.ok:
            # One object per (subject, relation): the last listed wins, as the prompt
            # says later observations override earlier ones.
            held = {(f.subject, f.relation): f for f in result.value or ()}
            self._state = WorldState(held.values())

    def answer(self, questions: Sequence[tuple[str, str]]) -> list[str | None]:
        """Answer ``(subject, relation)`` questions from the window; None for unknown.

        One request for all of them. A reply that never validates, or a request that
        fails transiently, answers every question None (unknown).
        """
        if not questions:
            return []
        keys = [str(i) for i in range(1, len(questions) + 1)]
        schema = None
        if self.constrained:
            answer = {"type": "string", "minLength": 1, "maxLength": 40}
            schema = {
                "type": "object",
                "properties": {key: answer for key in keys},
                "required": keys,
                "additionalProperties": False,
            }

        def parse(text: str) -> list[str | None]:
            replies = json.loads(text)
            if not isinstance(replies, dict):
                raise ValueError("the JSON must be an object mapping numbers to answers")
            missing = [key for key in keys if not isinstance(replies.get(key), str)]
            if missing:
                raise ValueError(f"no string answer to question(s) {', '.join(missing)}")
            return [None if _norm(replies[key]) == UNKNOWN else _norm(replies[key]) for key in keys]

        messages: list[Message] = [
            {"role": "system", "content": WINDOW_SYSTEM},
            {"role": "user", "content": answer_user(self.window, questions)},
        ]
        result = _ask(
            self.client,
            messages,
            parse,
            schema=schema,
            max_repairs=self.max_repairs,
            hint=_ANSWERS_HINT,
            params=self.params,
            what="LLMWindowTracker.answer",
        )
        if result is None or not result.ok:
            return [None] * len(questions)
        return list(result.value or [])


class LLMPolicy:
    """The model picks the next command from the admissible ones.

    Args:
        client: the chat model (a ``wmkit.llm.ChatClient``).
        memory: what it is shown besides the latest observation: ``structured``, the
            agent's tracked facts (at most ``max_facts``); ``window``, its own last
            ``k`` observations.
        k: observations remembered with ``memory="window"``.
        max_facts: facts shown with ``memory="structured"``.
        max_commands: admissible commands shown (the first ones, in the env's order).
        goal: the task's goal in words, shown every turn.
        constrained: constrain the reply to ``{"command": <enum of those shown>}``.
        max_repairs: correction rounds after a reply that is not one of the commands.
        params: request fields for every request.

    Attributes:
        fallbacks: decisions this episode where no valid command came and a random
            admissible one was sent.
    """

    def __init__(
        self,
        client: ChatModel,
        *,
        memory: Literal["structured", "window"] = "structured",
        k: int = 5,
        max_facts: int = 60,
        max_commands: int = 40,
        goal: str = "",
        constrained: bool = True,
        max_repairs: int = 0,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        if memory not in ("structured", "window"):
            raise ValueError(f"LLMPolicy memory must be 'structured' or 'window', got {memory!r}")
        if min(k, max_facts, max_commands) < 1 or max_repairs < 0:
            raise ValueError(
                "LLMPolicy needs k, max_facts and max_commands >= 1 and max_repairs >= 0"
            )
        self.client = client
        self.memory = memory
        self.max_facts = max_facts
        self.max_commands = max_commands
        self.goal = goal
        self.constrained = constrained
        self.max_repairs = max_repairs
        self.params = dict(params or {})
        self.window: Window = deque(maxlen=k)
        self.fallbacks = 0
        self._rng = np.random.default_rng(0)
        self._last: str | None = None

    def reset(self, rng: np.random.Generator) -> None:  # noqa: D102
        self._rng = rng
        self.window.clear()
        self.fallbacks = 0
        self._last = None

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:  # noqa: D102
        actions = list(info.get("admissible_actions") or ())
        if not actions:
            raise KeyError("the env gave no admissible_actions in info; LLMPolicy needs them")
        shown = actions[: self.max_commands]
        facts, omitted = None, 0
        if self.memory == "structured":
            every = sorted(tracked)
            facts, omitted = every[: self.max_facts], max(0, len(every) - self.max_facts)
        earlier = list(self.window)
        self.window.append((self._last, observation))
        messages: list[Message] = [
            {"role": "system", "content": POLICY_SYSTEM},
            {
                "role": "user",
                "content": policy_user(
                    observation,
                    shown,
                    facts=facts,
                    window=earlier if self.memory == "window" else (),
                    goal=self.goal,
                    omitted=omitted,
                ),
            },
        ]
        schema = None
        if self.constrained:
            schema = {
                "type": "object",
                "properties": {"command": {"type": "string", "enum": shown}},
                "required": ["command"],
                "additionalProperties": False,
            }
        allowed = set(shown)

        def parse(text: str) -> str:
            command = _CommandReply.model_validate_json(text).command.strip()
            if command not in allowed:
                raise ValueError(f"{command[:80]!r} is not one of the commands listed")
            return command

        result = _ask(
            self.client,
            messages,
            parse,
            schema=schema,
            max_repairs=self.max_repairs,
            hint=_COMMAND_HINT,
            params=self.params,
            what="LLMPolicy",
        )
        if result is not None and result.ok and result.value is not None:
            command = result.value
        else:
            self.fallbacks += 1
            command = actions[int(self._rng.integers(len(actions)))]
        self._last = command
        return command
