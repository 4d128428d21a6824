"""The rule model: reading text into templates, predicting with rules, the rules file."""

import json

import pytest

from wmkit.knowledge.delta import validate_delta
from wmkit.knowledge.graph import WorldGraph
from wmkit.knowledge.rules import (
    Atom,
    Lexicon,
    Rule,
    RulesError,
    RuleSet,
    StateIndex,
    abstract,
    apply_atoms,
    describe,
    entity_surfaces,
    literal_surfaces,
    parse_rule_text,
    rule_text,
    sentences,
    tokenize,
    wilson_lower,
)
from wmkit.world.types import Delta, Fact, WorldState


def F(*triple):
    return Fact(*triple)


HALL = WorldState(
    [
        F("player", "at", "room:hall"),
        F("door:willow", "state", "closed"),
        F("door:willow", "latch", "down"),
        F("door:willow", "lock", "keyhole"),
        F("door:willow", "north", "room:hall"),
        F("door:oak", "state", "closed"),
        F("door:oak", "west", "room:hall"),
        F("key:brass", "in", "player"),
        F("key:bone", "in", "room:hall"),
    ]
)
LEXICON = Lexicon(
    literals=frozenset({"closed", "open", "locked", "down", "up", "keyhole", "player"}),
    static_relations=frozenset({"north", "west", "lock"}),
    styles={"door": ("name_type",), "key": ("name_type",), "room": ("name",)},
)


def cmd(template, atom, *conditions, predicts=True, confidence=1.0, support=10):
    return Rule(
        "command", template, tuple(sorted(conditions)), atom, predicts, support, 0, confidence
    )


def obs(template, atom, confidence=1.0):
    return Rule("observation", template, (), atom, True, 10, 10, confidence)


OPEN = Atom("action", "set", "{door}", "state", "open")
RULES = RuleSet(
    [
        cmd("open {door}", OPEN, ("{door}", "state", "closed"), confidence=0.9),
        # The failure precondition: the latch holds this door shut.
        cmd(
            "open {door}",
            OPEN,
            ("{door}", "latch", "down"),
            ("{door}", "=", "door:willow"),
            predicts=False,
        ),
        cmd("take {key}", Atom("action", "set", "{key}", "in", "player")),
        obs(
            "the {door} swings shut on its spring",
            Atom("event", "set", "{door}", "state", "closed"),
        ),
        obs("you {v} the {door}", Atom("action", "set", "{door}", "state", "{v}")),
    ],
    LEXICON,
)


def test_tokenize_lowercases_keeps_ids_and_signed_numbers():
    assert tokenize("Unlock the Willow door, with PX-1514!") == (
        "unlock", "the", "willow", "door", "with", "px-1514",
    )  # fmt: skip
    assert tokenize("adjust lamp by +40; budget 13,000") == (
        "adjust",
        "lamp",
        "by",
        "+40",
        "budget",
        "13000",
    )


def test_sentences_are_lines_then_the_sentences_of_long_lines():
    text = "You read the note. It says 1936.\n\nA rat scurries."
    assert sentences(text) == [
        "You read the note. It says 1936.",
        "You read the note.",
        "It says 1936.",
        "A rat scurries.",
    ]  # fmt: skip


def test_surfaces_name_entities_by_their_forms_and_drop_ambiguous_ones():
    surfaces = entity_surfaces(
        ["door:willow", "light:pantry", "blind:pantry", "thermostat:home"], {"home"}
    )
    table = surfaces.table
    assert table[("willow", "door")] == ("door", "door:willow", "name_type")
    assert table[("willow",)] == ("door", "door:willow", "name")
    assert table[("pantry", "blinds")] == ("blind", "blind:pantry", "name_types")
    assert ("pantry",) not in table  # a light and a blind share the bare name
    assert ("home",) not in table  # a literal value, not the thermostat
    assert table[("thermostat",)] == ("thermostat", "thermostat:home", "type")  # only one


def test_abstract_slots_mentions_longest_first_and_numbers():
    surfaces = entity_surfaces(["door:willow", "key:brass", "room:hall"])
    read = abstract(tokenize("Unlock the willow door with the brass key, 2 times"), surfaces)
    assert read.template == "unlock the {door} with the {key} {v} times"
    assert read.slots == (("{door}", "door:willow"), ("{key}", "key:brass"), ("{v}", "2"))
    read = abstract(tokenize("reroute px-1 to 81 garden rd"), entity_surfaces(["parcel:px-1"]),
                    literal_surfaces(["81 garden rd"]))  # fmt: skip
    assert read.template == "reroute {parcel} to {v}"
    assert read.slots[1] == ("{v}", "81 garden rd")


