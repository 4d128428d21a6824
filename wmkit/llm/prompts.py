"""Every prompt wmkit sends to a model, in one place.

Prompts are short and plain: a model that follows the JSON format is what matters, and
each word here is paid for on every step. The reply format is the one of seed 000
(§5.4): an optional THINK block of reasoning, then one ```json block, which
``wmkit.llm.structured`` parses (and repairs from the THINK block when it fails).

- ``correction_message``: sent after a reply that could not be used, quoting why.
- ``TRACKER_SYSTEM`` and ``tracker_user``: the ``LLMTracker``'s system prompt and its
  per-step message. The step message ends with ``OBSERVATION_HEADER`` and the raw
  observation, so a test server (or a log reader) can find the observation.
- ``DISTILL_SYSTEM`` and ``distill_user``: the ``LLMDistiller``'s prompt (seed 001 §4.1:
  a knowledge delta of entities, states, edges and rules from scenes), with the rule
  syntax of ``wmkit.knowledge.rules`` so that its rules can be read and checked.
- ``VALUE_SYSTEM``, ``value_user`` and ``VALUE_HINT``: the ``LLMValue``'s prompt (seed
  004 §3.2, the state evaluator, reduced to one value in [0, 1] and a short reason).
- ``WINDOW_SYSTEM``, ``window_user`` and ``answer_user``: the ``LLMWindowTracker``'s
  prompts (the facts its last K observations state; questions answered from them,
  ``unknown`` allowed).
- ``POLICY_SYSTEM`` and ``policy_user``: the ``LLMPolicy``'s (one command of those
  listed, from its memory: tracked facts or its last K observations).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from wmkit.world.types import Fact

__all__ = [
    "DISTILL_SYSTEM",
    "FACTS_TASK",
    "OBSERVATION_HEADER",
    "POLICY_SYSTEM",
    "REPLY_FORMAT",
    "TRACKER_SYSTEM",
    "VALUE_HINT",
    "VALUE_SYSTEM",
    "WINDOW_SYSTEM",
    "answer_user",
    "correction_message",
    "distill_user",
    "policy_user",
    "question",
    "tracker_user",
    "value_user",
    "window_user",
]

REPLY_FORMAT = (
    "Reply format: optionally a line `THINK:` followed by brief reasoning, then exactly one "
    "```json fenced block holding the JSON and nothing after it."
)

OBSERVATION_HEADER = "Observation:\n"


def correction_message(why: str, hint: str = "") -> str:
    """Return the message that asks again after an unusable reply.

    Args:
        why: what was wrong with the reply (parser or validator message, with field paths).
        hint: one more line on the shape wanted; optional.
    """
    lines = [f"Your last reply could not be used: {why}", REPLY_FORMAT]
    if hint:
        lines.append(hint)
    lines.append("Answer again with corrected JSON.")
    return "\n".join(lines)


TRACKER_SYSTEM = f"""\
You keep the world state of a text task as facts `subject | relation | object`.
Each turn you get the facts, the last command and the new observation. Answer with a \
JSON list of atomic actions that make the facts agree with the observation: [] if \
nothing changed. Change only what the observation states.

Name entities `type:name` in lower case (parcel:px-4821, person:ann, hub:lyon) and reuse \
names from the facts. Values are lower-case strings. Every action has a short "reason".
- {{"kind": "update_entity", "entity_id": "parcel:px-4821", "attributes": \
{{"location": "hub:lyon", "status": "in_transit"}}, "reason": "scan"}}: sets facts, \
replacing old values; a new name creates the entity.
- {{"kind": "add_relation"|"remove_relation", "src": ..., "relation": ..., "dst": ..., \
"reason": ...}}: a link between two entities, for relations with several objects.
- {{"kind": "schedule_event", "event_id": "e1", "delay": 3, "condition": null, \
"actions": [update_entity ...], "reason": ...}}: changes due `delay` steps from now; a \
condition such as "fact('person:leo', 'location') == 'home'" holds them until true.
- {{"kind": "cancel_event", "event_id": "e1", "reason": ...}}.
{REPLY_FORMAT}"""
"""The tracker's system prompt: the fact model, the actions, the reply format."""


def tracker_user(
    facts: Sequence[Fact],
    events: Iterable[str],
    command: str | None,
    observation: str,
    *,
    omitted: int = 0,
) -> str:
    """Return the tracker's message for one step.

    Args:
        facts: the tracked facts shown to the model, in display order.
        events: one line per pending event (``id: due in N steps, <reason>``).
        command: the command just sent; None on the first observation of an episode.
        observation: the observation it produced, verbatim (always last).
        omitted: facts left out to bound the prompt (said so, so the model does not
            read their absence as "unknown").
    """
    lines = ["Facts:" if facts else "Facts: (none yet)"]
    lines += [f"{s} | {r} | {o}" for s, r, o in facts]
    if omitted:
        lines.append(f"({omitted} older facts not shown)")
    events = list(events)
    if events:
        lines.append("Pending events:")
        lines += events
    lines.append(f"Command: {command}" if command is not None else "Command: (episode start)")
    return "\n".join(lines) + "\n" + OBSERVATION_HEADER + observation


