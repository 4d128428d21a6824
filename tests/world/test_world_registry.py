import subprocess
import sys

import pytest

from wmkit.world import (
    DuplicateEntityError,
    EntityContract,
    EntityRegistry,
    UnknownEntityError,
    UnknownEntityTypeError,
    UnknownFieldError,
    canonical_id,
)

CONTRACTS = [EntityContract("lamp", {"brightness"}, statuses={"on", "off"}), EntityContract("room")]


@pytest.fixture
def registry() -> EntityRegistry:
    return EntityRegistry(CONTRACTS).register(
        "lamp", "l1", {"status": "on", "brightness": 80}, step=3
    )


def test_canonical_id_is_typed_hex_and_separates_type_from_raw():
    cid = canonical_id("lamp", "l1")
    assert cid.startswith("lamp:") and len(cid) == len("lamp:") + 16
    int(cid.split(":")[1], 16)
    assert canonical_id("ab", "c") != canonical_id("a", "bc")
    assert canonical_id("lamp", "l1") != canonical_id("room", "l1")


def test_canonical_id_is_the_same_in_another_process():
    code = "from wmkit.world import canonical_id; print(canonical_id('lamp', 'l1'))"
    for seed in ("0", "12345"):  # Python's own str hash differs with the seed; ours must not
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        )
        assert out.stdout.strip() == canonical_id("lamp", "l1")


def test_register_and_lookups_both_ways(registry):
    cid = canonical_id("lamp", "l1")
    assert registry.id_of("lamp", "l1") == cid
    assert registry.raw_of(cid) == ("lamp", "l1")
    entity = registry.get(cid)
    assert entity.attributes["brightness"] == 80
    assert entity.last_updated == 3
    assert cid in registry and len(registry) == 1


def test_register_is_persistent(registry):
    empty = EntityRegistry(CONTRACTS)
    bigger = empty.register("room", "r1", {"status": "ok"}, step=0)
    assert len(empty) == 0 and len(bigger) == 1


def test_update_sets_fields_and_step_and_keeps_old_version(registry):
    cid = canonical_id("lamp", "l1")
    new = registry.update(cid, {"brightness": 30}, step=7)
    assert dict(new.get(cid).attributes) == {"status": "on", "brightness": 30}
    assert new.get(cid).last_updated == 7
    assert registry.get(cid).attributes["brightness"] == 80
    assert registry.get(cid).last_updated == 3


def test_unknown_field_names_the_field_and_the_allowed_ones(registry):
    cid = canonical_id("lamp", "l1")
    with pytest.raises(UnknownFieldError) as err:
        registry.update(cid, {"brightness": 1, "wattage": 60}, step=4)
    assert "'wattage'" in str(err.value)
    assert "brightness, status" in str(err.value)
    assert registry.get(cid).attributes["brightness"] == 80  # unchanged


def test_last_updated_is_reserved(registry):
    with pytest.raises(UnknownFieldError, match="reserved"):
        registry.update(canonical_id("lamp", "l1"), {"last_updated": 99}, step=4)
    with pytest.raises(UnknownFieldError, match="reserved"):
        EntityContract("x", {"last_updated"})


def test_unknown_type_names_known_types():
    with pytest.raises(UnknownEntityTypeError, match=r"'toaster'.*lamp, room"):
        EntityRegistry(CONTRACTS).register("toaster", "t", {"status": "on"}, step=0)


def test_status_is_required_and_checked():
    registry = EntityRegistry(CONTRACTS)
    with pytest.raises(UnknownFieldError, match="'status' is missing"):
        registry.register("lamp", "l2", {"brightness": 1}, step=0)
    with pytest.raises(UnknownFieldError, match=r"'dim'.*off, on"):
        registry.register("lamp", "l2", {"status": "dim"}, step=0)
    with pytest.raises(UnknownFieldError, match="must be a string"):
        registry.register("room", "r", {"status": 3}, step=0)
    with pytest.raises(UnknownFieldError, match="must be str, int, float or bool"):
        registry.register("lamp", "l2", {"status": "on", "brightness": [1]}, step=0)


def test_duplicate_and_unknown_ids(registry):
    with pytest.raises(DuplicateEntityError, match="already registered"):
        registry.register("lamp", "l1", {"status": "off"}, step=5)
    with pytest.raises(UnknownEntityError, match="lamp:nope"):
        registry.update("lamp:nope", {"status": "on"}, step=1)
    with pytest.raises(UnknownEntityError, match="'l9'"):
        registry.id_of("lamp", "l9")


def test_register_many_is_all_or_nothing(registry):
    items = [("room", "a", {"status": "ok"}), ("room", "b", {"status": "ok", "size": 3})]
    with pytest.raises(UnknownFieldError, match="'size'"):
        registry.register_many(items, step=0)
    assert len(registry) == 1
    bigger = registry.register_many(items[:1], step=0)
    assert len(bigger) == 2 and bigger == bigger and bigger != registry


def test_bad_type_name_refused():
    with pytest.raises(UnknownEntityTypeError, match="bad entity type name"):
        EntityContract("has:colon")
