"""The selection rules against the formulas, written out plainly, on random trees.

PUCT scores only a node's live children and the head of its prior-sorted unexpanded
actions (a cursor), UCB1 skips pruned actions by the node's live-children dict: both must
pick what the plain rule over every proposed action picks, ties included, on wide nodes
(thousands of actions, most pruned), with transpositions, penalties, evictions and
priors that tie exactly or only after rounding.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from wmkit.search import PRUNED, Budget, Proposal, Transition, Tree, puct, search, ucb1
from wmkit.search.search import _Rule
from wmkit.search.simulators import admissible_proposal


def reference_puct(tree: Tree, node: int, c: float, first: bool, rng) -> str | None:
    """PUCT over every proposed action: an unexpanded one counts the node's own value."""
    s = tree.slot[node]
    actions, priors = tree.slot_actions[s], tree.slot_priors[s]
    kids = tree.children[node] or {}
    lo, hi = tree.qmin, tree.qmax
    shift, factor = (lo, 1.0 / (hi - lo)) if hi > lo else (0.0, 1.0)
    sums, visits, count = tree.slot_value_sum, tree.slot_visits, tree.count
    unvisited_q = (sums[s] / visits[s] - shift) * factor
    c_sqrt = c * math.sqrt(count[node])
    scores = []
    for action, prior in zip(actions, priors, strict=True):
        ch = kids.get(action)
        if ch is None:
            scores.append(unvisited_q + c_sqrt * prior)
        elif ch == PRUNED:
            scores.append(-math.inf)
        else:
            k = tree.slot[ch]
            q = tree.reward[ch] + tree.discount * sums[k] / visits[k] - tree.penalty[ch] - shift
            scores.append(q * factor + c_sqrt * prior / (1 + count[ch]))
    best = max(scores, default=-math.inf)
    if best == -math.inf:
        return None
    ties = [a for a, x in zip(actions, scores, strict=True) if x == best]  # proposal order
    if len(ties) == 1 or first:
        return ties[0]
    return ties[random.Random(int(rng.integers(2**63))).randrange(len(ties))]


def reference_ucb1(tree: Tree, node: int, c: float, first: bool, rng) -> str | None:
    """UCB1: untried actions first, then ``q + c * sqrt(ln N / n)`` over live children."""
    s = tree.slot[node]
    actions = tree.slot_actions[s]
    kids = tree.children[node] or {}
    order = {a: i for i, a in enumerate(actions)}

    def pick(ties: list[str]) -> str:
        if len(ties) == 1:
            return ties[0]
        if first:
            return min(ties, key=order.__getitem__)
        return ties[random.Random(int(rng.integers(2**63))).randrange(len(ties))]

    fresh = [a for a in actions if a not in kids]
    if fresh:
        return pick(fresh)
    live = [(a, ch) for a, ch in kids.items() if ch != PRUNED]  # expansion order
    if not live:
        return None
    lo, hi = tree.qmin, tree.qmax
    shift, factor = (lo, 1.0 / (hi - lo)) if hi > lo else (0.0, 1.0)
    cl = c * math.sqrt(math.log(max(tree.count[node], 1)))
    scores = []
    for _, ch in live:
        k = tree.slot[ch]
        q = tree.reward[ch] + tree.discount * tree.slot_value_sum[k] / tree.slot_visits[k]
        scores.append((q - tree.penalty[ch] - shift) * factor + cl / math.sqrt(tree.count[ch]))
    best = max(scores)
    return pick([a for (a, _), x in zip(live, scores, strict=True) if x == best])


def random_priors(r: random.Random, n: int) -> tuple[float, ...] | None:
    kind = r.randrange(4)
    if kind == 0:
        return None  # uniform: every unexpanded action ties
    if kind == 1:
        return tuple(float(r.choice([1, 2, 3])) for _ in range(n))  # runs of equal priors
    if kind == 2:
        return tuple(r.random() for _ in range(n))
    # priors that differ by less than a score's rounding, and zeros
    priors = tuple(float(r.choice([0.0, 1e-17, 1.0, 1.0 + 2**-52, 3.0])) for _ in range(n))
    return priors if any(priors) else None


def grow_random_tree(seed: int, n: int) -> Tree:
    """A tree whose nodes propose ``n`` actions, grown by random steps and updates."""
    r = random.Random(seed)
    proposals = [Proposal(tuple(f"a{i}" for i in range(n)), random_priors(r, n)) for _ in range(3)]
    tree = Tree(
        Transition(0, "", 0.0, False, {}, 0),
        r.choice(proposals),
        r.choice([0.0, 1.0]),
        discount=r.choice([1.0, 0.9]),
        max_nodes=r.choice([None, 40]),
    )
    for step in range(r.randrange(20, 120)):
        nodes = list(tree.nodes())
        node = r.choice(nodes)
        actions = tree.slot_actions[tree.slot[node]]
        if not actions:  # terminal
            continue
        action = r.choice(actions)
        kids = tree.children[node] or {}
        what = r.random()
        if action in kids:
            if kids[action] != PRUNED and what < 0.1:
                tree.prune_action(node, action)
            continue
        if what < 0.4:  # a no-op, as the search prunes it
            tree.prune_action(node, action)
            continue
        key = r.randrange(60)  # few states: transpositions
        terminal = key == 59  # one terminal state
        t = Transition(key, "", float(r.choice([0, 0, 1, 2])), terminal, {}, key)
        known = tree.known(key)
        child = tree.add(
            node,
            action,
            t,
            None if known else r.choice(proposals),
            None if known else r.choice([0.0, 0.5, 1.0]),
        )
        path = [child, *tree.ancestors(child)][::-1]
        if tree.slot[child] not in {tree.slot[a] for a in path[:-1]}:
            tree.backup(path, r.choice([0.0, 0.5, 1.0]))
        if r.random() < 0.05:
            tree.penalise(child, r.choice([0.25, 1.0]))
        if r.random() < 0.03 and step > 10:
            tree.evict(r.randrange(1, 5))  # forgets actions: PUCT's cursor goes back
    return tree


