"""The validated configuration of the evaluation suite (what ``wmkit-eval`` composes).

:class:`EvalConfig` holds the suite: its envs (:class:`EnvSpec`), its agents
(:class:`AgentSpec`, each a tracker and a policy with the runtime arguments they take,
:class:`Needs`), where governed memory lives (:class:`MemorySpec`), the cap on what its
LLM agents spend (:class:`LLMBudget`), and the run's own settings. :class:`Artifacts`
is what the training stages made for one env. Library code takes these validated
models, never a Hydra ``DictConfig``; :mod:`wmkit.evals.suite` builds and plays them
(and re-exports them).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "ARTIFACT_ARGS",
    "TARGET_PREFIX",
    "AgentSpec",
    "Artifacts",
    "EnvSpec",
    "EvalConfig",
    "LLMBudget",
    "LLMSpec",
    "MemorySpec",
    "Needs",
    "ServeSpec",
    "expand_games",
    "plays",
]

TARGET_PREFIX = "wmkit."


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EnvSpec(_Strict):
    """An environment of the suite: a registered id and its constructor arguments.

    ``isolate`` runs each episode in a worker process watched by a heartbeat (see
    :mod:`wmkit.evals.isolation`): an emulator that crashes or hangs fails that episode,
    recorded with the reason, and the suite goes on. Real games want it; the pure-Python
    families do not need it. ``agents`` names the agents that play the env (empty: all
    whose own ``envs`` allow it, :func:`plays`): a real game has no family reader and no
    family policy, so its config names the agents made for games.
    """

    id: str
    kwargs: dict[str, Any] = Field(default_factory=dict)
    isolate: bool = False
    heartbeat_timeout: float = Field(default=120.0, gt=0)
    agents: tuple[str, ...] = ()

    def admits(self, agent_name: str) -> bool:
        """Whether the agent ``agent_name`` may play this env (see ``agents``)."""
        return not self.agents or agent_name in self.agents


TrackerArg = Literal["reader", "memory", "rules"]
SimulatorArg = Literal["env", "reader", "rules"]
ValueArg = Literal["checkpoint"]
PolicyArg = Literal["env", "env_id"]
ARTIFACT_ARGS = frozenset({"rules", "checkpoint"})
"""The runtime arguments that are trained artifacts of the episode's env (:class:`Artifacts`)."""


class Needs(_Strict):
    """The episode's runtime arguments an agent's parts take, by name.

    A config cannot hold the live env, the env's text reader or a fresh memory store. A
    part that takes one is a ``_partial_: true`` node, and :func:`build_agent` completes
    it with exactly the arguments listed here (keyword arguments of these names), and
    nothing else: ``reader`` is the env's text reader (``env.unwrapped.reader``),
    ``memory`` a fresh store per episode (the ``memory`` config), ``env`` the live env,
    ``rules`` the path of the env's distilled ``rules.jsonl`` and ``checkpoint`` that of
    its value network (``value.pt``), both trained by the main job's stages
    (:class:`Artifacts`), and ``env_id`` the episode's registered env id
    (``wmkit/Parcel-v0``: public, what a policy that knows several families picks by).

    A policy handed the live ``env`` itself (``policy: [env]``) can read the true state
    (the family's scripted solver does): only an ``oracle`` agent may list it.

    Attributes:
        tracker: what the tracker takes (``reader``, ``memory``, ``rules``).
        simulator: what the policy's ``simulator`` node takes (``env``, ``reader``,
            ``rules``).
        value: what the policy's ``value_fn`` node takes (``checkpoint``).
        policy: what the policy node itself takes (``env``, ``env_id``).
    """

    tracker: tuple[TrackerArg, ...] = ()
    simulator: tuple[SimulatorArg, ...] = ()
    value: tuple[ValueArg, ...] = ()
    policy: tuple[PolicyArg, ...] = ()

    @property
    def artifacts(self) -> frozenset[str]:
        """The trained artifacts listed (``rules``, ``checkpoint``): what the stages make."""
        return frozenset(self.tracker + self.simulator + self.value) & ARTIFACT_ARGS

    @field_validator("tracker", "simulator", "value", "policy")
    @classmethod
    def _once(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(names)) != len(names):
            raise ValueError(f"an argument is listed twice: {list(names)}")
        return names