DISTILL_SYSTEM = f"""\
You distil the rules of a text environment from scenes. Each scene gives the facts \
before a step (`subject | relation | object`), the command, the observation, and the \
true change, split into what the command caused and what the environment did by itself \
(events: timers, mechanisms). Answer with one knowledge delta, a JSON object:
{{"entities": [{{"name": "door:willow", "type": "door", "properties": {{"lock": "keyhole"}}}}],
 "states": [{{"name": "willow_latched", "type": "door_state", \
"conditions": ["door:willow.latch == down"]}}],
 "edges": [{{"relation": "containment", "src_ref": "room:hall", "dst_ref": "key:brass"}}],
 "rules": [{{"condition": "...", "action": "...", "confidence": 0.9}}]}}
Edges relate nodes named in entities or states; relation is transition, containment or \
episodic. Rules are what matters most; write them in this exact syntax, generalising \
entity names to typed slots ({{door}}, {{key}}, {{room2}} for a second room, {{v}} for a \
number or value) that appear in the template:
- condition: command "<command template>" [and <precondition>]..., where a \
precondition is {{slot}}.relation == "value", {{slot}}.relation == {{slot2}}, \
"player".relation == "value", or {{slot}} == "entity:id" (the rule holds for that entity \
only); or observation "<sentence template>" with no preconditions (the sentence states it).
- action: [event: ][not ]{{slot}}.relation := "value" (sets it), += / -= (adds / removes one \
of several values), {{slot}}.relation := {{slot}}.relation + {{v}} (a number changed by \
{{v}}). `not` states a failure: under the condition the change does not happen. \
`event:` marks a change the environment made by itself.
Templates are lower case, words separated by single spaces, no punctuation. Example: \
{{"condition": "command \\"open {{door}}\\" and {{door}}.latch == \\"down\\" and \
{{door}} == \\"door:willow\\"", "action": "not {{door}}.state := \\"open\\"", "confidence": 0.9}}.
Confidence is in [0, 1]. State only what the scenes support.
{REPLY_FORMAT}"""
"""The distiller's system prompt: the seed 001 delta format and the rule syntax."""


def _fmt_changes(delta: Any) -> str:
    parts = [f"+ {s} | {r} | {o}" for s, r, o in delta.added]
    parts += [f"- {s} | {r} | {o}" for s, r, o in delta.removed]
    return "; ".join(parts) if parts else "none"


def distill_user(
    scenes: Sequence[Mapping[str, Any]], known_rules: Iterable[tuple[str, str]] = ()
) -> str:
    """Return the distiller's message for a batch of scenes.

    Args:
        scenes: each with ``action``, ``observation``, ``facts`` (facts before the step,
            a sequence of triples), ``action_delta`` and ``event_delta`` (each with
            ``added``/``removed`` triples).
        known_rules: ``(condition, action)`` of rules already proposed (not to repeat).
    """
    lines = []
    known = list(known_rules)
    if known:
        lines.append("Rules already known:")
        lines += [f"- {c} => {a}" for c, a in known]
    for i, scene in enumerate(scenes, start=1):
        lines.append(f"Scene {i}")
        lines.append("Facts before:")
        lines += [f"{s} | {r} | {o}" for s, r, o in scene["facts"]] or ["(none)"]
        lines.append(f"Command: {scene['action']}")
        lines.append(OBSERVATION_HEADER + scene["observation"].strip())
        lines.append(f"Changed by the command: {_fmt_changes(scene['action_delta'])}")
        lines.append(f"Changed by events: {_fmt_changes(scene['event_delta'])}")
    return "\n".join(lines)


VALUE_SYSTEM = f"""\
You judge states of a text task for a planner that searches ahead. Each turn you get the \
goal, the score so far, the commands available and the latest observation. Say how \
promising this state is for reaching the goal: "value" from 0 (hopeless, stuck or lost) \
to 1 (the goal is one step away), and a "reason" of at most one short sentence. Judge \
the state, not the wording: progress made, useful things at hand, dead ends.
Answer with one JSON object: {{"value": 0.4, "reason": "the key is here but the door \
is still barred"}}.
{REPLY_FORMAT}"""
"""The value judge's system prompt: what to rate, the scale, the reply format."""

VALUE_HINT = 'Wanted: {"value": <number from 0 to 1>, "reason": "<one short sentence>"}.'
"""The shape line added to a value correction message."""


