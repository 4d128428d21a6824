"""Every registered id builds through gymnasium.make and passes Gymnasium's env checker
(the diagnostic families in ``test_family_contract.py``, the games here)."""

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

from wmkit.envs import DIAGNOSTIC_IDS, ENV_IDS, GAME_IDS


def test_the_id_lists_cover_the_registry():
    registered = {env_id for env_id in gymnasium.registry if env_id.startswith("wmkit/")}
    assert registered == set(ENV_IDS) == set(DIAGNOSTIC_IDS) | set(GAME_IDS)


@pytest.mark.jericho
@pytest.mark.parametrize("ground_truth", [False, True])
def test_jericho_passes_check_env(games_dir, ground_truth):
    env = gymnasium.make(
        "wmkit/Jericho-v0",
        game=str(games_dir / "905.z5"),
        ground_truth=ground_truth,
        admissible_actions=False,
    )
    check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.textworld
@pytest.mark.parametrize("ground_truth", [False, True])
def test_textworld_passes_check_env(tmp_path_factory, ground_truth):
    from wmkit.envs.twgames import make_game

    game = make_game("simple", {"seed": 1}, cache_dir=tmp_path_factory.getbasetemp() / "tw")
    env = gymnasium.make("wmkit/TextWorld-v0", game=str(game), ground_truth=ground_truth)
    check_env(env.unwrapped, skip_render_check=True)
