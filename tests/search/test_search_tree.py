"""The tree arena: records, backup, penalties, re-rooting, pruning and eviction."""

from __future__ import annotations

import numpy as np
import pytest

from wmkit.search import PRUNED, Budget, Proposal, Transition, Tree, puct, search, ucb1

AB = Proposal(("a", "b"))


def t(token, reward=0.0, terminal=False, key=None, delta=None, info=None) -> Transition:
    return Transition(token, f"obs {token}", reward, terminal, info or {}, key, delta)


def line_tree() -> tuple[Tree, dict[str, int]]:
    """root -a-> A -b-> AB, root -b-> B; rewards 0.5 into A, 0.25 into AB."""
    tree = Tree(t("r"), AB, 0.0)
    ids = {"": tree.root}
    ids["a"] = tree.add(tree.root, "a", t("A", 0.5), AB, 0.0)
    ids["b"] = tree.add(tree.root, "b", t("B"), AB, 0.0)
    ids["ab"] = tree.add(ids["a"], "b", t("AB", 0.25, delta="d"), AB, 2.0)
    return tree, ids


def test_node_records_and_navigation():
    tree, ids = line_tree()
    view = tree.node(ids["ab"])
    assert (view.parent, view.action, view.depth) == (ids["a"], "b", 2)
    assert (view.token, view.observation, view.delta, view.estimate) == ("AB", "obs AB", "d", 2.0)
    assert view.prior == pytest.approx(0.5) and view.actions == ("a", "b")
    assert view.visits == 0 and view.children == {} and view.pruned == ()
    assert tree.ancestors(ids["ab"]) == [ids["a"], tree.root]
    assert tree.path(ids["ab"]) == ["a", "b"] and tree.path(tree.root) == []
    assert tree.siblings(ids["a"]) == {"b": ids["b"]} and tree.siblings(tree.root) == {}
    assert tree.find(["a", "b"]) == ids["ab"] and tree.find(["b", "a"]) is None
    assert tree.child(ids["a"], "a") is None
    assert list(tree.nodes()) == [tree.root, ids["a"], ids["b"], ids["ab"]]
    assert len(tree) == 4
    with pytest.raises(KeyError, match="not proposed"):
        tree.add(tree.root, "c", t("C"), AB, 0.0)
    with pytest.raises(ValueError, match="already has a child"):
        tree.add(tree.root, "a", t("A2"), AB, 0.0)
    with pytest.raises(ValueError, match="proposal and value estimate"):
        tree.add(ids["b"], "a", t("BA"))
    with pytest.raises(KeyError, match="not in the tree"):
        tree.node(99)


def test_backup_adds_discounted_returns():
    tree, ids = line_tree()
    tree.discount = 0.5
    tree.backup([tree.root, ids["a"], ids["ab"]], 2.0)
    # AB: 2; A: 0.25 + 0.5 * 2 = 1.25; root: 0.5 + 0.5 * 1.25 = 1.125 (after its
    # creation visit with estimate 0).
    assert (tree.visits(ids["ab"]), tree.value(ids["ab"])) == (1, 2.0)
    assert (tree.visits(ids["a"]), tree.value(ids["a"])) == (1, 1.25)
    assert (tree.visits(tree.root), tree.value(tree.root)) == (2, 1.125 / 2)
    assert tree.q(ids["a"]) == 0.5 + 0.5 * 1.25
    assert (tree.qmin, tree.qmax) == (1.125, 1.25)  # Q samples of A and AB


def test_a_state_met_twice_on_a_path_counts_once():
    # root (key 0) -right-> 1 -left-> back to key 0: one slot, updated once per
    # simulation, with the return at the shallowest node (the root's).
    tree = Tree(t("p0", key=0), Proposal(("left", "right")), 0.0)
    one = tree.add(tree.root, "right", t("p1", 0.5, key=1), Proposal(("left", "right")), 0.0)
    back = tree.add(one, "left", t("p0'", 0.25, key=0))
    assert tree.slot[back] == tree.slot[tree.root] and tree.known(0)
    assert tree.node(back).actions == ("left", "right")  # shared with the root
    tree.backup([tree.root, one, back], 1.0)
    assert (tree.visits(tree.root), tree.visits(back)) == (2, 1)  # visits are per node
    assert tree.state_visits(tree.root) == tree.state_visits(back) == 2
    assert tree.value(tree.root) == pytest.approx((0.0 + 1.75) / 2)
    assert (tree.visits(one), tree.value(one)) == (1, 1.25)


