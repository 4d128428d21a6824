"""Golden trees: tiny deterministic models whose search trees were worked out by hand.

The model (``Toy``) is a two-level tree: actions ``a`` and ``b`` everywhere, a state is
the string of actions taken, depth-2 states are terminal, and the step rewards are
``a`` 1, ``b`` 0, ``aa`` 0, ``ab`` 1, ``ba`` 2, ``bb`` 0; every value estimate is 0.
Q values are min-max normalised by the Q samples backed up so far. The expected trees
live in ``golden/*.json`` as ``path: [visits, mean value]`` with exact fractions; each
test below carries the hand derivation it checks (N = node visits, n = child visits).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from wmkit.search import Budget, Proposal, Pruning, Transition, Tree, puct, search, ucb1

GOLDEN = Path(__file__).parent / "golden"
REWARDS = {"a": 1.0, "b": 0.0, "aa": 0.0, "ab": 1.0, "ba": 2.0, "bb": 0.0}
MEET = {"ab": 1.0, "ba": 1.0}  # the transposition model's rewards: ab and ba are one state


class Toy:
    """Deterministic model: token = actions so far; optional key = sorted actions."""

    def __init__(self, transpose: bool = False) -> None:
        self.transpose = transpose
        self.calls: list[tuple[str, str]] = []

    def key(self, path: str) -> str | None:
        return "".join(sorted(path)) if self.transpose else None

    def root(self) -> Transition:
        return Transition("", "start", 0.0, False, {}, self.key(""))

    def step(self, token: str, action: str) -> Transition:
        self.calls.append((token, action))
        path = token + action
        reward = (MEET if self.transpose else REWARDS).get(path, 0.0)
        return Transition(path, f"at {path}", reward, len(path) == 2, {}, self.key(path))


class Counted:
    """A value function (always 0) that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, t: Transition) -> float:
        self.calls += 1
        return 0.0


def propose(priors=None):
    return lambda t: Proposal(("a", "b"), priors)


def run(toy, select_fn, simulations, priors=None, max_nodes=None, value_fn=None, **kw):
    return search(
        toy.root(),
        simulator=toy,
        propose_fn=propose(priors),
        value_fn=value_fn or Counted(),
        select_fn=select_fn,
        budget=Budget(simulations, max_nodes=max_nodes),
        rng=np.random.default_rng(0),
        **kw,
    )


def dump(tree: Tree) -> dict[str, tuple[int, float]]:
    return {"".join(tree.path(n)): (tree.visits(n), tree.value(n)) for n in tree.nodes()}


def check(out, name: str) -> dict:
    golden = json.loads((GOLDEN / f"{name}.json").read_text())
    got = dump(out.tree)
    assert sorted(got) == sorted(golden["nodes"])
    for path, (visits, value) in golden["nodes"].items():
        assert got[path][0] == visits, f"visits of {path!r}"
        assert got[path][1] == pytest.approx(float(Fraction(value)), abs=1e-12), path
    assert out.action == golden["action"]
    assert out.visits == golden["visits"]
    assert out.root_value == pytest.approx(float(Fraction(golden["root_value"])), abs=1e-12)
    return golden


def test_ucb1_golden_tree():
    # Root starts with one visit (its own estimate, 0). Bounds [lo, hi] of Q samples.
    # 1: a, b unexpanded -> a (first); a: r 1, V 0 -> root 2/1, a 1/0, Q sample 1.
    # 2: b -> root 3/1, b 1/0, bounds [0, 1].
    # 3: root ln3=1.0986: a 1+1.048=2.048, b 0+1.048 -> a; a: aa (first unexpanded),
    #    terminal r 0 -> root 4/2, a 2/0, aa 1/0.
    # 4: ln4: a 1+sqrt(1.386/2)=1.833, b 1.177 -> a; a: ab r 1 -> Q(a) sample 2,
    #    bounds [0, 2]; root 5/4, a 3/1, ab 1/0.
    # 5: ln5: a (1+1/3)/2 + sqrt(1.609/3) = 1.399, b 1.269 -> a; at a (ln3): aa 0+1.048,
    #    ab 1/2+1.048 -> ab, terminal: root 6/6, a 4/2, ab 2/0.
    # 6: ln6: a (1+2/4)/2 + sqrt(1.792/4) = 1.419, b 1.339 -> a; at a (ln4): aa 1.177,
    #    ab 0.5+0.833 -> ab: root 7/8, a 5/3, ab 3/0.
    toy = Toy()
    out = run(toy, ucb1(1.0, "first"), 6)
    check(out, "ucb1")
    assert out.qvalues == {"a": pytest.approx(1.6), "b": 0.0}
    assert toy.calls == [("", "a"), ("", "b"), ("a", "a"), ("a", "b")]  # one step per new node
    assert out.simulations == 6


