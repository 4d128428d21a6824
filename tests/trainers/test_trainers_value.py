"""The value trainer on real recordings: targets, learning, resume, checkpoints, the script."""

import io
from typing import NamedTuple

import gymnasium
import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_module
from rich.console import Console

import wmkit.envs  # noqa: F401  (registers the wmkit/ ids)
from wmkit.agents.mcts import MCTSPolicy
from wmkit.agents.recording import record_policy
from wmkit.knowledge.recording import (
    Recorder,
    TrajectoryWriter,
    load_episodes,
    load_trajectories,
    record_random,
)
from wmkit.scripts.bench_value import main
from wmkit.scripts.train_value import run
from wmkit.search.simulators import EnvSnapshotSimulator
from wmkit.search.types import Budget
from wmkit.search.value_net import (
    VALUE_NET_FORMAT,
    CheckpointError,
    load_value_net,
    save_torch_file,
)
from wmkit.search.values import ValueNetValue
from wmkit.trainers.distill import split_episodes
from wmkit.trainers.value import (
    LAST_FILE,
    VALUE_FILE,
    TrainValueConfig,
    data_fingerprint,
    load_examples,
    resolve_device,
    returns_to_go,
    spearman,
    train_value,
)

# A small network, so that a test trains in about a second on a busy CPU.
SMALL = {"features": {"buckets": 4096}, "model": {"dim": 16, "hidden": 32}, "threads": 1}


@pytest.fixture(scope="module")
def vault_mcts(tmp_path_factory):
    """40 Vault episodes (one locked door) played by MCTS, recorded as wmkit-collect does.

    A searching agent's returns depend on where it stands (near the vault or not) far
    more than a random walker's, whose returns are mostly luck.
    """
    data = tmp_path_factory.mktemp("data") / "vault"
    env = gymnasium.make("wmkit/Vault-v0", load=1, horizon=60)
    with TrajectoryWriter(data) as writer:
        recorder = Recorder(env, writer.write, env_name="vault", agent="mcts")
        policy = MCTSPolicy(EnvSnapshotSimulator(recorder), budget=Budget(16, max_depth=8))
        record_policy(recorder, policy, range(40))
    return data


def _config(data, **kwargs):
    return TrainValueConfig(data_dirs=[str(d) for d in data], progress=False, **kwargs)


def _quiet():
    return Console(file=io.StringIO())


def test_returns_to_go_counts_the_rewards_still_to_come():
    # rewards[t] is the reward of the step into state t; state t's value is what follows.
    assert returns_to_go([0.0, 1.0, 0.0, 2.0], 0.5).tolist() == [1.5, 1.0, 2.0, 0.0]
    assert returns_to_go([0.0, 3.0], 1.0).tolist() == [3.0, 0.0]
    assert returns_to_go([0.0], 0.9).tolist() == [0.0]


def test_spearman_ranks_with_ties_and_refuses_constants():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # Ties take their mean rank: x ranks (1, 2.5, 2.5, 4) against y ranks (1, 2, 3, 4).
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486833, abs=1e-6)
    assert spearman([1, 1, 1], [1, 2, 3]) is None


def test_examples_are_the_recorded_steps_with_their_returns(vault_mcts):
    ex = load_examples([vault_mcts], 0.9)
    rows = load_trajectories(vault_mcts)
    assert len(ex.inputs) == len(rows) == len(ex.targets)
    episodes = {e["episode"]: e for e in load_episodes(vault_mcts)}
    first = rows.filter(lambda r: r["episode"] == "seed=0")
    mine = [i for i, k in enumerate(ex.episodes) if k == ("vault", "seed=0")]
    assert [ex.inputs[i].observation for i in mine] == first["observation"]
    assert [list(ex.inputs[i].actions) for i in mine] == first["admissible_actions"]
    assert ex.targets[mine].tolist() == pytest.approx(returns_to_go(first["reward"], 0.9).tolist())
    # The score the agent saw: reward so far over the episode's max_score.
    last = ex.inputs[mine[-1]]
    end = episodes["seed=0"]
    assert last.score == pytest.approx(end["score"] / end["max_score"])
    # Only what the agent sees: no ground truth was recorded, none could leak in.
    fields = {"observation", "actions", "score", "facts"}
    assert all(set(x._fields) == fields for x in ex.inputs[:3])
    assert all(x.facts == frozenset() for x in ex.inputs)  # facts=False reads none


