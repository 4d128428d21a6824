"""Templated text for the diagnostic families: render messages, and read them back.

A family declares its message kinds once, as template strings with typed slots
(``"{parcel} was delivered to {address}."``) and the claims each kind states. The same
declaration renders observations and compiles the reader's regular expressions, so the
writer and the reader cannot drift apart: every paraphrase a family can emit is a
paraphrase its reader inverts.

Observations are one message per line. ``TextBook.read`` matches each line against every
template at once (one compiled alternation) and turns a match into the kind's claims, in
text order; lines that match nothing (chatter) yield no claims.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NamedTuple

from wmkit.world.types import Claim

__all__ = [
    "ClaimSpec",
    "Form",
    "FrameMemo",
    "LineMemo",
    "Message",
    "MessageKind",
    "SlotType",
    "TextBook",
    "Voice",
    "title_words",
]


def title_words(canonical: str) -> str:
    """Return ``canonical`` with each word capitalised: ``5 oak rd`` -> ``5 Oak Rd``."""
    return " ".join(map(str.capitalize, canonical.split(" ")))


class SlotType(NamedTuple):
    """How one kind of slot value looks in text and as a canonical string.

    Attributes:
        pattern: regular expression of the surface form; non-capturing groups only.
        to_text: canonical value -> surface form.
        to_canon: surface form -> canonical value; must invert ``to_text``.
        entity: whether canonical values are entity ids (they count as mentioned when
            the message is shown).
    """

    pattern: str
    to_text: Callable[[str], str]
    to_canon: Callable[[str], str]
    entity: bool = False


class ClaimSpec(NamedTuple):
    """One claim a message kind states.

    Attributes:
        subject: a slot name whose value is the subject id, or a description
            ``((relation, slot), ...)`` naming the subject by facts the reader holds.
        relation: the relation set.
        slot: the slot whose canonical value is the object; or None when ``value`` is.
        value: a literal object, fixed by the kind (e.g. the status a scan implies).
    """

    subject: str | tuple[tuple[str, str], ...]
    relation: str
    slot: str | None = None
    value: str | None = None


class MessageKind(NamedTuple):
    """A kind of message: its templates (``templates[0]`` canonical) and its claims."""

    name: str
    templates: tuple[str, ...]
    claims: tuple[ClaimSpec, ...] = ()


class Message(NamedTuple):
    """One line to show: which template of which kind, filled with canonical values.

    ``values`` is a tuple of ``(slot, canonical value)`` pairs so messages stay
    immutable and hashable inside a frozen env state.
    """

    kind: str
    variant: int
    values: tuple[tuple[str, str], ...] = ()


def _slots(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


class TextBook:
    """The message kinds of one family, with their renderer and their reader.

    Args:
        kinds: the message kinds; names unique.
        slot_types: slot name -> its ``SlotType``; every slot of every template needs one.

    Raises:
        ValueError: a template is malformed, repeats a slot, spans lines, uses an untyped
            slot, or lacks a slot its kind's claims need.
    """

    def __init__(self, kinds: Iterable[MessageKind], slot_types: Mapping[str, SlotType]) -> None:
        self.kinds: dict[str, MessageKind] = {}
        self.slot_types = dict(slot_types)
        for kind in kinds:
            if kind.name in self.kinds:
                raise ValueError(f"duplicate message kind {kind.name!r}")
            self._validate(kind)
            self.kinds[kind.name] = kind
        self._reader: re.Pattern[str] | None = None
        self._branches: dict[str, tuple[MessageKind, tuple[str, ...]]] = {}
        # Flat lookups for the hot path: render() runs for every line of every step.
        self._templates = {name: kind.templates for name, kind in self.kinds.items()}
        self._fixed = {  # lines without slots ("You wait."), rendered once
            name: tuple(None if _slots(t) else t.format_map({}) for t in kind.templates)
            for name, kind in self.kinds.items()
        }
        self._to_text = {slot: t.to_text for slot, t in self.slot_types.items()}
        self._is_entity = {slot: t.entity for slot, t in self.slot_types.items()}

    def _validate(self, kind: MessageKind) -> None:
        needed = set()
        for claim in kind.claims:
            if (claim.slot is None) == (claim.value is None):
                raise ValueError(f"{kind.name}: a claim needs exactly one of slot or value")
            if claim.slot is not None:
                needed.add(claim.slot)
            if isinstance(claim.subject, str):
                needed.add(claim.subject)
            else:
                needed.update(slot for _, slot in claim.subject)
        if not kind.templates:
            raise ValueError(f"{kind.name}: no templates")
        for template in kind.templates:
            slots = _slots(template)
            if "\n" in template or len(slots) != len(set(slots)):
                raise ValueError(f"{kind.name}: multi-line or repeated slot: {template!r}")
            if missing := [s for s in slots if s not in self.slot_types]:
                raise ValueError(f"{kind.name}: untyped slots {missing} in {template!r}")
            if missing := needed - set(slots):
                raise ValueError(f"{kind.name}: template lacks {sorted(missing)}: {template!r}")

    def variants(self, kind: str) -> int:
        """Return how many templates ``kind`` has (variant 0 is the canonical one)."""
        return len(self._templates[kind])

    def render(self, message: Message) -> str:
        """Return the line for ``message``: its template filled with surface forms."""
        kind, variant, values = message
        if not values and (fixed := self._fixed[kind][variant]) is not None:
            return fixed
        to_text = self._to_text
        return self._templates[kind][variant].format_map(
            {slot: to_text[slot](value) for slot, value in values}
        )

    def entities(self, message: Message) -> Iterator[str]:
        """Yield the entity ids named in ``message`` (values of entity-typed slots)."""
        is_entity = self._is_entity
        for slot, value in message.values:
            if is_entity[slot]:
                yield value

    def mentioned(self, messages: Iterable[Message]) -> list[str]:
        """Return the sorted, distinct entity ids named in ``messages`` (``wm.mentioned``)."""
        is_entity = self._is_entity
        return sorted({value for m in messages for slot, value in m.values if is_entity[slot]})

    def _compile(self) -> re.Pattern[str]:
        # One alternation over every template of every kind; each branch is a named
        # group ``t<n>`` that closes last, so ``match.lastgroup`` says which matched.
        branches = []
        for kind in self.kinds.values():
            for template in kind.templates:
                name = f"t{len(self._branches)}"
                parts = []
                slots = []
                for literal, slot, _, _ in string.Formatter().parse(template):
                    parts.append(re.escape(literal))
                    if slot is not None:
                        slots.append(slot)
                        parts.append(f"(?P<{name}_{slot}>{self.slot_types[slot].pattern})")
                branches.append(f"(?P<{name}>{''.join(parts)})")
                self._branches[name] = (kind, tuple(slots))
        return re.compile("|".join(branches))

    def read(self, text: str) -> list[Claim]:
        """Return every claim stated in ``text``, in text order.

        A description subject comes out as the tuple ``((relation, canonical), ...)``;
        resolving it is the reader's caller's job (it needs facts from earlier text).
        """
        if self._reader is None:
            self._reader = self._compile()
        claims: list[Claim] = []
        for line in text.split("\n"):
            match = self._reader.fullmatch(line.strip())
            if match is None:
                continue
            name = match.lastgroup
            kind, slots = self._branches[name]
            values = {
                slot: self.slot_types[slot].to_canon(match.group(f"{name}_{slot}"))
                for slot in slots
            }
            for spec in kind.claims:
                if isinstance(spec.subject, str):
                    subject: str | tuple[tuple[str, str], ...] = values[spec.subject]
                else:
                    subject = tuple((rel, values[slot]) for rel, slot in spec.subject)
                obj = values[spec.slot] if spec.slot is not None else spec.value
                claims.append(Claim(subject, spec.relation, obj))
        return claims


@dataclass(frozen=True, slots=True)
class Form:
    """One message kind compiled for the step path: values are passed positionally.

    A slotted class, not a NamedTuple: the step path reads its fields by name, and
    CPython 3.11 specialises slot reads but not NamedTuple field reads (~2/3 the cost).

    Attributes:
        name: the kind's name.
        order: the slots, in the order the step code passes their values.
        formats: per variant (0 canonical), the template as a ``%`` format; a template
            without slots is the line itself.
        reorders: per variant, a getter that puts ``order``-ordered values in the
            template's order; None where they already are.
        paraphrases: how many variants besides the canonical one.
        entities: positions in ``order`` of the entity-typed slots (what a line names).
        to_text: per position in ``order``, the slot type's canonical -> surface form.
    """

    name: str
    order: tuple[str, ...]
    formats: tuple[str, ...]
    reorders: tuple[Callable[[tuple[str, ...]], tuple[str, ...]] | None, ...]
    paraphrases: int
    entities: tuple[int, ...]
    to_text: tuple[Callable[[str], str], ...]

    def line(self, variant: int, texts: tuple[str, ...]) -> str:
        """Return variant ``variant`` filled with surface ``texts`` (in ``order``)."""
        if not texts:
            return self.formats[variant]
        reorder = self.reorders[variant]
        return self.formats[variant] % (texts if reorder is None else reorder(texts))

    def render(self, variant: int, values: tuple[str, ...]) -> str:
        """Return variant ``variant`` filled with canonical ``values`` (in ``order``)."""
        return self.line(variant, tuple([f(v) for f, v in zip(self.to_text, values, strict=True)]))

    def frame(self, variant: int, values: tuple[str, ...]) -> tuple[str, str]:
        """Return variant ``variant`` split at its last slot (in ``order``): ``(head, tail)``.

        ``values`` are the canonical values of the other slots; the line is ``head``, the
        last slot's surface form, ``tail``. For lines whose last value changes often (a
        price) while the rest recur: the frame is kept (:class:`FrameMemo`), not the line.
        """
        texts = tuple([f(v) for f, v in zip(self.to_text, values, strict=False)])
        if len(texts) != len(self.order) - 1:
            raise ValueError(f"{self.name}: {len(self.order) - 1} values needed, got {values}")
        head, _, tail = self.line(variant, (*texts, "\0")).partition("\0")
        return head, tail


def _percent(template: str, order: tuple[str, ...]) -> tuple[str, Callable | None]:
    # ``template`` as a ``%`` format, and the getter that reorders ``order``'s values for it.
    if not order:
        return template, None
    parts, used = [], []
    for literal, slot, spec, conversion in string.Formatter().parse(template):
        parts.append(literal.replace("%", "%%"))
        if slot is not None:
            if spec or conversion:
                raise ValueError(f"{template!r}: only plain {{slot}} fields are supported")
            parts.append("%s")
            used.append(order.index(slot))
    if used == list(range(len(order))):
        return "".join(parts), None
    return "".join(parts), itemgetter(*used) if len(used) > 1 else lambda v, k=used[0]: (v[k],)


class Voice:
    """The one renderer of a family's step path, compiled once from its ``TextBook``.

    ``TextBook.render`` builds a ``Message`` and a dict per line; on the step path a
    family renders from :attr:`forms` (``%`` formats, values passed positionally in a
    declared order) or, where speed matters less, from :attr:`kinds` with
    :meth:`StepDraft.say <wmkit.envs.diagnostic.core.StepDraft.say>`.

    Args:
        book: the family's message kinds.
        orders: kind name -> the order (slot names, a tuple or a space-separated string)
            in which the step code passes that kind's values; written out by the family
            so that rewording a template, even reordering its slots, cannot misplace a
            value. Kinds not listed take the slot order of their canonical template.
        exempt: kinds whose variants may name different slots (chatter drawn apart);
            they get no form.

    Attributes:
        to_text: slot name -> its type's ``to_text``.
        kinds: kind name -> (templates, entity slots of any of its templates, in order).
        forms: kind name -> its :class:`Form`.

    Raises:
        ValueError: a kind's templates do not all have exactly the slots of its order.
    """

    def __init__(
        self,
        book: TextBook,
        orders: Mapping[str, str | tuple[str, ...]] | None = None,
        exempt: Iterable[str] = ("chatter",),
    ) -> None:
        self.to_text = {slot: t.to_text for slot, t in book.slot_types.items()}
        self.kinds = {
            name: (
                kind.templates,
                tuple(
                    {
                        slot: None
                        for template in kind.templates
                        for _, slot, _, _ in string.Formatter().parse(template)
                        if slot and book.slot_types[slot].entity
                    }
                ),
            )
            for name, kind in book.kinds.items()
        }
        orders = dict(orders or {})
        exempt = set(exempt)
        if unknown := set(orders) - set(book.kinds):
            raise ValueError(f"say orders for unknown kinds {sorted(unknown)}")
        self.forms: dict[str, Form] = {}
        for name, kind in book.kinds.items():
            if name in exempt:
                continue
            order = orders.get(name)
            if order is None:
                order = tuple(_slots(kind.templates[0]))
            elif isinstance(order, str):
                order = tuple(order.split())
            for template in kind.templates:
                if sorted(_slots(template)) != sorted(order):
                    raise ValueError(f"{name}: say order {order} does not fit {template!r}")
            compiled = [_percent(t, order) for t in kind.templates]
            self.forms[name] = Form(
                name,
                order,
                tuple(fmt for fmt, _ in compiled),
                tuple(reorder for _, reorder in compiled),
                len(kind.templates) - 1,
                tuple(k for k, slot in enumerate(order) if book.slot_types[slot].entity),
                tuple(book.slot_types[slot].to_text for slot in order),
            )


class LineMemo(dict):
    """Lines rendered from a :class:`Voice`'s forms, memoised by their key.

    The key is ``(kind, variant, values)``, ``values`` canonical in the form's order. A
    line is a pure function of its key, and lines about one thing (an offer, a city, a
    person) recur all episode: a hit costs one dict lookup where rendering costs a
    microsecond or more. The step path reads ``memo.get(key) or memo.render(key)``.
    Bounded: emptied when it holds ``size`` lines (ids drawn fresh keep coming).

    Args:
        voice: the family's :class:`Voice`.
        size: the most lines kept.
    """

    __slots__ = ("forms", "size")

    def __init__(self, voice: Voice, size: int = 8192) -> None:
        super().__init__()
        self.forms = voice.forms
        self.size = size

    def render(self, key: tuple[str, int, tuple[str, ...]]) -> str:
        """Return the line of ``key`` (``Form.render``), and keep it."""
        kind, variant, values = key
        return self._keep(key, self.forms[kind].render(variant, values))

    def _keep(self, key: tuple[str, int, tuple[str, ...]], value: Any) -> Any:
        if len(self) >= self.size:
            self.clear()
        self[key] = value
        return value


class FrameMemo(LineMemo):
    """Line frames (:meth:`Form.frame`) memoised by their key.

    The key is ``(kind, variant, values but the last)``, the frame ``(head, tail)``. For
    lines whose last value rarely repeats (a price that drifts) while the rest recur (an
    offer's name): ``head, tail = memo.get(key) or memo.render(key)``, then the line is
    ``head + last + tail`` (``last`` in its surface form).
    """

    __slots__ = ()

    def render(self, key: tuple[str, int, tuple[str, ...]]) -> tuple[str, str]:  # type: ignore
        """Return the frame of ``key`` (``Form.frame``), and keep it."""
        kind, variant, values = key
        return self._keep(key, self.forms[kind].frame(variant, values))