def test_puct_golden_tree():
    # Priors a 0.2, b 0.8; an unexpanded action's Q is the node's mean value.
    # 1: N=1: a .2, b .8 -> b (r 0): root 2/0, b 1/0, bounds [0, 0] (no scaling).
    # 2: N=2: a .283, b 1.414*.8/2=.566 -> b; at b (N=1): ba .2, bb .8 -> bb, terminal.
    # 3: N=3: a .346, b 1.732*.8/3=.462 -> b; at b (N=2): ba .283, bb .566 -> bb again.
    # 4: N=4: a 2*.2=.4, b 2*.8/4=.4: a tie, to the first: a (r 1): root 5/1, a 1/0,
    #    bounds [0, 1].
    # 5: N=5: a 1+2.236*.2/2=1.224, b 2.236*.8/4=.447 -> a; at a (N=1): aa .2, ab .8 ->
    #    ab (r 1, terminal): Q(a) sample 2, bounds [0, 2]; root 6/3, a 2/1, ab 1/0.
    # 6: N=6: a 1.5/2+2.449*.2/3=.913, b .490 -> a; at a (N=2): aa (.5/2)+.283=.533,
    #    ab 1/2+1.414*.8/2=1.066 -> ab: root 7/5, a 3/2, ab 2/0.
    # Visits tie 3-3 at the root: the higher Q (a: 1+2/3 against b: 0) decides.
    toy = Toy()
    out = run(toy, puct(1.0, "first"), 6, priors=(0.2, 0.8))
    check(out, "puct")
    assert out.tree.node(out.tree.find(["a"])).prior == pytest.approx(0.2)


def test_transpositions_share_statistics():
    # ab and ba are one state (reward 1 into it, terminal); every other step pays 0.
    # c=10 makes UCB1 nearly breadth first.
    # 1: a, 2: b, 3: a/b tie -> a; at a: aa (terminal).
    # 4: root: b (fewer visits) ; at b: a -> state ab, new, r 1: bounds [0, 1].
    # 5: root: a 10*sqrt(ln5/2)=8.97, b .5+8.97 -> b; at b: bb (terminal).
    # 6: root: a 10*sqrt(ln6/2)=9.46, b 1/3+7.73 -> a; at a: b -> state ab again: the
    #    step is taken (the key is only known after it) but neither the proposer nor
    #    the value function runs; the leaf value is the shared mean, 0. Each node has
    #    one visit; their state (one slot) has two returns, seen from both paths.
    toy = Toy(transpose=True)
    values = Counted()
    out = run(toy, ucb1(10.0, "first"), 6, value_fn=values)
    check(out, "transposition")
    tree = out.tree
    ab, ba = tree.find(["a", "b"]), tree.find(["b", "a"])
    assert ab != ba and tree.slot[ab] == tree.slot[ba]
    assert tree.state_visits(ab) == tree.state_visits(ba) == 2
    assert tree.node(ab).reward == tree.node(ba).reward == 1.0
    assert values.calls == 3  # root, a, b: terminal and known states are not valued
    assert len(toy.calls) == 6


class Waits(Toy):
    """``Toy`` plus ``w`` and ``v``, no-ops: the state (token and key) stays as it is."""

    def step(self, token: str, action: str) -> Transition:
        if action not in ("w", "v"):
            return super().step(token, action)
        self.calls.append((token, action))
        return Transition(token, f"at {token}", 0.0, False, {}, self.key(token))