RULES = [
    ("puct", puct, reference_puct),
    ("ucb1", ucb1, reference_ucb1),
]


@pytest.mark.parametrize("name,make,reference", RULES, ids=[r[0] for r in RULES])
@pytest.mark.parametrize("seed", range(12))
def test_rules_pick_what_the_plain_formula_picks_on_random_trees(name, make, reference, seed):
    r = random.Random(seed)
    n = r.choice([1, 3, 8, 40, 400])
    tree = grow_random_tree(seed, n)
    nodes = [x for x in tree.nodes() if not tree.terminal[x] and tree.count[x] > 0]
    checked = 0
    for c in (0.0, 0.5, 1.25, 5.0):
        for tie in ("first", "random"):
            rule = make(c, tie)
            for x in nodes:
                got = rule(tree, x, np.random.default_rng(seed))
                want = reference(tree, x, c, tie == "first", np.random.default_rng(seed))
                assert got == want, (name, c, tie, x)
                checked += 1
    assert checked


@pytest.mark.parametrize("tie", ["first", "random"])
def test_puct_on_a_wide_node_follows_the_formula_as_the_search_prunes_it(tie):
    # 2,000 actions with priors, 95% no-ops: each pick is stepped; a no-op is pruned,
    # the others expanded and backed up, and every pick is checked against the formula.
    r = random.Random(1)
    n = 2000
    weights = tuple(float(r.choice([1, 2, 3, 5, 8])) + r.random() * (i % 3 == 0) for i in range(n))
    proposal = Proposal(tuple(f"cmd {i}" for i in range(n)), weights)
    tree = Tree(Transition(0, "", 0.0, False, {}, 0), proposal, 0.0)
    rule = puct(1.25, tie)
    root = tree.root
    for step in range(600):
        got = rule(tree, root, np.random.default_rng(step))
        want = reference_puct(tree, root, 1.25, tie == "first", np.random.default_rng(step))
        assert got == want
        child = tree.child(root, got)
        if child is None and int(got.split()[1]) % 20:
            tree.prune_action(root, got)  # a no-op
            continue
        if child is None:
            t = Transition(step + 1, "", float(step % 3 == 0), False, {}, step + 1)
            child = tree.add(root, got, t, proposal, 0.5)
        tree.backup([root, child], r.choice([0.0, 1.0]))
    assert tree.npruned[root] > 200 and len(tree.live_children(root)) > 10


def test_a_wide_search_grows_the_same_tree_as_the_plain_formula():
    # The whole search with the fast rule and with the formula as its select_fn.
    n = 600
    r = random.Random(2)
    proposal = Proposal(tuple(f"cmd {i}" for i in range(n)), tuple(r.random() for _ in range(n)))

    class Wide:
        def step(self, token: int, action: str) -> Transition:
            i = int(action.split()[1])
            if i % 20:
                return Transition(token, "", 0.0, False, {}, token)  # a no-op
            new = (token * 2003 + i + 1) % 1009  # few states: transpositions
            return Transition(new, "", float(new % 7 == 0), new % 13 == 0, {}, new)

    def run(select_fn):
        return search(
            Transition(0, "", 0.0, False, {}, 0),
            simulator=Wide(),
            propose_fn=lambda t: proposal,
            value_fn=lambda t: (t.token % 10) / 10,
            select_fn=select_fn,
            budget=Budget(150, max_nodes=60),
            rng=np.random.default_rng(0),
        )

    def formula(tree, node, rng):
        return reference_puct(tree, node, 1.25, True, rng)

    fast, plain = run(puct(1.25, "first")), run(formula)
    dump = [
        {tuple(t.path(x)): (t.visits(x), t.value(x), t.node(x).pruned) for x in t.nodes()}
        for t in (fast.tree, plain.tree)
    ]
    assert dump[0] == dump[1] and fast.visits == plain.visits and fast.action == plain.action


def test_the_tie_draw_is_randrange():
    # The rules draw among ties inline; it must be the stream's randrange, call for call.
    for seed in range(20):
        rule = _Rule(1.0, "random")
        rng = np.random.default_rng(seed)
        stream = random.Random(int(np.random.default_rng(seed).integers(2**63)))
        for n in [2, 3, 5, 7, 8, 9, 100, 1000, 2**20 + 1]:
            assert rule._draw(n, rng) == stream.randrange(n)


def test_the_admissible_proposal_takes_the_envs_counted_prior():
    info = {"admissible_actions": ["a", "b"], "action_priors": [0.25, 0.75]}
    assert admissible_proposal(Transition(None, "", 0.0, False, info)).priors == (0.25, 0.75)
    plain = admissible_proposal(Transition(None, "", 0.0, False, {"admissible_actions": ["a"]}))
    assert plain.priors is None
    with pytest.raises(ValueError, match="1 action_priors for 2 admissible_actions"):
        admissible_proposal(Transition(None, "", 0.0, False, {**info, "action_priors": [1.0]}))
