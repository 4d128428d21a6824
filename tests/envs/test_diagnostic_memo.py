"""Tests for the shared renderer's memos: ``Form.frame``, ``LineMemo`` and ``FrameMemo``.

A memo must return exactly what rendering returns, whatever the variant and wherever
its open slot sits in the template, and stay within its bound.
"""

from __future__ import annotations

import pytest

from wmkit.envs.diagnostic.text import (
    FrameMemo,
    LineMemo,
    MessageKind,
    SlotType,
    TextBook,
    Voice,
)

SLOTS = {
    "item": SlotType(r"[A-Z][a-z]+", str.capitalize, str.lower, entity=True),
    "price": SlotType(r"\d{1,3}(?:,\d{3})*", lambda c: f"{int(c):,}", lambda t: t.replace(",", "")),
}
BOOK = TextBook(
    [
        # The price (last in the order) sits in the middle, first, and last of the line.
        MessageKind(
            "quoted",
            (
                "{item}: {price} a night, quote valid.",
                "At {price} a night: {item}.",
                "Quote for {item} is {price}",
            ),
        ),
        MessageKind("waited", ("You wait.", "Time passes.")),
    ],
    SLOTS,
)
VOICE = Voice(BOOK, {"quoted": "item price"})


@pytest.mark.parametrize("variant", [0, 1, 2])
@pytest.mark.parametrize("price", ["7", "1250", "99999"])
def test_a_frame_around_its_last_slot_rebuilds_the_rendered_line(variant, price):
    form = VOICE.forms["quoted"]
    head, tail = form.frame(variant, ("azure",))
    assert head + form.to_text[1](price) + tail == form.render(variant, ("azure", price))
    assert "\0" not in head + tail


def test_a_frame_needs_every_value_but_the_last():
    form = VOICE.forms["quoted"]
    with pytest.raises(ValueError, match="1 values needed"):
        form.frame(0, ())
    with pytest.raises(ValueError, match="1 values needed"):
        form.frame(0, ("azure", "12"))


def test_the_line_memo_returns_the_rendered_line_and_keeps_it():
    memo = LineMemo(VOICE)
    key = ("quoted", 1, ("azure", "1250"))
    assert memo.get(key) is None
    line = memo.render(key)
    assert line == VOICE.forms["quoted"].render(1, ("azure", "1250")) == "At 1,250 a night: Azure."
    assert memo.get(key) == line and len(memo) == 1


def test_the_memos_are_bounded():
    memo = LineMemo(VOICE, size=3)
    for price in range(10):
        memo.render(("quoted", 0, ("azure", str(price))))
        assert len(memo) <= 3
    assert memo.get(("quoted", 0, ("azure", "9"))) == "Azure: 9 a night, quote valid."
    frames = FrameMemo(VOICE, size=2)
    for name in ("azure", "mira", "lumen", "nova"):
        frames.render(("quoted", 2, (name,)))
        assert len(frames) <= 2


def test_the_frame_memo_keeps_frames_per_item_not_per_price():
    frames = FrameMemo(VOICE)
    key = ("quoted", 0, ("mira",))
    head, tail = frames.get(key) or frames.render(key)
    for price in ("90", "1200"):
        assert head + f"{int(price):,}" + tail == VOICE.forms["quoted"].render(0, ("mira", price))
    assert frames.get(key) == (head, tail) and len(frames) == 1
    with pytest.raises(KeyError):
        frames.render(("unknown", 0, ("mira",)))
