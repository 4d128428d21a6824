"""Offline training of the policy/value network from recorded trajectories (``wmkit-train-value``).

Reads one or more ``data/<env_name>`` folders written by ``wmkit-collect``, top to bottom:

1. every step row becomes an example: the :class:`~wmkit.search.value_net.ValueInput`
   the agent saw there (observation, admissible actions, tracked facts, score so far
   over the episode's ``max_score``; never ``wm.*``) and its value target, the
   discounted Monte-Carlo return-to-go of the episode from that step
   (:func:`returns_to_go`), the quantity a search's value function estimates; a row
   whose state a search chose the next action from (its ``search`` column, written by
   a recording search policy) also gets a policy target: the root's visit
   distribution over the commands proposed there (the row's admissible actions and
   the root's children), the share of the simulations each command got;
2. episodes (never single steps: steps of one episode are alike) are split into train
   and validation by a seeded shuffle;
3. the vocabulary is the hash buckets seen in at least ``features.min_share`` of the
   training episodes; the network (:mod:`wmkit.search.value_net`) is trained with
   AdamW on the standardised value target (MSE) plus, with a policy head,
   ``policy_weight`` times the cross-entropy of its prior against the visit
   distribution; on a GPU under bfloat16 autocast (``amp``); torch is seeded, and each
   epoch's order comes from ``(seed, epoch)``, so a run resumed from its last epoch
   checkpoint (``last.pt``) ends with the same weights as one that never stopped;
4. the validation MSE is reported beside that of the constant predictor (the train
   mean) and the Spearman rank correlation, overall and per env, and the policy's
   cross-entropy beside the uniform prior's and how often its top command is the
   search's most visited one; the final weights go to ``value.pt`` (what
   :class:`~wmkit.search.values.ValueNetValue` loads) and every number to
   ``report.json``.

Metrics keys follow the house namespaces: ``losses/*`` per epoch, ``eval/*`` on the
validation episodes, ``charts/*`` for throughput.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from wmkit.knowledge.recording import TRAJECTORIES_DIR, load_episodes, load_trajectories
from wmkit.search.value_net import (
    CheckpointError,
    DataSpec,
    FeatureSpec,
    Featurizer,
    ModelSpec,
    TargetSpec,
    ValueInput,
    ValueNet,
    ValueNetSpec,
    build_value_net,
    load_state,
    load_torch_file,
    parse_spec,
    save_torch_file,
    save_value_net,
    segment_log_softmax,
)
from wmkit.trainers.distill import split_episodes

__all__ = [
    "LAST_FILE",
    "REPORT_FILE",
    "TRAIN_FORMAT",
    "VALUE_FILE",
    "Examples",
    "TrainValueConfig",
    "data_fingerprint",
    "load_examples",
    "policy_target",
    "resolve_device",
    "returns_to_go",
    "spearman",
    "train_value",
    "visit_shares",
]

VALUE_FILE = "value.pt"
"""The inference checkpoint in the output folder (what ``value_net`` loads)."""
LAST_FILE = "last.pt"
"""The resume checkpoint in the output folder, rewritten after every epoch."""
REPORT_FILE = "report.json"
TRAIN_FORMAT = "wmkit.value_net.train/1"
"""The ``format`` tag of a resume checkpoint."""

# Fields of the config that do not change what is trained: a resume may change them.
_RUN_ONLY = frozenset(
    {"data_dirs", "out_dir", "device", "amp", "threads", "resume", "progress", "epochs"}
)


class TrainValueConfig(BaseModel):
    """The validated configuration of one ``wmkit-train-value`` run.

    Attributes:
        data_dirs: env data folders from ``wmkit-collect`` (``data/<env_name>``).
        out_dir: where ``value.pt``, ``last.pt`` and ``report.json`` go (None: the
            script's run folder).
        discount: per-step discount of the return-to-go target (the search's).
        policy_weight: weight of the policy loss (cross-entropy against the search's
            visit distribution) beside the value's MSE; used when ``model.policy``.
        visit_temperature: the policy target is the visit counts raised to
            ``1 / visit_temperature``, normalised (1: the visit distribution; 0: all
            weight on the most visited commands, ties shared): a small search spreads
            its visits, and its choice says more than their spread.
        max_candidates: most commands a policy example keeps: every command the
            search visited, then a seeded sample of the others (a game's template x
            noun candidates run to thousands a state).
        held_out: share of the episodes kept for validation, in (0, 1).
        split_seed: which episodes are held out.
        seed: torch's seed (initial weights) and the epochs' shuffles.
        epochs: passes over the training examples.
        batch_size: examples per gradient step.
        lr: AdamW learning rate; weight_decay: its decoupled weight decay.
        features: what is read of a state (``FeatureSpec``).
        model: the network's sizes (``ModelSpec``).
        device: ``auto`` (cuda when available, else cpu), ``cpu``, ``cuda`` or ``cuda:N``.
        amp: mixed precision (bfloat16 autocast) when training on a GPU; no effect on
            the CPU.
        threads: CPU threads for torch (None: torch's default). One thread is often
            faster on a machine whose cores are busy with other work.
        resume: continue from ``out_dir/last.pt`` when it is there (it must match).
        progress: draw a progress bar.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    data_dirs: list[str] = Field(min_length=1)
    out_dir: str | None = None
    discount: float = Field(default=0.95, ge=0.0, le=1.0)
    policy_weight: float = Field(default=1.0, ge=0.0)
    visit_temperature: float = Field(default=1.0, ge=0.0)
    max_candidates: int = Field(default=256, ge=2)
    held_out: float = Field(default=0.2, gt=0.0, lt=1.0)
    split_seed: int = 0
    seed: int = 0
    epochs: int = Field(default=8, ge=1)
    batch_size: int = Field(default=256, ge=1)
    lr: float = Field(default=1e-3, gt=0.0)
    weight_decay: float = Field(default=0.01, ge=0.0)
    features: FeatureSpec = FeatureSpec()
    model: ModelSpec = ModelSpec()
    device: str = "auto"
    amp: bool = True
    threads: int | None = Field(default=None, ge=1)
    resume: bool = True
    progress: bool = True


class Examples(NamedTuple):
    """Training examples, one per recorded step, episodes whole and in step order.

    Attributes:
        episodes: ``(env, episode)`` of each example.
        inputs: what the agent saw at that step.
        targets: the discounted return-to-go from that step, float64.
        policies: the policy target of each example: ``(commands, visits)``, the
            commands proposed at the step's state and the simulations each got from the
            search that chose the next action there; None where no search was logged.
    """

    episodes: list[tuple[str, str]]
    inputs: list[ValueInput]
    targets: np.ndarray
    policies: list[tuple[tuple[str, ...], tuple[int, ...]] | None]


class _Episode(NamedTuple):  # what split_episodes reads of an episode
    env: str
    episode: str


def returns_to_go(rewards: Sequence[float], discount: float) -> np.ndarray:
    """Discounted return after each step of one episode.

    ``rewards[t]`` is the reward of the step *into* state ``t`` (0 for the reset), so
    the value of state ``t`` is ``sum_{k>t} discount**(k-t-1) * rewards[k]``: the
    rewards still to come, not the one that led there (the search adds that itself).
    The last state's is 0, truncated or not.
    """
    out = np.zeros(len(rewards), dtype=np.float64)
    ahead = 0.0
    for t in range(len(rewards) - 1, 0, -1):
        ahead = float(rewards[t]) + discount * ahead
        out[t - 1] = ahead
    return out


def data_fingerprint(data_dirs: Sequence[str | Path]) -> str:
    """SHA-256 of each folder's name and its committed shards (names and sizes).

    Shard names carry a random token per commit, so a folder that gained, lost or
    rewrote an episode gets a new fingerprint; moving the folder keeps it.
    """
    h = hashlib.sha256()
    for d in data_dirs:
        d = Path(d)
        shards = d / TRAJECTORIES_DIR
        found = (
            sorted(p for p in shards.iterdir() if p.is_dir() and p.name.startswith("shard-"))
            if shards.is_dir()
            else []
        )
        h.update(f"{d.name}\0".encode())
        for p in found:
            steps = p / "steps.parquet"
            h.update(f"{p.name}:{steps.stat().st_size if steps.exists() else -1}\0".encode())
    return h.hexdigest()


def policy_target(
    admissible: Sequence[str] | None, search: dict[str, Any] | None
) -> tuple[tuple[str, ...], tuple[int, ...]] | None:
    """The commands proposed at a state and the search's visits to each, from a row.

    The commands are the row's admissible actions, then any root child not among them
    (a proposer may add its own); a command the search never expanded, or pruned as a
    no-op on its first step, has 0 visits. None without a search or any visit.
    """
    if not search or not search.get("children"):
        return None
    visits = {c["action"]: int(c["visits"]) for c in search["children"]}
    if sum(visits.values()) <= 0:
        return None
    commands = tuple(dict.fromkeys([*(admissible or ()), *visits]))
    return commands, tuple(visits.get(c, 0) for c in commands)


def load_examples(
    data_dirs: Sequence[str | Path], discount: float, *, facts: bool = False
) -> Examples:
    """Read every step of every data folder into examples with their targets.

    Args:
        data_dirs: ``wmkit-collect`` env data folders.
        discount: of the return-to-go target.
        facts: read each row's tracked facts into its input.

    Raises:
        FileNotFoundError: a data folder is missing.
        ValueError: a folder holds no episodes, an episode appears twice (a folder
            given twice) or its steps are not 0, 1, 2, ...
    """
    episodes: list[tuple[str, str]] = []
    inputs: list[ValueInput] = []
    targets: list[np.ndarray] = []
    policies: list[tuple[tuple[str, ...], tuple[int, ...]] | None] = []
    seen: set[tuple[str, str]] = set()
    for data_dir in data_dirs:
        ds = load_trajectories(data_dir)
        if len(ds) == 0:
            raise ValueError(f"{data_dir} holds no recorded episodes: run wmkit-collect first")
        table = load_episodes(data_dir).select_columns(["env", "episode", "max_score"])
        max_scores = {
            (e, ep): m
            for e, ep, m in zip(table["env"], table["episode"], table["max_score"], strict=True)
        }
        names = ["env", "episode", "step", "observation", "admissible_actions", "reward", "search"]
        cols = ds.select_columns(names + (["tracked_facts"] if facts else [])).to_dict()
        runs: dict[tuple[str, str], list[int]] = {}
        for i, key in enumerate(zip(cols["env"], cols["episode"], strict=True)):
            runs.setdefault(key, []).append(i)
        for key, rows in runs.items():
            if key in seen:
                raise ValueError(
                    f"episode {key[1]!r} of env {key[0]!r} is in two data folders "
                    "(a folder given twice?)"
                )
            seen.add(key)
            rows.sort(key=lambda i: cols["step"][i])
            steps = [cols["step"][i] for i in rows]
            if steps != list(range(len(rows))):
                raise ValueError(
                    f"{data_dir}: episode {key[1]!r} has steps {steps[:5]}..., not 0, 1, 2, ..."
                )
            rewards = [float(cols["reward"][i]) for i in rows]
            # The score the agent saw: the env's reward is the per-step change of its
            # score (ARCHITECTURE §3), so the score is the reward so far.
            scale = float(max_scores.get(key) or 0)
            score = np.cumsum(rewards) / (scale if scale > 0 else 1.0)
            for i, s in zip(rows, score, strict=True):
                admissible = tuple(cols["admissible_actions"][i] or ())
                tracked = frozenset(map(tuple, cols["tracked_facts"][i] or ()) if facts else ())
                inputs.append(ValueInput(cols["observation"][i], admissible, float(s), tracked))
                policies.append(policy_target(admissible, cols["search"][i]))
            episodes += [key] * len(rows)
            targets.append(returns_to_go(rewards, discount))
    return Examples(episodes, inputs, np.concatenate(targets), policies)


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1, ties given the mean of the ranks they span."""
    ranks = np.empty(len(x))
    ranks[np.argsort(x, kind="stable")] = np.arange(len(x))
    _, group, counts = np.unique(x, return_inverse=True, return_counts=True)
    return (np.bincount(group, weights=ranks) / counts)[group]


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman rank correlation (ties: mean ranks); None when a side is constant."""
    ra, rb = _ranks(np.asarray(a, dtype=float)), _ranks(np.asarray(b, dtype=float))
    if len(ra) < 2 or ra.std() == 0 or rb.std() == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def resolve_device(name: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu; other names must exist here.

    Raises:
        ValueError: not a device name, or a cuda device on a machine without one.
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise ValueError(f"device {name!r} is not a torch device: {err}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} asked for, but torch sees no CUDA device here")
    return device


def _vocabulary(
    featurizer: Featurizer, data: Examples, train_idx: np.ndarray, commands: bool
) -> np.ndarray:
    """Buckets seen in at least ``min_share`` of the training episodes (a bool per bucket).

    With ``commands``, the candidate commands of the policy examples count too.
    """
    per_episode: dict[tuple[str, str], set[int]] = {}
    for i in train_idx:
        found = per_episode.setdefault(data.episodes[i], set())
        found.update(featurizer.all_ids(data.inputs[i]))
        policy = data.policies[i]
        if commands and policy is not None:
            for command in policy[0]:
                found.update(featurizer.all_command_ids(command))
    ids = [i for found in per_episode.values() for i in found]
    counts = np.bincount(np.asarray(ids, dtype=np.int64), minlength=featurizer.spec.buckets)
    # At least one episode: a bucket no training episode has is never learned.
    least = max(1, math.ceil(featurizer.spec.min_share * len(per_episode)))
    return counts >= least


class _Ragged(NamedTuple):
    """Rows of ints, one after another: ``values[starts[i]:starts[i] + lengths[i]]``."""

    values: torch.Tensor  # int64 or float32 [sum of lengths]
    starts: torch.Tensor  # int64 [rows]
    lengths: torch.Tensor  # int64 [rows]

    @staticmethod
    def of(rows: Sequence[Sequence[Any]], dtype: torch.dtype, device: torch.device) -> _Ragged:
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        flat = [v for r in rows for v in r]
        return _Ragged(
            torch.tensor(flat, dtype=dtype, device=device),
            torch.from_numpy(np.cumsum(lengths) - lengths).to(device),
            torch.from_numpy(lengths).to(device),
        )

    def take(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(values, offsets, owner)`` of the rows ``idx``, gathered without a loop."""
        lengths = self.lengths[idx]
        offsets = torch.cumsum(lengths, 0) - lengths
        # Position of each value in the flat array: its row's start, plus its place
        # within the row.
        owner = torch.repeat_interleave(torch.arange(len(idx), device=idx.device), lengths)
        within = torch.arange(int(lengths.sum()), device=idx.device) - offsets[owner]
        return self.values[self.starts[idx][owner] + within], offsets, owner


class _Tensors(NamedTuple):
    ids: _Ragged  # every example's feature ids
    numeric: torch.Tensor  # float32 [N, k]
    z: torch.Tensor  # float32 [N]: standardised value targets
    commands: _Ragged  # per example: its candidate commands, as rows of `table`
    shares: _Ragged  # per example: each candidate's share of the search's visits
    table: _Ragged  # per distinct command: its feature ids


def visit_shares(visits: Sequence[int], temperature: float) -> np.ndarray:
    """The policy target: ``visits ** (1 / temperature)``, normalised (0: the argmax)."""
    v = np.asarray(visits, dtype=np.float64)
    if temperature == 0:
        w = (v == v.max()).astype(np.float64)
    else:
        w = (v / v.max()) ** (1.0 / temperature)
    return w / w.sum()


def _candidates(
    policy: tuple[tuple[str, ...], tuple[int, ...]],
    cap: int,
    rng: np.random.Generator,
    temperature: float,
) -> tuple[list[str], list[float]]:
    """A policy example's commands (visited ones, then a sample of the rest) and shares."""
    commands, visits = policy
    shares = visit_shares(visits, temperature)
    seen = [i for i, v in enumerate(visits) if v > 0]
    rest = [i for i, v in enumerate(visits) if v == 0]
    room = max(cap - len(seen), 0)
    if len(rest) > room:
        rest = sorted(rng.choice(rest, size=room, replace=False).tolist())
    keep = seen + rest
    return [commands[i] for i in keep], [float(shares[i]) for i in keep]


def _featurize(
    featurizer: Featurizer,
    data: Examples,
    z: np.ndarray,
    device: torch.device,
    policy: bool,
    config: TrainValueConfig,
) -> _Tensors:
    inputs = data.inputs
    numeric = np.array(
        [[x.score] if featurizer.numeric else [] for x in inputs], dtype=np.float32
    ).reshape(len(inputs), featurizer.numeric)
    table: dict[str, int] = {}
    commands: list[list[int]] = []
    shares: list[list[float]] = []
    rng = np.random.default_rng([config.seed, 17])  # which unvisited commands are sampled
    for target in data.policies:
        if not policy or target is None:
            commands.append([])
            shares.append([])
            continue
        names, share = _candidates(
            target, config.max_candidates, rng, config.visit_temperature
        )
        commands.append([table.setdefault(c, len(table)) for c in names])
        shares.append(share)
    return _Tensors(
        _Ragged.of([featurizer.ids(x) for x in inputs], torch.int64, device),
        torch.from_numpy(numeric).to(device),
        torch.from_numpy(z.astype(np.float32)).to(device),
        _Ragged.of(commands, torch.int64, device),
        _Ragged.of(shares, torch.float32, device),
        _Ragged.of([featurizer.command_ids(c) for c in table], torch.int64, device),
    )


def _batch(t: _Tensors, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(ids, offsets, numeric)`` of the examples ``idx``."""
    ids, offsets, _ = t.ids.take(idx)
    return ids, offsets, t.numeric[idx]


def _policy_loss(
    model: ValueNet, t: _Tensors, idx: torch.Tensor, state: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """Cross-entropy of the prior against the visit shares, per example with a target.

    Returns ``(cross-entropy, uniform prior's cross-entropy, top command agrees)``, each
    ``[examples with a target]``, or None when none of ``idx`` has one.
    """
    rows, _, owner = t.commands.take(idx)
    if rows.numel() == 0:
        return None
    share = t.shares.take(idx)[0]
    distinct, inverse = torch.unique(rows, return_inverse=True)
    ids, offsets, _ = t.table.take(distinct)
    vectors = model.bag(ids, offsets)[inverse]
    logits = model.logits(state, vectors, owner).float()
    logp = segment_log_softmax(logits, owner, len(idx))
    zeros = torch.zeros(len(idx), device=logits.device)
    ce = zeros.index_add(0, owner, -share * logp)
    counts = t.commands.lengths[idx]
    has = counts > 0
    uniform = torch.log(counts[has].float())
    # Is the prior's top command one the search visited most? Commands tied at the top
    # of the prior share the answer (a flat prior agrees by chance only).
    best_logit = zeros.clone().fill_(-torch.inf).scatter_reduce(0, owner, logits, "amax")
    best_share = zeros.clone().scatter_reduce(0, owner, share, "amax")
    top = logits == best_logit[owner]
    hits = zeros.index_add(0, owner, (top & (share == best_share[owner])).float())
    agree = hits / zeros.index_add(0, owner, top.float()).clamp_min(1.0)
    return ce[has], uniform, agree[has]


def _predict(
    model: ValueNet, t: _Tensors, idx: np.ndarray, batch_size: int
) -> tuple[np.ndarray, dict[str, Any]]:
    """Values in reward units of the examples ``idx``, and the policy's scores on them."""
    out, ce, uniform, agree = [], [], [], []
    model.eval()
    with torch.inference_mode():
        for s in range(0, len(idx), batch_size):
            chunk = torch.as_tensor(idx[s : s + batch_size], device=t.numeric.device)
            state = model.state(*_batch(t, chunk))
            out.append((model.mean + model.std * model.mlp[4](state).squeeze(-1)).double())
            scored = _policy_loss(model, t, chunk, state) if model.policy else None
            if scored is not None:
                ce.append(scored[0])
                uniform.append(scored[1])
                agree.append(scored[2])
    values = torch.cat(out).cpu().numpy() if out else np.zeros(0)
    if not ce:
        return values, {}
    ce_all, uniform_all = torch.cat(ce), torch.cat(uniform)
    policy = {
        "cross_entropy": float(ce_all.mean()),
        "uniform_cross_entropy": float(uniform_all.mean()),
        # 1 - ce/uniform: the share of the uniform prior's cross-entropy removed.
        "skill": 1.0 - float(ce_all.mean() / uniform_all.mean())
        if float(uniform_all.mean()) > 0
        else None,
        "top_agrees": float(torch.cat(agree).mean()),
        "examples": len(ce_all),
    }
    return values, policy


def _scores(pred: np.ndarray, y: np.ndarray, constant: float) -> dict[str, Any]:
    mse = float(np.mean((pred - y) ** 2)) if len(y) else math.nan
    const = float(np.mean((constant - y) ** 2)) if len(y) else math.nan
    return {
        "mse": mse,
        "constant_mse": const,
        # 1 - mse/constant: the share of the constant predictor's error removed.
        "skill": 1.0 - mse / const if const > 0 else None,
        "spearman": spearman(pred, y),
        "examples": len(y),
    }


def _resume_settings(config: TrainValueConfig) -> dict[str, Any]:
    return config.model_dump(mode="json", exclude=set(_RUN_ONLY))


def _mismatch(saved: dict[str, Any], now: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for k in sorted(set(saved) | set(now)):
        a, b = saved.get(k), now.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _mismatch(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k} (checkpoint {a!r}, now {b!r})")
    return out


def train_value(
    config: TrainValueConfig,
    out_dir: str | Path,
    *,
    console: Console,
    log_fn: Callable[[dict[str, float], int], None] | None = None,
) -> dict[str, Any]:
    """Train (or resume training) a policy/value network; write ``value.pt`` and the report.

    ``log_fn(metrics, step)``, when given, is called after every gradient step with
    ``losses/batch_mse_std`` (that batch's value loss, in standardised units; with a
    policy head also ``losses/batch_policy_ce``) and after every epoch with the epoch's
    ``history`` row (``epoch``, ``losses/train_mse_std``, ``losses/train_policy_ce``,
    ``eval/mse``, ``eval/policy_ce``, ``charts/samples_per_s``); ``step`` counts
    gradient steps from the first epoch (a resumed run goes on counting), e.g.
    ``functools.partial(logger.log_metrics, prefix="train_value")`` of a
    :class:`wmkit.tracking.RunLogger`.

    Returns:
        The report: ``eval`` (validation MSE, constant-predictor MSE, skill, Spearman;
        overall and ``per_env``; with a policy head, ``policy``: cross-entropy against
        the visit shares, the uniform prior's, skill and top-command agreement), ``train``
        (the same on training episodes), the split, the per-epoch ``history``,
        ``charts`` (samples/s) and the file paths.

    Raises:
        FileNotFoundError: a data folder is missing.
        ValueError: no episodes, fewer than two, a bad device.
        CheckpointError: ``last.pt`` is unreadable or was made by another run
            (other data or settings) while ``resume`` is on.
    """
    out = Path(out_dir)
    device = resolve_device(config.device)
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    dirs = [str(d) for d in config.data_dirs]
    data = load_examples(dirs, config.discount, facts=config.features.facts)
    keys = sorted(set(data.episodes))
    if len(keys) < 2:
        raise ValueError(
            f"{len(keys)} episode in {dirs}: at least 2 are needed to hold some out for validation"
        )
    _, held = split_episodes([_Episode(*k) for k in keys], config.held_out, seed=config.split_seed)
    held_keys = {(e.env, e.episode) for e in held}
    is_val = np.array([k in held_keys for k in data.episodes])
    train_idx, val_idx = np.flatnonzero(~is_val), np.flatnonzero(is_val)
    y = data.targets
    mean = float(y[train_idx].mean())
    std = float(y[train_idx].std())
    spec = ValueNetSpec(
        features=config.features,
        model=config.model,
        target=TargetSpec(discount=config.discount, mean=mean, std=std if std > 1e-8 else 1.0),
        data=DataSpec(
            fingerprint=data_fingerprint(dirs),
            dirs=tuple(dirs),
            envs=tuple(sorted({e for e, _ in keys})),
            episodes=len(keys),
            steps=len(y),
            policy_examples=sum(p is not None for p in data.policies),
        ),
    )

    torch.manual_seed(config.seed)
    model, featurizer = build_value_net(spec)
    policy = config.model.policy
    vocab = _vocabulary(featurizer, data, train_idx, commands=policy)
    model.vocab.copy_(torch.from_numpy(vocab))
    model.to(device)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, weight_decay=config.weight_decay
    )
    start, history = 0, []
    last_path = out / LAST_FILE
    if config.resume and last_path.exists():
        start, history = _resume(last_path, spec, config, model, optimizer, device)
        console.print(f"resuming from {last_path} at epoch {start}/{config.epochs}")

    featurizer = Featurizer(spec.features, vocab)
    z = (y - mean) / spec.target.std
    t = _featurize(featurizer, data, z, device, policy, config)
    amp = config.amp and device.type == "cuda"
    batches = math.ceil(len(train_idx) / config.batch_size)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())  # fmt: skip
    with Progress(*columns, console=console, disable=not config.progress) as bar:
        task = bar.add_task("training", total=(config.epochs - start) * batches)
        step = start * batches  # gradient steps taken, the epochs resumed from included
        for epoch in range(start, config.epochs):
            model.train()
            # Order and dropout come from (seed, epoch) alone: a resumed run replays
            # the epochs it missed exactly.
            order = np.random.default_rng([config.seed, epoch]).permutation(train_idx)
            torch.manual_seed(config.seed * 1_000_003 + epoch)
            began, total, seen, ce_total, ce_seen = time.perf_counter(), 0.0, 0, 0.0, 0
            for s in range(0, len(order), config.batch_size):
                idx = torch.as_tensor(order[s : s + config.batch_size], device=device)
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
                    state = model.state(*_batch(t, idx))
                    mse = torch.nn.functional.mse_loss(
                        model.mlp[4](state).squeeze(-1).float(), t.z[idx]
                    )
                    scored = _policy_loss(model, t, idx, state) if policy else None
                loss = mse
                metrics = {"losses/batch_mse_std": float(mse.detach())}
                if scored is not None:
                    ce = scored[0].mean()
                    loss = loss + config.policy_weight * ce
                    metrics["losses/batch_policy_ce"] = float(ce.detach())
                    ce_total += float(scored[0].detach().sum())
                    ce_seen += len(scored[0])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total += metrics["losses/batch_mse_std"] * len(idx)
                seen += len(idx)
                step += 1
                if log_fn is not None:
                    log_fn(metrics, step)
                bar.update(task, advance=1, description=f"epoch {epoch + 1}/{config.epochs}")
            secs = time.perf_counter() - began
            val_pred, val_policy = _predict(model, t, val_idx, 4096)
            row = {
                "epoch": epoch + 1,
                "losses/train_mse_std": total / max(seen, 1),  # standardised units
                "losses/train_policy_ce": ce_total / ce_seen if ce_seen else None,
                "eval/mse": float(np.mean((val_pred - y[val_idx]) ** 2)),
                "eval/policy_ce": val_policy.get("cross_entropy"),
                "charts/samples_per_s": seen / secs if secs > 0 else None,
            }
            history.append(row)
            if log_fn is not None:
                log_fn(row, step)
            _save_last(last_path, spec, config, model, optimizer, epoch + 1, history)

    train_pred, train_policy = _predict(model, t, train_idx, 4096)
    val_pred, val_policy = _predict(model, t, val_idx, 4096)
    per_env = {}
    for env in spec.data.envs:  # type: ignore[union-attr]
        mask = np.array([data.episodes[i][0] == env for i in val_idx], dtype=bool)
        per_env[env] = _scores(val_pred[mask], y[val_idx][mask], mean)
    report = {
        "eval": {**_scores(val_pred, y[val_idx], mean), "per_env": per_env},
        "train": _scores(train_pred, y[train_idx], mean),
        "split": {
            "train_episodes": len(keys) - len(held_keys),
            "val_episodes": len(held_keys),
            "train_steps": len(train_idx),
            "val_steps": len(val_idx),
        },
        "target": spec.target.model_dump(),
        "device": str(device),
        "history": history,
    }
    if policy:
        report["eval"]["policy"] = val_policy
        report["train"]["policy"] = train_policy
    final = spec.model_copy(update={"metrics": {"eval": report["eval"], "epochs": len(history)}})
    report["value_path"] = str(save_value_net(out / VALUE_FILE, final, model))
    report["last_path"] = str(last_path)
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT_FILE).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return report


def _save_last(
    path: Path,
    spec: ValueNetSpec,
    config: TrainValueConfig,
    model: ValueNet,
    optimizer: torch.optim.Optimizer,
    epoch: int,
    history: list[dict[str, Any]],
) -> None:
    save_torch_file(
        {
            "format": TRAIN_FORMAT,
            "spec": spec.model_dump_json(),
            "settings": json.dumps(_resume_settings(config), sort_keys=True),
            "epoch": epoch,
            "history": json.dumps(history),
            "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
            "optimizer": optimizer.state_dict(),
        },
        path,
    )


def _resume(
    path: Path,
    spec: ValueNetSpec,
    config: TrainValueConfig,
    model: ValueNet,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
) -> tuple[int, list[dict[str, Any]]]:
    """Load ``last.pt`` into the model and optimizer; return (epochs done, history)."""
    state = load_torch_file(path, "value-training checkpoint", TRAIN_FORMAT, device)
    saved = parse_spec(state.get("spec"), path)
    try:
        settings = json.loads(state["settings"])
        history = json.loads(state["history"])
        epoch = int(state["epoch"])
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{path} is missing its training state: {err!r}") from None
    # The data is compared by fingerprint, not by how its folders were spelled.
    problems = _mismatch(
        {"spec": saved.model_dump(mode="json", exclude={"data": {"dirs"}}), "settings": settings},
        {
            "spec": spec.model_dump(mode="json", exclude={"data": {"dirs"}}),
            "settings": _resume_settings(config),
        },
    )
    if problems:
        raise CheckpointError(
            f"{path} was made by another run, so it cannot be resumed: "
            + "; ".join(problems)
            + ". Use another out_dir, or resume=false to start over there."
        )
    if epoch > config.epochs:
        raise CheckpointError(
            f"{path} is at epoch {epoch}, past epochs={config.epochs}: ask for at least {epoch}"
        )
    load_state(model, state.get("model"), path)
    try:
        optimizer.load_state_dict(state["optimizer"])
    except (KeyError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"{path}: the optimizer state does not fit: {err}") from None
    return epoch, history