def value_user(
    observation: str,
    *,
    goal: str = "",
    score: float | None = None,
    max_score: float | None = None,
    actions: Sequence[str] = (),
    omitted: int = 0,
) -> str:
    """Return the value judge's message for one state.

    Args:
        observation: the text the step into the state produced, verbatim (always last).
        goal: the task's goal in words; left out when empty.
        score: the score so far; left out when None.
        max_score: the most the task can score; shown with the score when positive.
        actions: the commands available there, as the env lists them.
        omitted: commands left out to bound the prompt (said so).
    """
    lines = [f"Goal: {goal}"] if goal else []
    if score is not None:
        lines.append(f"Score: {score:g}" + (f" of {max_score:g}" if max_score else ""))
    shown = ", ".join(actions) if actions else "(none listed)"
    lines.append(f"Commands: {shown}" + (f" (and {omitted} more)" if omitted else ""))
    return "\n".join(lines) + "\n" + OBSERVATION_HEADER + observation


_NAMING = (
    "Name entities `type:name` in lower case (parcel:px-4821, person:ann, hub:lyon, "
    "light:den, door:maple) and values as lower-case strings."
)

WINDOW_SYSTEM = f"""\
You read the latest observations of a text task; nothing else is known. {_NAMING} Later \
observations override earlier ones. After the observations comes one task:
- "List the facts": answer with a JSON list of what the observations say is true now, \
e.g. [{{"subject": "parcel:px-4821", "relation": "location", "object": "hub:lyon"}}].
- "Questions": answer with one JSON object mapping each question's number to its \
answer, e.g. {{"1": "hub:lyon", "2": "unknown"}}. When the observations do not say, the \
answer is "unknown": never guess.
{REPLY_FORMAT}"""
"""The window tracker's system prompt, shared by its two tasks so that a server's
prompt cache reuses the observations between them."""

FACTS_TASK = "Task: List the facts."
"""The last line of the window tracker's facts request."""


def _observations(window: Sequence[tuple[str | None, str]]) -> list[str]:
    lines = []
    for i, (command, observation) in enumerate(window, start=1):
        said = f"Command: {command}" if command is not None else "Command: (episode start)"
        lines += [f"[{i}] {said}", observation.strip()]
    return lines


def window_user(window: Sequence[tuple[str | None, str]], task: str = FACTS_TASK) -> str:
    """Return a window tracker's message: the last observations, oldest first, then the task.

    Args:
        window: ``(command, observation)`` pairs, oldest first (command None at the
            episode's start).
        task: the closing lines (:data:`FACTS_TASK`, or the questions of
            :func:`answer_user`).
    """
    return "\n".join(["Observations, oldest first:", *_observations(window), task])


def question(subject: str, relation: str) -> str:
    """Return a probe as a question: ``What is the location of parcel:px-4821?``."""
    return f"What is the {relation.replace('_', ' ')} of {subject}?"


def answer_user(
    window: Sequence[tuple[str | None, str]], questions: Sequence[tuple[str, str]]
) -> str:
    """Return the question message: the observations, then the numbered questions.

    Args:
        window: as for :func:`window_user`.
        questions: ``(subject, relation)`` pairs, rendered by :func:`question`.
    """
    lines = ["Task: Questions"]
    lines += [f"{i}. {question(s, r)}" for i, (s, r) in enumerate(questions, start=1)]
    return window_user(window, "\n".join(lines))


POLICY_SYSTEM = f"""\
You act in a text task. Each turn you get what you remember (facts you track, or the \
latest observations), the latest observation and the commands you may send. Pick the \
command that makes the most progress.
Answer with one JSON object: {{"command": "<one of the commands, copied exactly>"}}.
{REPLY_FORMAT}"""
"""The LLM policy's system prompt."""


def policy_user(
    observation: str,
    commands: Sequence[str],
    *,
    facts: Sequence[Fact] | None = None,
    window: Sequence[tuple[str | None, str]] = (),
    goal: str = "",
    omitted: int = 0,
) -> str:
    """Return the policy's message for one decision.

    Args:
        observation: the latest observation, verbatim (always last).
        commands: the commands it may send (shown numbered, in order).
        facts: its tracked facts (structured memory); None for a window memory.
        window: its earlier ``(command, observation)`` pairs (window memory), oldest
            first, the latest left out (it is ``observation``).
        goal: the task's goal in words; left out when empty.
        omitted: facts left out to bound the prompt (said so).
    """
    lines = [f"Goal: {goal}"] if goal else []
    if facts is not None:
        lines.append("Facts you track:" if facts else "Facts you track: (none)")
        lines += [f"{s} | {r} | {o}" for s, r, o in facts]
        if omitted:
            lines.append(f"({omitted} more facts not shown)")
    elif window:
        lines += ["Earlier observations, oldest first:", *_observations(window)]
    lines.append("Commands:")
    lines += [f"- {c}" for c in commands]
    return "\n".join(lines) + "\n" + OBSERVATION_HEADER + observation