class AgentSpec(_Strict):
    """An agent of the suite: a tracker and a policy, each a Hydra ``_target_`` node.

    The policy node may hold a ``simulator`` node (``configs/simulator/``) and a
    ``value_fn`` node, built first and passed to the policy. ``needs`` lists the runtime
    arguments of the tracker, the simulator and the value function; a part listed there
    must be a ``_partial_: true`` node. ``envs`` names the envs the agent runs on, by the
    suite's name or by registered id (empty: all), for an agent whose policy knows one
    family only or that is made for real games (``wmkit/TextWorld-v0``). ``oracle``
    says the agent reads ground truth (the leaderboard's †); what else it is given that
    no real agent has follows from ``needs`` (:attr:`privileged`, the leaderboard's ‡).
    """

    tracker: dict[str, Any]
    policy: dict[str, Any]
    oracle: bool = False
    needs: Needs = Field(default_factory=Needs)
    envs: tuple[str, ...] = ()

    def runs_on(self, env_name: str, env_id: str | None = None) -> bool:
        """Whether the agent plays the suite's env ``env_name`` of id ``env_id`` (``envs``)."""
        return not self.envs or env_name in self.envs or env_id in self.envs

    @property
    def privileged(self) -> tuple[str, ...]:
        """The privileged parts this agent is given (:data:`~wmkit.evals.leaderboard.PRIVILEGES`).

        Read off ``needs``, the one place that says what a part is handed: the env's
        ``reader`` (to the tracker or the simulator) is the env's own parser, which
        reads every observation perfectly (``env_parser``: the ``window`` and ``memory``
        trackers, and every tracker built on the reader); the live ``env`` for the
        simulator is an exact simulator (``exact_simulator``). Carried into every row
        like ``oracle`` and marked ‡ on the leaderboard. Not a model field, so it does
        not change :func:`fingerprint`.
        """
        parts = []
        if "reader" in self.needs.tracker or "reader" in self.needs.simulator:
            parts.append("env_parser")
        if "env" in self.needs.simulator:
            parts.append("exact_simulator")
        return tuple(parts)

    @field_validator("tracker", "policy")
    @classmethod
    def _own_target(cls, node: dict[str, Any]) -> dict[str, Any]:
        target = node.get("_target_")
        if not isinstance(target, str) or not target.startswith(TARGET_PREFIX):
            raise ValueError(f"_target_ must name a class under {TARGET_PREFIX!r}, got {target!r}")
        return node

    @model_validator(mode="after")
    def _needs_partial_nodes(self) -> AgentSpec:
        for part, node, names in (
            ("tracker", self.tracker, self.needs.tracker),
            ("simulator", self.policy.get("simulator"), self.needs.simulator),
            ("value", self.policy.get("value_fn"), self.needs.value),
            ("policy", self.policy, self.needs.policy),
        ):
            if names and not (isinstance(node, dict) and node.get("_partial_") is True):
                target = node.get("_target_") if isinstance(node, dict) else None
                raise ValueError(
                    f"needs.{part} lists {list(names)}, but the {part} ({target}) is not a "
                    f"`_partial_: true` node that takes them; list only what it takes "
                    f"(needs.{part}=[] when it takes nothing)"
                )
        if "env" in self.needs.policy and not self.oracle:
            raise ValueError(
                f"needs.policy lists {list(self.needs.policy)}: a policy handed the live env "
                "can read its true state, so the agent must be marked `oracle: true`"
            )
        return self


def plays(agent_name: str, agent: AgentSpec, env_name: str, env: EnvSpec) -> bool:
    """Whether an agent plays a suite's env: the agent's ``envs`` and the env's ``agents`` allow it.

    The one rule the suite, the training stages and ``wmkit-collect`` plan episodes by.
    """
    return agent.runs_on(env_name, env.id) and env.admits(agent_name)


