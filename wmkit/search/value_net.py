"""The learned policy/value network behind the ``value_net`` value function, and its checkpoints.

What the agent sees of a state (:class:`ValueInput`: the observation text, optionally
the admissible actions, the tracked facts and the normalised score; never ``wm.*``) is
read into hashed word and word-pair features (:class:`Featurizer`), averaged by an
``nn.EmbeddingBag`` and mapped by a small MLP to a state vector; one linear head reads
the state's value in reward units off it (:class:`ValueNet`). With a policy head
(``ModelSpec.policy``) the network also scores candidate commands: each command's words
go through the same embedding table (under their own prefix) and its logit is the
match of the command's vector with the state's plus a term of the command alone (what
a verb is worth anywhere: ``examine`` rarely changes a world, ``north`` often does);
the prior over a state's candidates is their softmax. One forward pass values a state
and ranks all of its candidates (:meth:`ValueNet.evaluate`), for one state or a batch.
Only features common enough in the training episodes are read (the network's
``vocab``, a flag per hash bucket): a random seed's room and door names would otherwise
be learned as if they meant something. No pretrained model: nothing is downloaded, and
a state costs one small forward pass.

Both the trainer (``wmkit.trainers.value``) and the search's
:class:`~wmkit.search.values.ValueNetValue` build the network from a
:class:`ValueNetSpec`, the JSON record of everything needed to rebuild the model and
its featuriser (plus the data it was trained on and its metrics). A checkpoint file is
one ``torch.save`` of ``{"format", "spec" (that JSON), "model" (the state_dict)}``,
written to a temporary file and renamed into place (:func:`save_torch_file`), so a
reader sees the old file or the new one, never half of one; it is read back with
``weights_only=True`` (no pickled code runs).
"""

from __future__ import annotations

import itertools
import math
import os
import re
import secrets
import zlib
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from torch import nn

from wmkit.jsonl import fsync_path
from wmkit.search.types import TRACKED_FACTS

__all__ = [
    "TRACKED_FACTS",
    "VALUE_NET_FORMAT",
    "CandidateBatch",
    "CheckpointError",
    "DataSpec",
    "FeatureSpec",
    "Featurizer",
    "ModelSpec",
    "SingleStateForward",
    "TargetSpec",
    "ValueInput",
    "ValueNet",
    "ValueNetSpec",
    "build_value_net",
    "load_state",
    "load_torch_file",
    "load_value_net",
    "parse_spec",
    "save_torch_file",
    "save_value_net",
    "segment_log_softmax",
    "value_input",
]

VALUE_NET_FORMAT = "wmkit.value_net/1"
"""The ``format`` tag of a value-network checkpoint file."""

_TOKEN = re.compile(r"[a-z0-9]+")
_MEMO_LINES = 200_000  # distinct lines whose ids a featuriser keeps (then starts over)


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: unreadable, not ours, or not matching its spec."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FeatureSpec(_Strict):
    """How a :class:`ValueInput` becomes features.

    Attributes:
        buckets: hash buckets (embedding rows).
        ngrams: 1 (words) or 2 (words and adjacent word pairs).
        actions: read the admissible actions too (their words, under their own prefix).
        facts: read the tracked facts too (each ``subject relation object`` as a line,
            under its own prefix): what tells apart the imagined states of a rule
            model, which share the root's text.
        score: feed the normalised score as a numeric input.
        max_features: most distinct features kept per input (observation first).
        min_share: features seen in less than this share of the training episodes
            are left out of the vocabulary (the trainer's): names particular to a few
            episodes' worlds (a seed's rooms, a parcel's id) do not carry over to
            others, and learning them only fits the noise of those episodes.
    """

    buckets: int = Field(default=1 << 15, ge=1)
    ngrams: Literal[1, 2] = 2
    actions: bool = True
    facts: bool = False
    score: bool = True
    max_features: int = Field(default=512, ge=1)
    min_share: float = Field(default=0.2, ge=0.0, le=1.0)


class ModelSpec(_Strict):
    """The network's sizes, and whether it has a policy head.

    Attributes:
        dim: embedding width.
        hidden: width of the MLP's two hidden layers (the state vector).
        dropout: dropout on the averaged embedding while training, in [0, 1).
        policy: a policy head: a prior over a state's candidate commands (module doc).
    """

    dim: int = Field(default=32, ge=1)
    hidden: int = Field(default=64, ge=1)
    dropout: float = Field(default=0.1, ge=0.0, lt=1.0)
    policy: bool = False


