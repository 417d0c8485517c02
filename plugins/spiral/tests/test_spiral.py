"""SPIRAL's role-conditioned advantages: each row's return less the moving baseline of its game and seat, read before
the row's return updates it; baselines carried from batch to batch and through checkpoints."""

import pytest
import torch

from stackrl import Rollout
from stackrl.plugin import RunFacts
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_spiral import RoleBaselines

class TestConformance(PluginConformance):
    plugin_name = "spiral"
    stacked_with = ("env",)  # its default environment (the calculator, one seat) on the tiny model
    refused_settings = [
        ({"decay": 1.0}, "must lie strictly between 0 and 1, not 1.0"),
        ({"decay": 0.0}, "must lie strictly between 0 and 1, not 0.0"),
        ({"game_column": ""}, "give a column name, or null for one game"),
    ]


def test_each_row_gets_its_return_less_its_roles_baseline_before_the_update():
    baselines = RoleBaselines(decay=0.75)
    got = baselines.advantages([1.0, -1.0, 1.0, 0.5, -1.0],
                               [("ttt", 0), ("ttt", 1), ("ttt", 0), ("kuhn", 0), ("ttt", 1)])
    # (ttt, 0): 0 -> 0.25 -> 0.4375; (ttt, 1): 0 -> -0.25 -> -0.4375; (kuhn, 0): 0 -> 0.125
    assert got == [1.0, -1.0, 1.0 - 0.25, 0.5, -1.0 + 0.25]
    assert baselines.values == {("ttt", 0): 0.4375, ("ttt", 1): -0.4375, ("kuhn", 0): 0.125}


class Ctx:
    """An advantage-stage context: the rollout, what the plugin logs and reports."""

    def __init__(self, rollout, weight=1.0):
        self.rollout, self.logged, self.reports, self.training = rollout, {}, [], True
        self.total_reward = weight * rollout.rewards["env"]

    def log(self, name, value):
        self.logged[name] = value

    def acted(self, n, *, of, hint=None):
        self.reports.append((n, of))


def episodes(returns, seats, game="tictactoe", env=True) -> Rollout:
    """Rows of self-play episodes (a row a seat), in a group of all of them."""
    n = len(returns)
    columns = {"game": [game] * n}
    if env:
        columns |= {"env_seat": list(seats), "env_return": list(returns), "env_episode": [i // 2 for i in range(n)]}
    return Rollout(prompts=["p"] * n, completions=["move: 1"] * n, prompt_ids=[[1]] * n, completion_ids=[[5]] * n,
                   columns=columns, group_size=n, rewards={"env": torch.tensor(returns)},
                   advantages=torch.zeros(n))


def test_the_estimator_carries_each_seats_baseline_from_batch_to_batch():
    plugin = make_plugin("spiral", decay=0.5)
    first = Ctx(episodes([1.0, -1.0, 1.0, -1.0], [0, 1, 0, 1]))
    assert plugin.estimate_advantages(first).tolist() == [1.0, -1.0, 0.5, -0.5]
    assert first.reports == [(4, 4)] and first.logged == {"baseline/tictactoe/seat0": 0.75,
                                                          "baseline/tictactoe/seat1": -0.75}
    # A draw then a seat-1 win: each seat against its own baseline (a shared one would be 0 here).
    second = Ctx(episodes([0.0, 0.0, -1.0, 1.0], [0, 1, 0, 1]))
    assert plugin.estimate_advantages(second).tolist() == [-0.75, 0.75, -1.375, 1.375]


def test_the_return_credited_is_the_rows_total_reward():
    plugin = make_plugin("spiral", decay=0.5)
    assert plugin.estimate_advantages(Ctx(episodes([1.0, -1.0], [0, 1]), weight=2.0)).tolist() == [2.0, -2.0]
    assert plugin.baselines.values == {("tictactoe", 0): 1.0, ("tictactoe", 1): -1.0}


def test_evaluation_batches_leave_the_baselines_alone():
    plugin = make_plugin("spiral", decay=0.5)
    plugin.estimate_advantages(Ctx(episodes([1.0, -1.0], [0, 1])))
    evaluated = Ctx(episodes([-1.0, 1.0, -1.0, 1.0], [0, 1, 0, 1]))
    evaluated.training = False
    assert plugin.estimate_advantages(evaluated).tolist() == [-1.5, 1.5, -0.75, 0.75]  # as in training...
    assert plugin.baselines.values == {("tictactoe", 0): 0.5, ("tictactoe", 1): -0.5}  # ...but not kept


def test_games_get_baselines_of_their_own_unless_the_column_is_null():
    per_game, one = make_plugin("spiral", decay=0.5), make_plugin("spiral", decay=0.5, game_column=None)
    for plugin in (per_game, one):
        plugin.estimate_advantages(Ctx(episodes([1.0, -1.0], [0, 1], game="tictactoe")))
    assert per_game.estimate_advantages(Ctx(episodes([1.0, -1.0], [0, 1], game="kuhn_poker"))).tolist() == [1.0, -1.0]
    assert one.estimate_advantages(Ctx(episodes([1.0, -1.0], [0, 1], game="kuhn_poker"))).tolist() == [0.5, -0.5]


def test_a_rollout_the_runner_did_not_play_keeps_grpos_advantages():
    plugin = make_plugin("spiral")
    ctx = Ctx(episodes([1.0, 0.0], [0, 1], env=False))
    assert plugin.estimate_advantages(ctx) is None
    assert ctx.reports == [(0, 2)] and plugin.baselines.values == {}


def test_the_baselines_survive_a_checkpoint(tmp_path):
    plugin, resumed = make_plugin("spiral", decay=0.9), make_plugin("spiral", decay=0.9)
    plugin.estimate_advantages(Ctx(episodes([1.0, -1.0, -1.0, 1.0, 1.0, -1.0], [0, 1, 0, 1, 0, 1])))
    plugin.estimate_advantages(Ctx(episodes([1.0, 0.5], [0, 1], game="kuhn_poker")))
    torch.save(plugin.state_dict(), tmp_path / "state.pt")
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    assert resumed.baselines.values == plugin.baselines.values
    batch = [1.0, -1.0, 0.0, 0.0]
    assert (resumed.estimate_advantages(Ctx(episodes(batch, [0, 1, 0, 1]))).tolist()
            == plugin.estimate_advantages(Ctx(episodes(batch, [0, 1, 0, 1]))).tolist())


def facts(components, columns) -> RunFacts:
    return RunFacts(max_steps=10, group_size=8, groups_per_step=2, columns=columns, builtin_columns=(), chat=False,
                    reference=False, source="games", components=components)


@pytest.mark.parametrize("components, columns, said", [
    (("env",), ("question", "answer", "game"), None),
    (("exact_match",), ("question", "answer", "game"), "spiral: acts on the env plugin's episodes"),
    (("env",), ("question", "answer"), "spiral.game_column: the data has no column 'game'"),
])
def test_a_run_without_episodes_or_games_is_told(components, columns, said):
    notes = make_plugin("spiral").check_run(facts(components, columns))
    assert (notes is None) if said is None else any(note.startswith(said) for note in notes)