class MemorySpec(_Strict):
    """Where governed memory lives (the Hydra group ``memory``): one store per episode.

    Attributes:
        backend: ``sqlite`` (a file per episode under ``<run folder>/<dir>``) or
            ``postgres`` (a schema per episode in the database at ``url``).
        dir: SQLite: the folder under the run folder.
        url: PostgreSQL: a SQLAlchemy URL (``postgresql+psycopg://user@host/db``).
        keep: keep each episode's store afterwards (the audit trail), or delete it.
    """

    backend: Literal["sqlite", "postgres"] = "sqlite"
    dir: str = Field(default="memory", min_length=1)
    url: str | None = None
    keep: bool = True

    @model_validator(mode="after")
    def _postgres_needs_url(self) -> MemorySpec:
        if self.backend == "postgres" and not self.url:
            raise ValueError(
                "memory=postgres needs a database URL: set WMKIT_POSTGRES_URL or "
                "memory.url=postgresql+psycopg://user@host/db"
            )
        return self


class Artifacts(_Strict):
    """What was trained for one env: the paths its agents' ``rules``/``checkpoint`` get.

    Attributes:
        rules: the distilled ``rules.jsonl`` (None: not trained).
        checkpoint: the value network's ``value.pt`` (None: not trained).
    """

    rules: str | None = None
    checkpoint: str | None = None


class LLMBudget(_Strict):
    """A cap on what a run folder's LLM agents spend (the ``llm`` group's ``budget``).

    Counted over the rows of the run folder's ``results.jsonl`` (their ``llm``), the
    rows a resumed run started from included. Once a cap is reached no episode starts;
    those running finish (the overshoot) and the leaderboard is written of what
    finished (:func:`~wmkit.evals.suite.run_suite`). None: no cap on that count.

    Attributes:
        max_tokens: prompt plus completion tokens.
        max_calls: requests answered (cache hits included).
        max_cost: cost, in the currency of the client's prices.
    """

    max_tokens: int | None = Field(default=None, gt=0)
    max_calls: int | None = Field(default=None, gt=0)
    max_cost: float | None = Field(default=None, gt=0)

    def reached(self, spent: Mapping[str, float]) -> tuple[str, float, float] | None:
        """The first cap ``spent`` has reached, as ``(name, spent, cap)``; None for none.

        Args:
            spent: the run's total ``tokens``, ``calls`` and ``cost``.
        """
        for name, cap in (
            ("max_tokens", self.max_tokens),
            ("max_calls", self.max_calls),
            ("max_cost", self.max_cost),
        ):
            used = spent[name.removeprefix("max_")]
            if cap is not None and used >= cap:
                return name, used, cap
        return None


class ServeSpec(_Strict):
    """A model this machine serves for the run (``wmkit.scripts.llm_backend``).

    Attributes:
        model: a packaged model's name (``smollm2-135m``) or a ``.gguf`` path.
        port: the port, when the client's ``base_url`` names none.
        n_ctx: the context size in tokens.
        threads: CPU threads; None: llama-cpp-python's default.
    """

    model: str = "smollm2-135m"
    port: int = Field(default=8765, gt=0, lt=65536)
    n_ctx: int = Field(default=4096, gt=0)
    threads: int | None = Field(default=None, gt=0)


class LLMSpec(_Strict):
    """The ``llm`` group: the model the LLM agents share, what serves it, what it may cost.

    Attributes:
        client: the ``wmkit.llm.ChatClient`` node; the agents' configs interpolate it
            (``${llm.client}``), so an agent's own spec holds its settings.
        serve: a model ``wmkit-eval`` starts when an LLM agent is in the suite and
            nothing answers at the client's ``base_url``; None: the server is yours.
        budget: the cap on the run folder's spending; not part of any fingerprint, so a
            run stopped by its cap resumes with a larger one.
    """

    client: dict[str, Any] | None = None
    serve: ServeSpec | None = None
    budget: LLMBudget = Field(default_factory=LLMBudget)


_GLOB = frozenset("*?[!")
_STORY = re.compile(r"\.z[1-8]")  # z-machine story files