class TargetSpec(_Strict):
    """What the network predicts: the discounted return-to-go, in reward units.

    Attributes:
        discount: per-step discount of the return the network was trained on.
        mean: mean training target (the network's output is ``mean + std * head``).
        std: standard deviation of the training targets (1 when they are constant).
    """

    discount: float = Field(ge=0.0, le=1.0)
    mean: float = 0.0
    std: float = Field(default=1.0, gt=0.0)


class DataSpec(_Strict):
    """The data a network was trained on.

    Attributes:
        fingerprint: hash of the committed shards of every data folder (see
            ``wmkit.trainers.value.data_fingerprint``): equal data, equal fingerprint.
        dirs: the data folders, as given.
        envs: env names found in them.
        episodes: episodes in all; steps: step rows in all.
        policy_examples: steps with a search's visit counts (the policy head's
            targets); with none the policy head was never trained and is not used.
    """

    fingerprint: str
    dirs: tuple[str, ...] = ()
    envs: tuple[str, ...] = ()
    episodes: int = 0
    steps: int = 0
    policy_examples: int = 0


class ValueNetSpec(_Strict):
    """Everything needed to rebuild a value network and read its inputs (JSON)."""

    format: Literal["wmkit.value_net/1"] = VALUE_NET_FORMAT
    features: FeatureSpec = FeatureSpec()
    model: ModelSpec = ModelSpec()
    target: TargetSpec
    data: DataSpec | None = None
    metrics: dict[str, Any] = Field(default_factory=dict)


class ValueInput(NamedTuple):
    """What the network reads of a state: agent-visible only.

    Attributes:
        observation: the text the step into the state produced.
        actions: the admissible actions there (empty when unknown).
        score: ``score / max_score`` when ``max_score > 0``, else the raw score.
        facts: the agent's tracked facts there, a hashable collection of
            ``(subject, relation, object)`` triples (a ``WorldState``, a frozenset);
            empty when the agent tracks none.
    """

    observation: str
    actions: tuple[str, ...] = ()
    score: float = 0.0
    facts: Any = frozenset()


def value_input(observation: str, info: Mapping[str, Any]) -> ValueInput:
    """The :class:`ValueInput` of a state from its observation and agent-visible info."""
    score = float(info.get("score", 0) or 0)
    max_score = float(info.get("max_score", 0) or 0)
    if max_score > 0:
        score /= max_score
    facts = info.get(TRACKED_FACTS) or frozenset()
    return ValueInput(observation, tuple(info.get("admissible_actions") or ()), score, facts)