def test_failure_rule_overrides_the_general_rule_only_where_it_matches():
    assert RULES.predict(HALL, "open willow door") == Delta()  # latch down: held shut
    lifted = WorldState(
        (HALL.facts - {F("door:willow", "latch", "down")}) | {F("door:willow", "latch", "up")}
    )
    assert RULES.predict(lifted, "open willow door") == Delta(
        (F("door:willow", "state", "open"),), (F("door:willow", "state", "closed"),)
    )
    assert RULES.predict(HALL, "open oak door") == Delta(
        (F("door:oak", "state", "open"),), (F("door:oak", "state", "closed"),)
    )
    assert RULES.predict(HALL, "dance") == Delta()


def test_observation_rules_read_unknown_names_through_learned_forms():
    act, event = RULES.predict_split(HALL, "wait", "The ash door swings shut on its spring.")
    # door:ash is not in the state: the text names it the way doors are named.
    assert event == Delta((F("door:ash", "state", "closed"),), ())
    assert act == Delta()
    # Free text read into {v} must be a known value for a closed relation.
    assert RULES.predict(HALL, "wait", "You listen to the silence.") == Delta()
    assert RULES.predict(HALL, "wait", "You open the oak door.") == Delta(
        (F("door:oak", "state", "open"),), (F("door:oak", "state", "closed"),)
    )


def test_observation_comes_first_and_a_later_effect_on_the_same_fact_is_ignored():
    # The text says the willow door opened although the failure rule says it does not.
    delta = RULES.predict(HALL, "open willow door", "You open the willow door.")
    assert delta == Delta(
        (F("door:willow", "state", "open"),), (F("door:willow", "state", "closed"),)
    )


def test_apply_atoms_set_add_remove_inc_dec():
    state = WorldState([F("lamp", "level", "30"), F("box", "attr", "1"), F("box", "attr", "2")])
    act, event = apply_atoms(
        state,
        [
            Atom("action", "inc", "lamp", "level", "+20"),
            Atom("action", "set", "lamp", "level", "0"),  # ignored: lamp.level already set
            Atom("event", "add", "box", "attr", "3"),
            Atom("event", "remove", "box", "attr", "1"),
            Atom("action", "dec", "missing", "level", "5"),  # no number to change: ignored
        ],
        {"attr"},
    )
    assert act == Delta((F("lamp", "level", "50"),), (F("lamp", "level", "30"),))
    assert event == Delta((F("box", "attr", "3"),), (F("box", "attr", "1"),))


def test_descriptions_name_an_entity_through_one_or_two_facts():
    index = StateIndex(HALL)
    slot_of = {"room:hall": "{room}"}
    assert describe("door:willow", index.by_subject, index.holders, slot_of) == "?north={room}"
    rules = RuleSet(
        [
            obs(
                "the door north of the {room} closes",
                Atom("event", "set", "?north={room}", "state", "closed"),
            )
        ],
        LEXICON,
    )
    lit = WorldState(
        HALL.facts - {F("door:willow", "state", "closed")} | {F("door:willow", "state", "open")}
    )
    _, event = rules.predict_split(lit, None, "The door north of the Hall closes.")
    assert event == Delta(
        (F("door:willow", "state", "closed"),), (F("door:willow", "state", "open"),)
    )


@pytest.mark.parametrize(
    "rule",
    [
        RULES.rules[1],
        cmd("adjust {light} by {v}", Atom("action", "inc", "{light}", "level", "{v}")),
        cmd(
            "tune {light}",
            Atom("event", "dec", "{light}", "level", "10"),
            ("player", "at", "room:x"),
        ),
        cmd("tag {obj}", Atom("action", "add", "{obj}", "attr", "12"), ("{obj}", "attr", "3")),
        obs(
            "the {door} swings shut", Atom("event", "remove", "{door}", "odd relation", 'say "hi"')
        ),
    ],
)
def test_rule_text_round_trips(rule):
    condition, action = rule_text(rule)
    back = parse_rule_text(condition, action, rule.confidence)
    assert (back.source, back.template, back.conditions, back.atom, back.predicts) == (
        rule.source, rule.template, rule.conditions, rule.atom, rule.predicts,
    )  # fmt: skip