def search_waits(toy: Waits, actions: tuple[str, ...], simulations: int):
    return search(
        toy.root(),
        simulator=toy,
        propose_fn=lambda t: Proposal(actions),
        value_fn=Counted(),
        select_fn=ucb1(10.0, "first"),
        budget=Budget(simulations),
        rng=np.random.default_rng(0),
    )


def test_a_no_op_is_pruned_and_the_simulation_picks_again():
    # Proposals w, a, b; ties go to the first. 1: root: w is stepped, leads back to the
    # root's own state: pruned there, no node; the same simulation picks again: a.
    # 2: root: b (the fresh one). 3: root: a (UCB1 tie, the first); at a: w, pruned at
    # a, then a again -> aa. Three simulations, three new nodes, five steps (two w).
    toy = Waits(transpose=True)
    out = search_waits(toy, ("w", "a", "b"), 3)
    tree = out.tree
    assert out.simulations == 3 and len(tree) == 4
    assert [c for c in toy.calls if c[1] == "w"] == [("", "w"), ("a", "w")]
    assert tree.node(tree.root).pruned == ("w",) and tree.node(tree.find(["a"])).pruned == ("w",)
    assert tree.find(["a", "a"]) is not None and "w" not in out.visits
    # Where every action is a no-op, the last one left is kept: there is one to play.
    out = search_waits(Waits(transpose=True), ("w", "v"), 2)
    assert out.action == "v" and out.visits == {"v": 2}
    # Without keys nothing is known to be unchanged: w is searched like any action.
    out = search_waits(Waits(transpose=False), ("w", "a", "b"), 3)
    assert out.visits == {"w": 1, "a": 1, "b": 1}


def test_eviction_under_a_cap():
    # Cap 4 nodes: a pass evicts max(1, 4 // 10) = 1 subtree, fewest visits, then
    # lowest value, then oldest; never the root nor the path being extended.
    # 1-3 as in the UCB1 tree: root, a, b, aa (4 nodes).
    # 4: adding ab under a: b (1 visit, born before aa) goes; root 5/4, a 3/1, ab 1/0.
    # 5: root has only a: b is unexpanded again -> b; aa goes (1 visit like ab, and
    #    older); root 6/4, b 1/0.
    # 6: root ln6, bounds [0, 2]: a (1+1/3)/2 + sqrt(1.792/3) = 1.440, b 1.339 -> a; at a
    #    aa was evicted, so aa is expanded again; ab goes; root 7/5, a 4/1, aa 1/0.
    toy = Toy()
    out = run(toy, ucb1(1.0, "first"), 6, max_nodes=4)
    golden = check(out, "eviction")
    assert out.tree.evicted == golden["evicted"]
    assert len(out.tree) == 4
    assert toy.calls == [("", "a"), ("", "b"), ("a", "a"), ("a", "b"), ("", "b"), ("a", "a")]


def test_pruning_cuts_a_worse_child_for_good():
    # After the UCB1 golden tree: Q(a) = 1 + 3/5 = 1.6, Q(b) = 0. With margin 1, b is
    # more than 1 below a and goes; under a, Q(aa) = 0 is not more than 1 below
    # Q(ab) = 1, so it stays.
    toy = Toy()
    out = run(toy, ucb1(1.0, "first"), 6)
    tree = out.tree
    assert tree.prune(margin=1.0, min_visits=1) == 1
    assert tree.node(tree.root).pruned == ("b",)
    assert tree.find(["b"]) is None and tree.find(["a", "a"]) is not None
    toy.calls.clear()
    more = search(
        tree,
        simulator=toy,
        propose_fn=propose(),
        value_fn=Counted(),
        select_fn=ucb1(1.0, "first"),
        budget=20,
        rng=np.random.default_rng(0),
    )
    assert ("", "b") not in toy.calls
    assert set(more.visits) == {"a"}
    assert more.tree.visits(more.tree.root) == 7 + 20