def expand_games(envs: Mapping[str, Any]) -> dict[str, Any]:
    """One env per game where an env's ``kwargs.game`` is a pattern or a list.

    A game named by a glob (``"*"``, ``"*.z5"``) or a list of names and globs (a
    leading ``!`` leaves the games it matches out: ``["*", "!sherbet.z5"]``;
    ``[905.z5, night.z5]``) becomes one env per matching story file of
    ``$WMKIT_GAMES_DIR``, named ``<env name>_<file stem>``, with the rest of its spec as
    it was: a protocol runs on any games folder without a config per game.

    Raises:
        ValueError: a pattern and no games folder, or no game matches.
    """
    out: dict[str, Any] = {}
    for name, spec in envs.items():
        kwargs = spec.get("kwargs") if isinstance(spec, Mapping) else None
        game = kwargs.get("game") if isinstance(kwargs, Mapping) else None
        if isinstance(game, str) and _GLOB & set(game):
            patterns = [game]
        elif isinstance(game, (list, tuple)):
            patterns = list(game)
        else:
            out[name] = spec
            continue
        for found in _match_games(name, [str(p) for p in patterns]):
            out[f"{name}_{Path(found).stem}"] = {**spec, "kwargs": {**kwargs, "game": found}}
    return out


def _match_games(name: str, patterns: list[str]) -> list[str]:
    try:
        from wmkit.envs.jericho import GAMES_DIR_VAR
    except ImportError as err:
        raise ValueError(
            f"env {name!r} plays games, which need the package {err.name!r}: "
            "pip install 'wmkit[jericho]'"
        ) from None
    folder = os.environ.get(GAMES_DIR_VAR)
    if not folder or not Path(folder).is_dir():
        raise ValueError(
            f"env {name!r} names its games by pattern ({patterns}): set {GAMES_DIR_VAR} "
            "to the folder they are in"
        )
    files = sorted(p.name for p in Path(folder).iterdir() if _STORY.fullmatch(p.suffix))
    keep: list[str] = []
    for pattern in patterns:
        if pattern.startswith("!"):
            keep = [f for f in keep if not fnmatch.fnmatch(f, pattern[1:])]
        else:
            keep += [f for f in files if fnmatch.fnmatch(f, pattern) and f not in keep]
    if not keep:
        raise ValueError(f"env {name!r}: no story file of {folder} matches {patterns}")
    return sorted(keep)


class EvalConfig(_Strict):
    """The validated configuration of one ``wmkit-eval`` run.

    ``train_seeds`` are the seeds the training stages play (``wmkit.scripts.pipeline``);
    they are never evaluated, so a config where they meet ``seeds`` is refused.
    ``pipeline`` holds those stages' settings, which the stages validate themselves
    (``PipelineConfig``): the suite only plays what they trained (:class:`Artifacts`).
    """

    envs: dict[str, EnvSpec] = Field(min_length=1)
    agents: dict[str, AgentSpec] = Field(min_length=1)
    horizons: list[int] = Field(min_length=1)
    seeds: list[int] = Field(min_length=1)
    train_seeds: list[int] = Field(default_factory=list)
    pipeline: dict[str, Any] = Field(default_factory=dict)
    memory: MemorySpec = Field(default_factory=MemorySpec)
    resume: bool = True
    retry_failed: bool = True
    """On resume, play again the episodes whose rows say they failed (their rows replaced)."""
    workers: int = Field(default=1, ge=1)
    """Episodes played at once, each in a worker process (1: in this process, in order)."""
    progress: bool = True
    records: bool = True
    """Keep each episode's record in ``<run folder>/records/``, for ``wmkit-score``."""
    llm: LLMSpec = Field(default_factory=LLMSpec)
    """The ``llm`` group (:class:`LLMSpec`); the default serves nothing, caps nothing."""

    @field_validator("envs", mode="before")
    @classmethod
    def _one_env_per_game(cls, envs: Any) -> Any:
        return expand_games(envs) if isinstance(envs, Mapping) else envs

    @field_validator("agents", mode="before")
    @classmethod
    def _settings_of_a_chosen_agent(cls, agents: Any) -> Any:
        if isinstance(agents, Mapping):
            for name, node in agents.items():
                if isinstance(node, Mapping) and "tracker" not in node:
                    raise ValueError(
                        f"agents.{name} has settings ({sorted(node)}) but no agent config: "
                        f"{name} is not among the agents chosen (agents=[...]); add it, or "
                        f"drop its settings with '~agents.{name}'"
                    )
        return agents

    @model_validator(mode="after")
    def _train_seeds_never_evaluated(self) -> EvalConfig:
        both = sorted(set(self.seeds) & set(self.train_seeds))
        if both:
            raise ValueError(
                f"seeds {both} are both evaluation seeds and train_seeds: an agent is never "
                "evaluated on the episodes it was trained on; make the two lists disjoint"
            )
        return self