def test_parse_rule_text_normalises_templates_and_names_problems():
    rule = parse_rule_text('command "Open the {door}!"', '{door}.state := "open"', 0.7)
    assert rule.template == "open the {door}"
    for condition, action, match in [
        ("open {door}", '{door}.state := "open"', "must start with command"),
        ('command "open {door}" and latch down', '{door}.state := "open"', "precondition"),
        ('command "open {door}"', "the door opens", "is not"),
        ('command "open {door}"', '{key}.in := "player"', "not in the template"),
        (
            'observation "x {door}" and {door}.a == "b"',
            '{door}.state := "open"',
            "no preconditions",
        ),
    ]:
        with pytest.raises(RulesError, match=match):
            parse_rule_text(condition, action)
    with pytest.raises(RulesError, match="outside"):
        parse_rule_text('command "open {door}"', '{door}.state := "open"', 1.5)


def test_save_and_load_round_trip(tmp_path):
    path = RULES.save(tmp_path / "vault" / "rules.jsonl")
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["format"] == "wmkit.rules/1"
    assert len(lines) == 1 + len(RULES)
    loaded = RuleSet.load(path)
    assert sorted(r.id for r in loaded) == sorted(r.id for r in RULES)
    assert loaded.lexicon.styles == LEXICON.styles
    assert loaded.predict(HALL, "open willow door") == Delta()
    assert loaded.predict(HALL, "open oak door") == RULES.predict(HALL, "open oak door")


def test_load_refuses_bad_files_naming_the_line(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(RulesError, match="empty file"):
        RuleSet.load(empty)
    bad_header = tmp_path / "header.jsonl"
    bad_header.write_text('{"format": "other/1"}\n')
    with pytest.raises(RulesError, match=r"header\.jsonl:1"):
        RuleSet.load(bad_header)
    path = RULES.save(tmp_path / "rules.jsonl")
    with path.open("a") as f:
        f.write('{"id": "x", "source": "command"}\n')
    with pytest.raises(RulesError, match=rf"rules\.jsonl:{len(RULES) + 2}: not a rule row"):
        RuleSet.load(path)
    with pytest.raises(FileNotFoundError):
        RuleSet.load(tmp_path / "missing.jsonl")


def test_rules_export_as_a_knowledge_delta_that_validates_and_merges():
    delta = RULES.to_knowledge_delta()
    assert len(delta.rules) == len(RULES)
    checked = validate_delta(delta.model_dump_json(), None, scene="distill/test")
    assert checked.rejections == ()
    graph = WorldGraph("vault")
    report = graph.merge(delta, scene="distill/test")
    assert report.rejections == {}
    assert report.rules_added >= 1
    failure = next(r for r in delta.rules if r.action.startswith("not "))
    assert failure.linked_nodes == ("door:willow",)
    assert graph.node("door:willow") is not None


def test_an_object_may_refer_to_a_fact_of_the_player():
    drop = cmd("drop {key}", Atom("action", "set", "{key}", "in", "@player.at"))
    rules = RuleSet([drop], LEXICON)
    assert rules.predict(HALL, "drop brass key") == Delta(
        (F("key:brass", "in", "room:hall"),), (F("key:brass", "in", "player"),)
    )
    nowhere = WorldState(HALL.facts - {F("player", "at", "room:hall")})
    assert rules.predict(nowhere, "drop brass key") == Delta()  # no place to refer to


def test_a_rule_resting_on_few_steps_does_not_outrank_a_broad_one():
    thin = cmd("open {door}", OPEN, ("{door}", "=", "door:oak"), support=4)
    broad = cmd("open {door}", OPEN, ("{door}", "lock", "keyhole"), predicts=False, confidence=0.95,
                support=1000)  # fmt: skip
    assert thin.confidence > broad.confidence and thin.strength < broad.strength
    assert thin.strength == pytest.approx(wilson_lower(1.0, 4)) == pytest.approx(0.51, abs=0.01)
    oak = WorldState(HALL.facts | {F("door:oak", "lock", "keyhole")})
    assert RuleSet([thin, broad], LEXICON).predict(oak, "open oak door") == Delta()
    assert RuleSet([thin], LEXICON).predict(oak, "open oak door") != Delta()