def test_pruning_inside_search():
    # Pruning after every simulation. After the second, Q(a) = 1 and Q(b) = 0: with
    # margin 0.5, b is cut there and never stepped again. With margin 1 the gap is not
    # *more* than the margin, and the third simulation (a, then aa: 0) keeps Q(a) = 1.
    toy = Toy()
    out = run(toy, ucb1(1.0, "first"), 10, pruning=Pruning(0.5, min_visits=1, every=1))
    assert out.tree.node(out.tree.root).pruned == ("b",)
    assert toy.calls.count(("", "b")) == 1
    toy = Toy()
    out = run(toy, ucb1(1.0, "first"), 3, pruning=Pruning(1.0, min_visits=1, every=1))
    assert out.tree.node(out.tree.root).pruned == ()
    assert out.visits == {"a": 2, "b": 1}


def test_random_tie_breaking_follows_the_rng():
    # With random ties the first expansion at the root is a coin flip drawn from rng:
    # the same seed gives the same tree, and over seeds both actions come first.
    firsts = set()
    for seed in range(8):
        trees = []
        for _ in range(2):
            toy = Toy()
            search(
                toy.root(),
                simulator=toy,
                propose_fn=propose(),
                value_fn=Counted(),
                select_fn=ucb1(1.0),
                budget=6,
                rng=np.random.default_rng(seed),
            )
            trees.append(toy.calls)
        assert trees[0] == trees[1]
        firsts.add(trees[0][0])
    assert firsts == {("", "a"), ("", "b")}


def test_discount_and_depth_limit():
    # Depth limit 1: only the root's children are ever made; a simulation that reaches
    # one of them backs up its mean value. Discount 0.5 halves what lies below a child.
    toy = Toy()
    out = run(toy, ucb1(1.0, "first"), 10, discount=0.5)
    tree = out.tree
    a = tree.find(["a"])
    assert tree.q(a) == pytest.approx(1.0 + 0.5 * tree.value(a))
    toy = Toy()
    out = search(
        toy.root(),
        simulator=toy,
        propose_fn=propose(),
        value_fn=Counted(),
        select_fn=ucb1(1.0, "first"),
        budget=Budget(10, max_depth=1),
        rng=np.random.default_rng(0),
    )
    assert {len(p) for p in dump(out.tree)} == {0, 1}
    assert len(toy.calls) == 2
    assert out.tree.visits(out.tree.root) == 11


def test_terminal_root_and_bad_arguments():
    toy = Toy()
    done = Transition("ab", "over", 0.0, True, {})
    out = search(
        done,
        simulator=toy,
        propose_fn=propose(),
        value_fn=Counted(),
        select_fn=ucb1(),
        budget=5,
        rng=np.random.default_rng(0),
    )
    assert out.action is None and out.simulations == 0 and toy.calls == []
    kwargs = dict(
        simulator=toy,
        propose_fn=propose(),
        value_fn=Counted(),
        select_fn=ucb1(),
        rng=np.random.default_rng(0),
    )
    with pytest.raises(ValueError, match="simulations"):
        search(toy.root(), budget=0, **kwargs)
    with pytest.raises(TypeError, match="root"):
        search("start", budget=3, **kwargs)
    with pytest.raises(ValueError, match="discount"):
        search(toy.root(), budget=3, discount=1.5, **kwargs)
    tree = search(toy.root(), budget=3, **kwargs).tree
    with pytest.raises(ValueError, match="discount"):
        search(tree, budget=3, discount=0.9, **kwargs)
    with pytest.raises(ValueError, match="repeated"):
        search(toy.root(), budget=3, **{**kwargs, "propose_fn": lambda t: Proposal(("a", "a"))})
    with pytest.raises(ValueError, match="priors"):
        search(toy.root(), budget=3, **{**kwargs, "propose_fn": propose((1.0, -1.0))})
    with pytest.raises(ValueError, match="finite"):
        search(toy.root(), budget=3, **{**kwargs, "value_fn": lambda t: math.nan})
    with pytest.raises(ValueError, match="exploration"):
        ucb1(-1.0)
    with pytest.raises(ValueError, match="tie_break"):
        puct(1.0, "last")
