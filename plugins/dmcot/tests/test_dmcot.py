"""dmcot: the shaping (bonus for untried valid actions, penalty for invalid ones) and the bandit figures computed by
hand on written episodes, the reward hook on a hand-built rollout of the runner's columns, and the conformance suite
stacked on the env plugin (its default, the calculator on the built-in task)."""

import pytest

from stackrl.blocks.env import INFO_COLUMN, MOVES_COLUMN, SEAT_COLUMN, SEED_COLUMN, parse_action
from stackrl.errors import PluginError
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_dmcot.regret import bandit_figures, bandit_odds, pulls_of
from stackrl_dmcot.shaping import Action, row_actions, shaped_reward, untried


class TestConformance(PluginConformance):
    plugin_name = "dmcot"
    stacked_with = ("env",)  # the env plugin's default: the calculator on the built-in task
    refused_settings = [
        ({"bonus": -1.0}, "0 or more"),
        ({"invalid_penalty": 5.0}, "0 or less"),
        ({"arms": 1}, "at least 2"),
    ]


def pulls(*arms):
    """A bandit row's infos: an int pulls that arm, "x" is a pull of no arm, "?" a turn with no action."""
    return [{"unparsed": True} if a == "?" else {"invalid": a} if a == "x" else {"arm": a, "paid": 0.0} for a in arms]


def test_a_rationale_before_the_move_is_read_as_the_move():
    # the runner's move grammar: the chain of thought the paper's policy writes before acting leaves the action
    assert parse_action("move", "arm 2 paid 2 of 2, arm 3 untried.\nmove: 3\n") == "3"
    assert parse_action("move", "arm 3 looks best, so\n") is None  # no move: an unread turn, dmcot's penalty


def test_a_rows_actions_pair_its_seats_moves_with_its_parsed_turns():
    moves = [[0, "5"], [1, "1"], [0, "5"], [1, "2"], [0, "9"]]
    infos = [{}, {"unparsed": True}, {"illegal": "5"}]  # seat 0: 5, a turn with no move, 5 again (illegal)
    actions, unparsed = row_actions(0, moves, infos)
    assert actions == [Action("5", True), Action("5", False)] and unparsed == 1  # "9" has no info: never played
    # a last turn the budget cut leaves an info but no move
    assert row_actions(1, moves, [{}, {}, {}]) == ([Action("1", True), Action("2", True)], 0)
    tool = [[0, ["calc", ["2*3"], {}]]]
    assert row_actions(0, tool, [{}])[0] == [Action('["calc", ["2*3"], {}]', True)]


def test_the_bonus_goes_to_untried_valid_actions_only():
    a = [Action("2", True), Action("2", True), Action("3", False), Action("3", True), Action("1", True),
         Action("3", True)]
    assert untried(a) == [True, False, False, True, True, False]  # a refused "3" does not mark 3 as tried
    # 3 untried actions at 0.5, 1 refused and 2 unparsed turns at -2
    assert shaped_reward(a, 2, bonus=0.5, invalid_penalty=-2.0) == pytest.approx(3 * 0.5 - 3 * 2.0)
    assert shaped_reward(a, 0, bonus=0.0, invalid_penalty=0.0) == 0.0


def test_the_bandit_figures_by_hand():
    odds = [0.2, 0.9, 0.5]
    figures = bandit_figures([2, 1, None, 3, 2], odds)
    assert figures.regret == pytest.approx(0.0 + 0.7 + 0.9 + 0.4 + 0.0)  # a pull of no arm pays nothing
    assert figures.optimal == pytest.approx(2 / 5) and figures.coverage == pytest.approx(3 / 3)
    assert bandit_figures([1, 1], [0.6, 0.1]).regret == 0.0 and bandit_figures([3], odds).coverage == pytest.approx(1 / 3)
    # the odds are the environment's own, as the runner seeds it
    from stackrl.blocks.env.games import Bandit
    env = Bandit(arms=4)
    env.reset(seed=11)
    assert bandit_odds(11, 4) == env.odds
    assert pulls_of(pulls(1, "?", "x", 3)) == [1, None, 3] and pulls_of([{}, {"winner": 0}]) is None


class Rows(list):
    """A rollout of the runner's columns alone."""

    def __init__(self, columns, rows):
        super().__init__(range(rows))
        self.columns = columns


class Ctx:
    """The reward stage's context: the rollout, what is logged and what ctx.acted counted."""

    def __init__(self, columns, rows):
        self.rollout = Rows(columns, rows)
        self.logged, self.counts = {}, None

    def log(self, name, value):
        self.logged[name] = value

    def acted(self, n, of, hint=None):
        self.counts = (n, of)


def test_the_reward_hook_shapes_each_episode_row_and_logs_the_bandit_figures():
    seed = 5
    odds = bandit_odds(seed, 3)
    best = odds.index(max(odds)) + 1
    other = next(arm for arm in (1, 2, 3) if arm != best)
    rows = [  # the best arm twice then another; a pull of no arm, a turn with no action, the best arm
        ([[0, str(best)], [0, str(best)], [0, str(other)]], pulls(best, best, other)),
        ([[0, "7"], [0, str(best)]], pulls("x", "?", best)),
    ]
    columns = {SEAT_COLUMN: [0, 0], MOVES_COLUMN: [m for m, _ in rows], INFO_COLUMN: [i for _, i in rows],
               SEED_COLUMN: [seed, seed]}
    ctx = Ctx(columns, 2)
    plugin = make_plugin("dmcot", bonus=1.0, invalid_penalty=-5.0)
    assert plugin.reward(ctx) == [2.0, 1.0 - 10.0]
    assert ctx.counts == (2, 2)
    regret = [odds[best - 1] - odds[other - 1], odds[best - 1]]
    assert ctx.logged["regret"] == pytest.approx(sum(regret) / 2)
    assert ctx.logged["optimal"] == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert ctx.logged["coverage"] == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert ctx.logged["untried"] == 1.5 and ctx.logged["invalid"] == pytest.approx(2 / 6)
    # rows another plugin generated are not scored
    ctx = Ctx({}, 3)
    assert plugin.reward(ctx) == [None] * 3 and ctx.counts == (0, 3)
    # a pull of an arm past dmcot.arms names the setting
    columns[INFO_COLUMN] = [pulls(4), pulls(1)]
    with pytest.raises(PluginError, match="dmcot.arms"):
        make_plugin("dmcot", arms=3).reward(Ctx(columns, 2))