def test_network_ranks_held_out_states_and_reports_its_skill(vault_mcts, tmp_path):
    config = _config([vault_mcts], epochs=6, lr=3e-3, held_out=0.25, **SMALL)
    report = train_value(config, tmp_path, console=_quiet())
    val = report["eval"]
    assert report["split"]["val_episodes"] == 10 and report["split"]["train_episodes"] == 30
    # Ranking is what search uses; a constant cannot rank at all. Beating the constant's
    # MSE on 10 held-out episodes is luck of the split on 40 (3 of 6 splits): the report
    # says it as skill = 1 - mse / constant_mse, whichever way it comes out.
    assert val["spearman"] > 0.1, val
    assert val["skill"] == pytest.approx(1 - val["mse"] / val["constant_mse"]), val
    assert val["per_env"]["vault"]["examples"] == val["examples"]
    assert [h["epoch"] for h in report["history"]] == list(range(1, 7))
    # value.pt rebuilds the same network: its MSE on the held-out episodes is the report's.
    ex = load_examples([vault_mcts], config.discount)

    class Episode(NamedTuple):
        env: str
        episode: str

    _, held = split_episodes([Episode(*k) for k in sorted(set(ex.episodes))], 0.25, seed=0)
    idx = [i for i, k in enumerate(ex.episodes) if Episode(*k) in set(held)]
    net = ValueNetValue(tmp_path / VALUE_FILE)
    pred = np.array(net.predict([ex.inputs[i] for i in idx]))
    assert np.mean((pred - ex.targets[idx]) ** 2) == pytest.approx(val["mse"], rel=1e-4)
    spec = net.spec
    assert spec.data.fingerprint == data_fingerprint([vault_mcts])
    assert spec.target.discount == 0.95 and spec.metrics["eval"]["mse"] == val["mse"]
    # The vocabulary dropped names particular to a few episodes' houses.
    assert 0 < int(net.model.vocab.sum()) < spec.features.buckets


def test_resume_continues_from_the_saved_epoch_to_the_same_weights(vault_mcts, tmp_path):
    kwargs = {"held_out": 0.25, "model": {"dim": 8, "hidden": 16, "dropout": 0.2}}
    kwargs |= {k: v for k, v in SMALL.items() if k != "model"}
    straight = train_value(
        _config([vault_mcts], epochs=3, **kwargs), tmp_path / "a", console=_quiet()
    )
    train_value(_config([vault_mcts], epochs=1, **kwargs), tmp_path / "b", console=_quiet())
    assert torch.load(tmp_path / "b" / LAST_FILE, weights_only=True)["epoch"] == 1
    log = io.StringIO()
    resumed = train_value(
        _config([vault_mcts], epochs=3, **kwargs),
        tmp_path / "b",
        console=Console(file=log, width=400),
    )
    assert "resuming from" in log.getvalue() and "at epoch 1/3" in log.getvalue()
    assert [h["epoch"] for h in resumed["history"]] == [1, 2, 3]
    # Epoch 1 was not trained again (its record is the saved one) and the end is the same.
    for key in ("losses/train_mse_std", "eval/mse"):
        assert [h[key] for h in resumed["history"]] == [h[key] for h in straight["history"]]
    a = torch.load(tmp_path / "a" / VALUE_FILE, weights_only=True)["model"]
    b = torch.load(tmp_path / "b" / VALUE_FILE, weights_only=True)["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert resumed["eval"]["mse"] == straight["eval"]["mse"]
    # Done already: asking again trains nothing and writes the same network.
    again = train_value(_config([vault_mcts], epochs=3, **kwargs), tmp_path / "b", console=_quiet())
    assert again["eval"]["mse"] == straight["eval"]["mse"]
    with pytest.raises(CheckpointError, match="past epochs=2"):
        train_value(_config([vault_mcts], epochs=2, **kwargs), tmp_path / "b", console=_quiet())


def test_resume_refuses_the_checkpoint_of_another_run(vault_mcts, tmp_path):
    config = _config([vault_mcts], epochs=1, **SMALL)
    train_value(config, tmp_path, console=_quiet())
    with pytest.raises(CheckpointError, match=r"settings\.lr \(checkpoint 0\.001, now 0\.01\)"):
        train_value(config.model_copy(update={"lr": 0.01}), tmp_path, console=_quiet())
    # Other data: one more episode in the folder changes the fingerprint.
    other = tmp_path / "other" / "vault"
    env = gymnasium.make("wmkit/Vault-v0", load=1, horizon=20)
    with TrajectoryWriter(other) as writer:
        record_random(Recorder(env, writer.write, env_name="vault"), [0, 1])
    moved = config.model_copy(update={"data_dirs": [str(other)]})
    with pytest.raises(CheckpointError, match=r"data\.fingerprint"):
        train_value(moved, tmp_path, console=_quiet())
    # resume=false starts over in the same folder.
    fresh = moved.model_copy(update={"resume": False})
    assert train_value(fresh, tmp_path, console=_quiet())["split"]["val_episodes"] == 1


def test_corrupt_or_foreign_checkpoints_are_clear_errors(vault_mcts, tmp_path):
    config = _config([vault_mcts], epochs=1, **SMALL)
    train_value(config, tmp_path, console=_quiet())
    last = tmp_path / LAST_FILE
    last.write_bytes(last.read_bytes()[:1000])  # a torn write (never ours: we rename)
    with pytest.raises(CheckpointError, match="not a readable value-training checkpoint"):
        train_value(config, tmp_path, console=_quiet())
    last.write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        train_value(config, tmp_path, console=_quiet())
    foreign = save_torch_file({"format": "something/else"}, tmp_path / "foreign.pt")
    with pytest.raises(CheckpointError, match="format 'something/else'"):
        load_value_net(foreign)
    # A spec that does not describe the weights: more buckets than the embedding has.
    good = torch.load(tmp_path / VALUE_FILE, weights_only=True)
    spec = good["spec"].replace('"buckets":4096', '"buckets":8192')
    bad = save_torch_file({**good, "spec": spec}, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match="do not match the spec"):
        load_value_net(bad)
    broken = save_torch_file({**good, "spec": "{"}, tmp_path / "broken.pt")
    with pytest.raises(CheckpointError, match="invalid value-network spec"):
        load_value_net(broken)
    assert good["format"] == VALUE_NET_FORMAT


def test_missing_empty_or_single_episode_data_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no data folder"):
        train_value(_config([tmp_path / "nowhere"]), tmp_path / "out", console=_quiet())
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no recorded episodes"):
        train_value(_config([tmp_path / "empty"]), tmp_path / "out", console=_quiet())
    env = gymnasium.make("wmkit/Vault-v0", load=1, horizon=20)
    with TrajectoryWriter(tmp_path / "one") as writer:
        record_random(Recorder(env, writer.write, env_name="vault"), [0])
    with pytest.raises(ValueError, match="at least 2 are needed"):
        train_value(_config([tmp_path / "one"]), tmp_path / "out", console=_quiet())
    with pytest.raises(ValueError, match="in two data folders"):
        load_examples([tmp_path / "one", tmp_path / "one"], 0.9)


def test_devices_resolve_or_refuse():
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="not a torch device"):
        resolve_device("abacus")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            resolve_device("cuda")


