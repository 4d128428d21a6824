"""The learned value network behind the ``value_net`` value function, and its checkpoints.

What the agent sees of a state (:class:`ValueInput`: the observation text, optionally
the admissible actions and the normalised score; never ``wm.*``) is read into hashed
word and word-pair features (:class:`Featurizer`), averaged by an ``nn.EmbeddingBag``
and mapped by a small MLP to the state's value in reward units (:class:`ValueNet`).
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

__all__ = [
    "VALUE_NET_FORMAT",
    "CheckpointError",
    "DataSpec",
    "FeatureSpec",
    "Featurizer",
    "ModelSpec",
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
    score: bool = True
    max_features: int = Field(default=512, ge=1)
    min_share: float = Field(default=0.2, ge=0.0, le=1.0)


class ModelSpec(_Strict):
    """The network's sizes.

    Attributes:
        dim: embedding width.
        hidden: width of the MLP's two hidden layers.
        dropout: dropout on the averaged embedding while training, in [0, 1).
    """

    dim: int = Field(default=32, ge=1)
    hidden: int = Field(default=64, ge=1)
    dropout: float = Field(default=0.1, ge=0.0, lt=1.0)


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
    """

    fingerprint: str
    dirs: tuple[str, ...] = ()
    envs: tuple[str, ...] = ()
    episodes: int = 0
    steps: int = 0


class ValueNetSpec(_Strict):
    """Everything needed to rebuild a value network and read its inputs (JSON)."""

    format: Literal["wmkit.value_net/1"] = VALUE_NET_FORMAT
    features: FeatureSpec = FeatureSpec()
    model: ModelSpec = ModelSpec()
    target: TargetSpec
    data: DataSpec | None = None
    metrics: dict[str, Any] = Field(default_factory=dict)


class ValueInput(NamedTuple):
    """What the value network reads of a state: agent-visible only.

    Attributes:
        observation: the text the step into the state produced.
        actions: the admissible actions there (empty when unknown).
        score: ``score / max_score`` when ``max_score > 0``, else the raw score.
    """

    observation: str
    actions: tuple[str, ...] = ()
    score: float = 0.0


def value_input(observation: str, info: Mapping[str, Any]) -> ValueInput:
    """The :class:`ValueInput` of a state from its observation and agent-visible info."""
    score = float(info.get("score", 0) or 0)
    max_score = float(info.get("max_score", 0) or 0)
    if max_score > 0:
        score /= max_score
    return ValueInput(observation, tuple(info.get("admissible_actions") or ()), score)


class Featurizer:
    """Reads :class:`ValueInput` records into hashed bucket ids and numeric columns.

    Words are runs of ``[a-z0-9]`` in the lower-cased text; each word, and each pair of
    adjacent words of one line, is hashed with CRC-32 (unlike ``hash()``, the same in
    every process) into one of ``buckets`` rows, under a prefix saying where it came
    from (``o`` observation, ``a`` actions): "door" in the text and in a command are
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
        )

    def all_ids(self, x: ValueInput) -> list[int]:
        """Every distinct bucket id of ``x``, observation first (no vocabulary, no cap)."""
        return list(self._gather(x, 0))

    def ids(self, x: ValueInput) -> list[int]:
        """The distinct ids of ``x`` in the vocabulary, observation first, capped."""
        return list(self._gather(x, 1))[: self.spec.max_features]

    def _gather(self, x: ValueInput, part: int) -> dict[int, None]:
        found: dict[int, None] = {}
        for line in x.observation.splitlines():
            found.update(self._line("o", line)[part])
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


class ValueNet(nn.Module):
    """Mean of hashed-feature embeddings, the numeric inputs, two ReLU layers, one value.

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
        # Which hash buckets are in the vocabulary: learned from the data (the trainer
        # sets it), so it travels in the state_dict.
        self.register_buffer("vocab", torch.ones(spec.features.buckets, dtype=torch.bool))
        # The scale is part of the spec (JSON), not of the state_dict.
        self.register_buffer("mean", torch.tensor(spec.target.mean), persistent=False)
        self.register_buffer("std", torch.tensor(spec.target.std), persistent=False)

    def head(self, ids: torch.Tensor, offsets: torch.Tensor, numeric: torch.Tensor) -> torch.Tensor:
        """The standardised prediction ``[B]`` (what the loss compares)."""
        x = self.drop(self.bag(ids, offsets))
        if numeric.shape[1]:
            x = torch.cat([x, numeric], dim=1)
        return self.mlp(x).squeeze(-1)

    def forward(
        self, ids: torch.Tensor, offsets: torch.Tensor, numeric: torch.Tensor
    ) -> torch.Tensor:
        """The value ``[B]`` in reward units."""
        return self.mean + self.std * self.head(ids, offsets, numeric)


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