def test_penalise_steers_selection_and_lasts():
    tree, ids = line_tree()
    for _ in range(3):
        tree.backup([tree.root, ids["a"]], 1.0)
        tree.backup([tree.root, ids["b"]], 1.0)
    rule = ucb1(1.0, "first")
    rng = np.random.default_rng(0)
    assert rule(tree, tree.root, rng) == "a"  # Q(a) = 1.5 > Q(b) = 1
    tree.penalise(ids["a"], 1.0)
    assert tree.node(ids["a"]).penalty == 1.0 and tree.q(ids["a"]) == pytest.approx(0.5)
    assert rule(tree, tree.root, rng) == "b"
    tree.backup([tree.root, ids["a"]], 1.0)  # later returns do not wash it out
    assert tree.q(ids["a"]) == pytest.approx(0.5)
    assert tree.best_action() == "a"  # most visited still; penalties steer the search
    with pytest.raises(ValueError, match="finite"):
        tree.penalise(ids["a"], float("inf"))


def test_reroot_keeps_the_subtree_and_frees_the_rest():
    tree, ids = line_tree()
    tree.backup([tree.root, ids["a"], ids["ab"]], 1.0)
    before = tree.node(ids["ab"])
    tree.reroot(ids["a"])
    assert tree.root == ids["a"] and len(tree) == 2
    assert not tree.alive(ids["b"]) and not tree.alive(ids[""])
    assert tree.node(ids["a"]).parent == -1 and tree.node(ids["a"]).depth == 0
    kept = tree.node(ids["ab"])
    assert (kept.visits, kept.value, kept.depth) == (before.visits, before.value, 1)
    assert tree.ancestors(ids["ab"]) == [ids["a"]] and tree.path(ids["ab"]) == ["b"]
    # Freed ids are reused by new nodes.
    fresh = tree.add(ids["a"], "a", t("AA"), AB, 0.0)
    assert fresh in (0, ids["b"])
    tree.replace_root_record(t("real A"))
    assert tree.node(tree.root).token == "real A" and tree.visits(tree.root) == 1


def test_prune_marks_the_action_and_frees_the_subtree():
    tree, ids = line_tree()
    for _ in range(2):
        tree.backup([tree.root, ids["a"], ids["ab"]], 3.0)
        tree.backup([tree.root, ids["b"]], 0.0)
    assert tree.prune(margin=1.0, min_visits=3) == 0  # too few visits to judge
    assert tree.prune(margin=1.0, min_visits=2) == 1
    assert tree.children[tree.root]["b"] == PRUNED
    assert tree.node(tree.root).pruned == ("b",) and tree.child(tree.root, "b") is None
    rule = ucb1(1.0, "first")
    assert rule(tree, tree.root, np.random.default_rng(0)) == "a"
    with pytest.raises(ValueError, match="margin"):
        tree.prune(margin=0.0)


def check_pruned_columns(tree: Tree) -> None:
    """``npruned`` counts the PRUNED entries; ``unpruned`` is the rest, in order, or None."""
    for n in tree.nodes():
        kids = tree.children[n] or {}
        live = {a: c for a, c in kids.items() if c != PRUNED}
        assert tree.npruned[n] == len(kids) - len(live)
        if tree.npruned[n]:
            assert list(tree.unpruned[n].items()) == list(live.items())
        else:
            assert tree.unpruned[n] is None
        assert tree.node(n).children == live == tree.live_children(n)


def test_pruned_actions_are_counted_per_node():
    tree, ids = line_tree()
    tree.backup([tree.root, ids["a"], ids["ab"]], 1.0)
    assert tree.npruned[tree.root] == 0 and tree.unpruned[tree.root] is None
    assert tree.prune_action(tree.root, "b") == 1  # B's subtree is freed
    assert not tree.alive(ids["b"]) and tree.children[tree.root]["b"] == PRUNED
    assert tree.npruned[tree.root] == 1 and tree.unpruned[tree.root] == {"a": ids["a"]}
    assert tree.prune_action(tree.root, "b") == 0 and tree.npruned[tree.root] == 1
    assert tree.prune_action(ids["ab"], "a") == 0  # an action with no child yet
    assert tree.node(ids["ab"]).pruned == ("a",) and tree.child(ids["ab"], "a") is None
    check_pruned_columns(tree)
    with pytest.raises(KeyError, match="not proposed"):
        tree.prune_action(tree.root, "c")
    # The rules skip pruned actions; all pruned is a dead end.
    assert ucb1(1.0, "first")(tree, tree.root, np.random.default_rng(0)) == "a"
    tree.prune_action(tree.root, "a")
    assert tree.npruned[tree.root] == 2 and tree.unpruned[tree.root] == {}
    assert len(tree) == 1 and list(tree.nodes()) == [tree.root]
    for rule in (ucb1(), puct()):
        assert rule(tree, tree.root, np.random.default_rng(0)) is None
    check_pruned_columns(tree)