class Featurizer:
    """Reads :class:`ValueInput` records into hashed bucket ids and numeric columns.

    Words are runs of ``[a-z0-9]`` in the lower-cased text; each word, and each pair of
    adjacent words of one line, is hashed with CRC-32 (unlike ``hash()``, the same in
    every process) into one of ``buckets`` rows, under a prefix saying where it came
    from (``o`` observation, ``f`` tracked facts, ``a`` admissible actions, ``c`` a
    candidate command the policy head scores): "door" in the text and in a command are
    different features.

    Args:
        spec: the feature settings.
        vocab: which buckets are kept (a bool per bucket, the network's ``vocab``);
            None keeps all.
    """

    def __init__(self, spec: FeatureSpec, vocab: Any = None) -> None:
        self.spec = spec
        self.numeric = 1 if spec.score else 0
        """Numeric input columns (the score)."""
        self._vocab: bytes | None = None
        self._memo: dict[tuple[str, str], tuple[dict[int, None], dict[int, None]]] = {}
        if vocab is not None:
            mask = np.asarray(vocab, dtype=np.uint8)
            if mask.shape != (spec.buckets,):
                raise ValueError(f"vocab must hold one flag per bucket ({spec.buckets})")
            # bytes: indexing one flag is a plain int, far cheaper than a numpy scalar.
            self._vocab = None if mask.all() else mask.tobytes()

    def key(self, x: ValueInput) -> Hashable:
        """The parts of ``x`` the features depend on (a cache key)."""
        return (
            x.observation,
            x.actions if self.spec.actions else (),
            x.score if self.spec.score else 0.0,
            x.facts if self.spec.facts else (),
        )

    def all_ids(self, x: ValueInput) -> list[int]:
        """Every distinct bucket id of ``x``, observation first (no vocabulary, no cap)."""
        return list(self._gather(x, 0))

    def ids(self, x: ValueInput) -> list[int]:
        """The distinct ids of ``x`` in the vocabulary, observation first, capped."""
        return list(self._gather(x, 1))[: self.spec.max_features]

    def command_ids(self, command: str) -> list[int]:
        """The ids of a candidate command (prefix ``c``) in the vocabulary."""
        return list(self._line("c", command)[1])

    def all_command_ids(self, command: str) -> list[int]:
        """Every id of a candidate command (no vocabulary)."""
        return list(self._line("c", command)[0])

    def _gather(self, x: ValueInput, part: int) -> dict[int, None]:
        found: dict[int, None] = {}
        for line in x.observation.splitlines():
            found.update(self._line("o", line)[part])
        if self.spec.facts:
            for fact in x.facts:
                found.update(self._line("f", " ".join(fact))[part])
        if self.spec.actions:
            for action in x.actions:
                found.update(self._line("a", action)[part])
        return found

    def _line(self, prefix: str, line: str) -> tuple[dict[int, None], dict[int, None]]:
        """The ids of one line (pairs do not cross lines): all, and those in the vocabulary.

        States share most of their lines (a room's description, the commands), so each
        distinct line is hashed and filtered once: featurising a state is then mostly
        dictionary lookups.
        """
        key = (prefix, line)
        found = self._memo.get(key)
        if found is not None:
            return found
        words = _TOKEN.findall(line.lower())
        size = self.spec.buckets
        crc = zlib.crc32
        every = {crc(f"{prefix} {w}".encode()) % size: None for w in words}
        if self.spec.ngrams == 2:
            for a, b in itertools.pairwise(words):
                every[crc(f"{prefix} {a} {b}".encode()) % size] = None
        vocab = self._vocab
        kept = every if vocab is None else {i: None for i in every if vocab[i]}
        if len(self._memo) >= _MEMO_LINES:
            self._memo.clear()
        self._memo[key] = found = (every, kept)
        return found

    def batch(
        self, xs: Sequence[ValueInput], device: torch.device | str = "cpu"
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return ``(ids, offsets, numeric)`` for a batch, as :class:`ValueNet` takes them.

        Returns:
            ``ids``: int64 ``[sum of lengths]``, every input's ids one after another;
            ``offsets``: int64 ``[B]``, where each input's ids start; ``numeric``:
            float32 ``[B, numeric]``.
        """
        rows = [self.ids(x) for x in xs]
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        flat = np.fromiter(
            itertools.chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum())
        )
        ids = torch.from_numpy(flat)
        offsets = torch.from_numpy(np.cumsum(lengths) - lengths)
        numeric = torch.tensor(
            [[x.score] if self.numeric else [] for x in xs], dtype=torch.float32
        ).reshape(len(xs), self.numeric)
        return ids.to(device), offsets.to(device), numeric.to(device)

    def candidates(
        self, commands: Sequence[Sequence[str]], device: torch.device | str = "cpu"
    ) -> CandidateBatch:
        """The candidate commands of a batch of states, flat (see :class:`CandidateBatch`)."""
        rows = [self.command_ids(c) for cs in commands for c in cs]
        counts = np.fromiter(map(len, commands), dtype=np.int64, count=len(commands))
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        flat = np.fromiter(
            itertools.chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum())
        )
        owner = np.repeat(np.arange(len(commands), dtype=np.int64), counts)
        return CandidateBatch(
            torch.from_numpy(flat).to(device),
            torch.from_numpy(np.cumsum(lengths) - lengths).to(device),
            torch.from_numpy(owner).to(device),
        )


class CandidateBatch(NamedTuple):
    """The candidate commands of a batch of states, one after another.

    Attributes:
        ids: int64 ``[sum of lengths]``: every command's feature ids.
        offsets: int64 ``[M]``: where each command's ids start.
        owner: int64 ``[M]``: the batch index of the state each command belongs to
            (non-decreasing: a state's commands are contiguous).
    """

    ids: torch.Tensor
    offsets: torch.Tensor
    owner: torch.Tensor


def segment_log_softmax(logits: torch.Tensor, owner: torch.Tensor, states: int) -> torch.Tensor:
    """Log-softmax of ``logits`` ``[M]`` within each state's segment (``owner``)."""
    top = torch.full((states,), -torch.inf, dtype=logits.dtype, device=logits.device)
    top = top.scatter_reduce(0, owner, logits.detach(), "amax", include_self=True)
    z = logits - top[owner]
    total = torch.zeros(states, dtype=logits.dtype, device=logits.device)
    total = total.index_add(0, owner, z.exp())
    return z - total.clamp_min(1e-30).log()[owner]


class ValueNet(nn.Module):
    """Hashed-feature embeddings, two ReLU layers, a value; maybe a policy head too.

    The mean of a state's feature embeddings and its numeric inputs go through two ReLU
    layers (the state vector) and one linear head (the value); with
    ``spec.model.policy``, candidate commands get a logit each (module doc).

    ``forward(ids, offsets, numeric)`` takes the flat ``ids`` int64 ``[N]`` of a batch,
    ``offsets`` int64 ``[B]`` (where each input's ids start in ``ids``; an input with
    none embeds as zeros) and ``numeric`` float32 ``[B, numeric]``, and returns float32
    ``[B]``: the value in reward units, ``mean + std * head(...)``, so that the head
    learns a standardised target. Flat ids with offsets, not a padded matrix: the
    ``EmbeddingBag`` path with ``padding_idx`` is some 80x slower on CPU.

    Args:
        spec: the whole spec (features, sizes, target scale).
    """

    def __init__(self, spec: ValueNetSpec) -> None:
        super().__init__()
        numeric = 1 if spec.features.score else 0
        dim, hidden = spec.model.dim, spec.model.hidden
        self.bag = nn.EmbeddingBag(spec.features.buckets, dim, mode="mean")
        # N(0, 1) rows (the default) average to a large, noisy start; small rows let the
        # MLP see the mean of what a state's words learned.
        nn.init.normal_(self.bag.weight, std=0.1)
        self.drop = nn.Dropout(spec.model.dropout)
        self.mlp = nn.Sequential(
            nn.Linear(dim + numeric, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 1),
        )
        if spec.model.policy:
            # A command's vector meets the state's (a scaled dot product), and a term
            # of the command alone says what its words are worth in any state.
            self.command = nn.Linear(dim, hidden)
            self.query = nn.Linear(hidden, hidden)
            self.command_bias = nn.Linear(dim, 1)
        self.policy = spec.model.policy
        # Which hash buckets are in the vocabulary: learned from the data (the trainer
        # sets it), so it travels in the state_dict.
        self.register_buffer("vocab", torch.ones(spec.features.buckets, dtype=torch.bool))
        # The scale is part of the spec (JSON), not of the state_dict.
        self.register_buffer("mean", torch.tensor(spec.target.mean), persistent=False)
        self.register_buffer("std", torch.tensor(spec.target.std), persistent=False)

    def state(
        self, ids: torch.Tensor, offsets: torch.Tensor, numeric: torch.Tensor
    ) -> torch.Tensor:
        """The state vector ``[B, hidden]`` (the trunk both heads read)."""
        x = self.drop(self.bag(ids, offsets))
        if numeric.shape[1]:
            x = torch.cat([x, numeric], dim=1)
        mlp = self.mlp
        return mlp[3](mlp[2](mlp[1](mlp[0](x))))

    def head(self, ids: torch.Tensor, offsets: torch.Tensor, numeric: torch.Tensor) -> torch.Tensor:
        """The standardised prediction ``[B]`` (what the loss compares)."""
        return self.mlp[4](self.state(ids, offsets, numeric)).squeeze(-1)

    def forward(
        self, ids: torch.Tensor, offsets: torch.Tensor, numeric: torch.Tensor
    ) -> torch.Tensor:
        """The value ``[B]`` in reward units."""
        return self.mean + self.std * self.head(ids, offsets, numeric)

    def logits(
        self, state: torch.Tensor, commands: torch.Tensor, owner: torch.Tensor
    ) -> torch.Tensor:
        """A logit per candidate command ``[M]``.

        Args:
            state: the state vectors ``[B, hidden]`` (:meth:`state`).
            commands: the commands' embeddings ``[M, dim]`` (``bag`` of their ids).
            owner: ``[M]``, the state each command belongs to.

        Raises:
            RuntimeError: the network has no policy head.
        """
        if not self.policy:
            raise RuntimeError("this network has no policy head (ModelSpec.policy is off)")
        q = self.query(state)[owner]
        match = (self.command(commands) * q).sum(-1) / math.sqrt(q.shape[-1])
        return match + self.command_bias(commands).squeeze(-1)

    def evaluate(
        self,
        ids: torch.Tensor,
        offsets: torch.Tensor,
        numeric: torch.Tensor,
        candidates: CandidateBatch | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One pass: standardised values ``[B]`` and candidate logits ``[M]`` (or None)."""
        h = self.state(ids, offsets, numeric)
        value = self.mlp[4](h).squeeze(-1)
        if candidates is None or not self.policy:
            return value, None
        commands = self.bag(candidates.ids, candidates.offsets)
        return value, self.logits(h, commands, candidates.owner)


class SingleStateForward:
    """The network's forward pass for one state at a time, in numpy, for a search.

    A search asks for thousands of single states, where torch's per-operation cost
    (tens of microseconds) is most of a tiny network's time; here a state costs one
    gather of its feature rows and three small matrix-vector products. The candidate
    commands' half of the policy head does not depend on the state, so each distinct
    command's key vector and own logit are computed once and kept in a table (a game's
    states share most of their thousands of template x noun commands): a state's
    candidates then cost one index lookup each and one matrix-vector product. Same
    numbers as :meth:`ValueNet.evaluate` (tested), in float32.

    Args:
        model: the network (its weights are copied; later training does not show).
        featurizer: its featuriser (the ids of a state and of a command).
        max_commands: distinct commands kept in the table (then it starts over).
    """

    def __init__(
        self, model: ValueNet, featurizer: Featurizer, max_commands: int = 1 << 18
    ) -> None:
        w = {k: v.detach().cpu().float().numpy() for k, v in model.state_dict().items()}
        self.featurizer = featurizer
        self.embedding = w["bag.weight"]
        self.layers = [(w[f"mlp.{i}.weight"], w[f"mlp.{i}.bias"]) for i in (0, 2, 4)]
        self.policy = bool(model.policy)
        if self.policy:
            self.query = (w["query.weight"], w["query.bias"])
            self.command = (w["command.weight"], w["command.bias"])
            self.command_bias = (w["command_bias.weight"][0], float(w["command_bias.bias"][0]))
        self.numeric = featurizer.numeric
        self.max_commands = max_commands
        self._row: dict[str, int] = {}
        width = self.layers[0][0].shape[0]
        self._keys = np.zeros((0, width), dtype=np.float32)
        self._own = np.zeros(0, dtype=np.float32)

    def _embed(self, ids: list[int]) -> np.ndarray:
        if not ids:
            return np.zeros(self.embedding.shape[1], dtype=np.float32)
        return self.embedding[ids].mean(0)

    def _rows(self, commands: tuple[str, ...]) -> np.ndarray:
        """The table rows of ``commands``, adding the commands not in it yet."""
        row = self._row
        new = [c for c in dict.fromkeys(commands) if c not in row]
        if new:
            if len(row) + len(new) > self.max_commands:
                row.clear()
                new = list(dict.fromkeys(commands))
            e = np.stack([self._embed(self.featurizer.command_ids(c)) for c in new])
            weight, bias = self.command
            keys = ((e @ weight.T + bias) / math.sqrt(weight.shape[0])).astype(np.float32)
            own_w, own_b = self.command_bias
            start, end = len(row), len(row) + len(new)
            if end > len(self._own):  # room for twice as many: amortised appends
                grow = max(2 * end, 1024)
                self._keys = np.resize(self._keys, (grow, keys.shape[1]))
                self._own = np.resize(self._own, grow)
            self._keys[start:end] = keys
            self._own[start:end] = (e @ own_w + own_b).astype(np.float32)
            row.update(zip(new, range(start, end), strict=True))
        return np.fromiter(map(row.__getitem__, commands), dtype=np.int64, count=len(commands))

    def __call__(
        self, x: ValueInput, commands: tuple[str, ...] | None = None
    ) -> tuple[float, np.ndarray | None]:
        """The standardised value of ``x`` and the logits of ``commands`` (or None)."""
        h = self._embed(self.featurizer.ids(x))
        if self.numeric:
            h = np.append(h, np.float32(x.score))
        (w0, b0), (w1, b1), (w2, b2) = self.layers
        h = np.maximum(w0 @ h + b0, 0.0)
        h = np.maximum(w1 @ h + b1, 0.0)
        value = float(w2[0] @ h + b2[0])
        if not commands or not self.policy:
            return value, None
        rows = self._rows(commands)
        wq, bq = self.query
        return value, self._keys[rows] @ (wq @ h + bq) + self._own[rows]


def build_value_net(spec: ValueNetSpec) -> tuple[ValueNet, Featurizer]:
    """A fresh network (random weights, every bucket in its vocabulary) and featuriser."""
    return ValueNet(spec), Featurizer(spec.features)


# --- files -------------------------------------------------------------------------------


def save_torch_file(obj: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """``torch.save`` ``obj`` to ``path`` atomically: a temporary file, fsync, rename.

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        with tmp.open("wb") as f:
            torch.save(dict(obj), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # atomic: readers see the old file or the new one
    finally:
        tmp.unlink(missing_ok=True)
    fsync_path(path.parent)
    return path


def load_torch_file(
    path: str | os.PathLike[str], what: str, fmt: str, device: torch.device | str = "cpu"
) -> dict[str, Any]:
    """Read a file written by :func:`save_torch_file` and check its ``format`` tag.

    Args:
        path: the file.
        what: what the file should be, for error messages ("value-network checkpoint").
        fmt: the ``format`` tag it must carry.
        device: where tensors are loaded.

    Raises:
        FileNotFoundError: no file at ``path``.
        CheckpointError: the file cannot be read (truncated, corrupt, not a torch file)
            or is not a ``fmt`` file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no {what} at {path}")
    try:
        obj = torch.load(path, map_location=device, weights_only=True)
    except Exception as err:  # torch raises RuntimeError, UnpicklingError, EOFError...
        raise CheckpointError(
            f"{path} is not a readable {what} (truncated or corrupt?): {type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}"
        ) from None
    if not isinstance(obj, dict) or obj.get("format") != fmt:
        found = obj.get("format") if isinstance(obj, dict) else type(obj).__name__
        raise CheckpointError(f"{path} is not a {what}: format {found!r}, expected {fmt!r}")
    return obj


def parse_spec(text: Any, path: str | os.PathLike[str]) -> ValueNetSpec:
    """Validate the spec JSON stored in a checkpoint, naming the file on failure.

    Raises:
        CheckpointError: not a string, not JSON, or not a valid spec.
    """
    if not isinstance(text, str):
        raise CheckpointError(f"{path} holds no spec JSON (got {type(text).__name__})")
    try:
        return ValueNetSpec.model_validate_json(text)
    except ValidationError as err:
        raise CheckpointError(f"{path} holds an invalid value-network spec: {err}") from None


def load_state(model: nn.Module, state: Any, path: str | os.PathLike[str]) -> None:
    """Load ``state`` into ``model``, or say that the file does not match its spec.

    Raises:
        CheckpointError: missing or unexpected keys, or tensors of another shape.
    """
    if not isinstance(state, Mapping):
        raise CheckpointError(f"{path} holds no model state_dict")
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        raise CheckpointError(f"{path}: the weights do not match the spec: {err}") from None


def save_value_net(path: str | os.PathLike[str], spec: ValueNetSpec, model: ValueNet) -> Path:
    """Write an inference checkpoint (spec JSON + state_dict) atomically; return its path."""
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return save_torch_file(
        {"format": VALUE_NET_FORMAT, "spec": spec.model_dump_json(), "model": state}, path
    )


def load_value_net(
    path: str | os.PathLike[str], device: torch.device | str = "cpu"
) -> tuple[ValueNetSpec, ValueNet, Featurizer]:
    """Read a checkpoint written by :func:`save_value_net`; the model is in eval mode.

    Raises:
        FileNotFoundError: no file at ``path``.
        CheckpointError: unreadable, not a value-network checkpoint, an invalid spec,
            or weights that do not match the spec.
    """
    obj = load_torch_file(path, "value-network checkpoint", VALUE_NET_FORMAT, device)
    spec = parse_spec(obj.get("spec"), path)
    model = ValueNet(spec)
    load_state(model, obj.get("model"), path)
    model.to(device).eval()
    return spec, model, Featurizer(spec.features, model.vocab.cpu().numpy())