@pytest.mark.gpu
def test_training_on_cuda_gives_a_network_the_cpu_runs(vault_mcts, tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here")
    report = train_value(_config([vault_mcts], epochs=2, device="cuda"), tmp_path, console=_quiet())
    assert report["device"].startswith("cuda")
    ex = load_examples([vault_mcts], 0.95)
    xs = ex.inputs[:300]
    cpu = ValueNetValue(tmp_path / VALUE_FILE).predict(xs)
    gpu = ValueNetValue(tmp_path / VALUE_FILE, device="cuda").predict(xs)
    assert gpu == pytest.approx(cpu, abs=1e-4)


def test_the_script_trains_and_prints_the_table(vault_mcts, tmp_path, capsys):
    overrides = [
        f"data_dirs=[{vault_mcts}]", f"out_dir={tmp_path}", "epochs=1", "progress=false",
        "threads=1", "features.buckets=1024", "model.dim=8", "model.hidden=16",
    ]  # fmt: skip
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        report = run(compose("train_value", overrides=overrides))
        missing = compose("train_value")
        nowhere = compose(
            "train_value", overrides=[f"data_dirs=[{tmp_path / 'nowhere'}]", f"out_dir={tmp_path}"]
        )
    out = capsys.readouterr().out
    assert "validation: value network vs the constant" in out and "vault" in out
    assert (tmp_path / VALUE_FILE).exists() and (tmp_path / "report.json").exists()
    assert report["eval"]["examples"] > 0
    with pytest.raises(SystemExit, match="invalid configuration"):
        run(missing)
    with pytest.raises(SystemExit, match="data problem: no data folder"):
        run(nowhere)


def test_bench_script_runs_tiny(vault_mcts, tmp_path, capsys):
    main(["speed", "--episodes", "4", "--horizon", "20", "--epochs", "1", "--single", "20",
          "--repeats", "1", "--threads", "1"])  # fmt: skip
    out = capsys.readouterr().out
    for measure in ("train samples/s", "one state/call, states/s", "one state/call, cache warm"):
        assert f"| cpu | {measure}" in out
    train_value(_config([vault_mcts], epochs=1, **SMALL), tmp_path, console=_quiet())
    main(["search", "--checkpoint", str(tmp_path / VALUE_FILE), "--load", "1", "--steps", "20",
          "--sims", "4", "--seeds", "1"])  # fmt: skip
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [r.split(" | ")[0] for r in rows[1:]] == ["| heuristic", "| value_net", "| hybrid"]