def test_no_ops_are_pruned_with_the_columns_kept_in_step():
    # Three actions in four are no-ops (the key stays the parent's); pruning by margin
    # and a node cap run too: the counts and live-children dicts stay right.
    actions = Proposal(
        tuple(f"a{i}" for i in range(12)), tuple(float(i % 5 + 1) for i in range(12))
    )

    class Model:
        def step(self, token: int, action: str) -> Transition:
            i = int(action[1:])
            if i % 4:
                return Transition(token, "", 0.0, False, {}, token)
            new = (token * 31 + i + 1) % 97
            return Transition(new, "", float(new % 3 == 0), False, {}, new)

    for rule in (ucb1(), puct(), puct(0.5, "first")):
        out = search(
            Transition(0, "", 0.0, False, {}, 0),
            simulator=Model(),
            propose_fn=lambda t: actions,
            value_fn=lambda t: 0.0,
            select_fn=rule,
            budget=Budget(300, max_nodes=40),
            rng=np.random.default_rng(0),
            pruning=None,
        )
        tree = out.tree
        assert tree.npruned[tree.root] == 9  # every no-op at the root
        check_pruned_columns(tree)
        tree.prune(margin=0.1, min_visits=2)
        check_pruned_columns(tree)
        tree.evict(10)
        check_pruned_columns(tree)


def test_evict_takes_least_visited_oldest_first_and_spares_protected_paths():
    tree, ids = line_tree()
    tree.backup([tree.root, ids["a"], ids["ab"]], 0.0)
    tree.backup([tree.root, ids["b"]], 0.0)
    # ab and b have one visit each, equal values; b is older than ab.
    assert tree.evict(1) == 1 and not tree.alive(ids["b"])
    assert tree.child(tree.root, "b") is None  # forgotten: it may be expanded again
    assert tree.evict(5, protect=[ids["ab"]]) == 0  # ab and its ancestors are kept
    assert tree.evict(5) == 2 and len(tree) == 1 and tree.evicted == 3


def test_cap_holds_on_a_long_run():
    rng = np.random.default_rng(0)
    tree = Tree(t(0), AB, 0.0, max_nodes=50)
    for i in range(1, 2000):
        node = tree.root
        path = [node]
        while True:
            action = ucb1()(tree, node, rng)
            child = tree.child(node, action)
            if child is None:
                child = tree.add(node, action, t(i, reward=float(rng.random())), AB, 0.0)
                path.append(child)
                break
            node = child
            path.append(node)
        tree.backup(path, 0.0)
        assert len(tree) <= 50
    assert tree.evicted > 1500
    assert all(tree.alive(n) for n in tree.nodes()) and len(list(tree.nodes())) == len(tree)
    # Rows are reserved in blocks, never past the cap, and a reserved row is not a node.
    assert len(tree.count) == 50
    assert sum(tree.alive(n) for n in range(len(tree.count))) == len(tree)


def test_node_ids_count_up_and_freed_ids_come_back_first():
    tree = Tree(t(0), AB, 0.0)
    a = tree.add(tree.root, "a", t(1), AB, 0.0)
    b = tree.add(tree.root, "b", t(2), AB, 0.0)
    assert (tree.root, a, b) == (0, 1, 2) and not tree.alive(3)
    assert tree.evict(1) == 1 and not tree.alive(a)  # a and b tie; a is older
    assert tree.add(tree.root, "a", t(3), AB, 0.0) == a
    assert tree.add(a, "a", t(4), AB, 0.0) == 3


def test_bad_construction():
    with pytest.raises(ValueError, match="discount"):
        Tree(t(0), AB, 0.0, discount=-0.1)
    with pytest.raises(ValueError, match="max_nodes"):
        Tree(t(0), AB, 0.0, max_nodes=1)
    with pytest.raises(ValueError, match="2 actions but 1 priors"):
        Tree(t(0), Proposal(("a", "b"), (1.0,)), 0.0)
    terminal = Tree(t(0, terminal=True), AB, 5.0)
    assert terminal.value(terminal.root) == 0.0 and terminal.node(terminal.root).actions == ()
