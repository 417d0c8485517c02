"""The built-in environments' rules and the turn-credit helpers, on hand-played games and hand-computed values."""

from __future__ import annotations

import pytest

from stackrl.blocks.env import discounted_returns, parse_action, turn_leave_one_out
from stackrl.blocks.env.calculator import Calculator
from stackrl.blocks.env.games import Bandit, KuhnPoker, Negotiation, PrisonersDilemma, TicTacToe
from stackrl.blocks.env.protocol import ToolCall


def play(game, actions, seed=0):
    game.reset(seed=seed)
    return [game.step(a) for a in actions]


def test_tictactoe_wins_draws_and_illegal_moves():
    *_, (obs, rewards, done, info) = play(TicTacToe(), ["1", "4", "2", "5", "3"])
    assert done and rewards == [1.0, -1.0] and info == {"winner": 0}
    *_, (_, rewards, done, _) = play(TicTacToe(), ["1", "2", "3", "5", "4", "6", "8", "7", "9"])
    assert done and rewards == [0.0, 0.0]
    (_, rewards, done, info), = play(TicTacToe(), ["0"])
    assert done and rewards == [-1.0, 1.0] and info == {"illegal": "0"}
    game = TicTacToe()
    game.reset()
    assert game.step("5")[0] == "123\n4X6\n789\nyou: O" and game.turn == 1


@pytest.mark.parametrize("cards,actions,rewards", [
    ("KJ", ["check", "check"], [1.0, -1.0]), ("JK", ["bet", "call"], [-2.0, 2.0]), ("JK", ["bet", "fold"], [1.0, -1.0]),
    ("QK", ["check", "bet", "fold"], [-1.0, 1.0]), ("KQ", ["check", "bet", "call"], [2.0, -2.0]),
])
def test_kuhn_poker_pays_the_pot(cards, actions, rewards):
    game = KuhnPoker()
    game.reset()
    game.cards = list(cards)
    for action in actions[:-1]:
        assert game.step(action)[2] is False
    assert game.step(actions[-1])[1:3] == (rewards, True)


def test_kuhn_poker_deals_from_the_seed():
    deal = lambda seed: (game := KuhnPoker()).reset(seed=seed) and game.cards  # noqa: E731
    assert deal(3) == deal(3) and len({tuple(deal(s)) for s in range(20)}) > 1


def test_prisoners_dilemma_pays_each_round_after_both_moved():
    outcomes = play(PrisonersDilemma(rounds=2), ["C", "D", "D", "D"])
    assert [o[1] for o in outcomes] == [[0.0, 0.0], [0.0, 5.0], [0.0, 0.0], [1.0, 1.0]]
    assert outcomes[-1][2] and not outcomes[1][2]
    assert "you-them: CD" in outcomes[1][0] and outcomes[0][0].startswith("round 1 of 2")  # seat 1 sees no move of round 1


def test_bandit_pays_by_the_seeded_odds():
    a, b = Bandit(arms=2, pulls=50), Bandit(arms=2, pulls=50)
    paid = [r for _, r, _, _ in play(a, ["1"] * 50, seed=7)]
    assert paid == [r for _, r, _, _ in play(b, ["1"] * 50, seed=7)]
    assert abs(sum(paid) / 50 - a.odds[0]) < 0.25 and play(Bandit(pulls=1), ["9"])[0][1:] == (0.0, True, {"invalid": "9"})


def test_negotiation_pays_each_seat_its_share():
    game = Negotiation()
    game.reset(seed=1)
    game.items, game.values = [2, 1, 3], [[1, 2, 0], [0, 1, 2]]
    assert game.step("propose 2 1 0")[2] is False
    assert "offered you: 0 0 3" in game.render()
    assert game.step("accept")[1:3] == ([4.0, 6.0], True)
    game.reset(seed=1)
    assert game.step("propose 9 9 9")[1:3] == ([0.0, 0.0], True)


def test_calculator_evaluates_and_shows_mistakes():
    calc = Calculator()
    calc.reset(question="q")
    assert calc.calc("23*7") == "161" and calc.calc("(1+2)/4") == "0.75" and calc.calc("2**3").startswith("error")
    assert calc.calc("1/0").startswith("error") and calc.calls == 4


@pytest.mark.parametrize("grammar,text,action", [
    ("move", "I go move: 4\nthen", "4"), ("move", "move:", None), ("tag", "so <calc>2+3</calc>", ToolCall("calc", ("2+3",))),
    ("tool_call", '<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>', ToolCall("f", (), {"x": 1})),
    ("tool_call", "<tool_call>{oops}</tool_call>", None), ("text", "  C \n", "C"), (r"play (\w)", "I play D", "D"),
])
def test_grammars_read_the_first_action(grammar, text, action):
    assert parse_action(grammar, text) == action


def test_discounted_returns_by_hand():
    assert discounted_returns([[1.0, 0.0, 2.0], []], 0.5) == [[1.5, 1.0, 2.0], []]


def test_turn_leave_one_out_compares_each_turn_with_the_same_turn_of_the_others():
    values = [[1.0, 2.0], [3.0], [2.0, 0.0, 5.0], [0.0]]
    assert turn_leave_one_out(values, 2) == [[-2.0, 0.0], [2.0], [2.0, 0.0, 0.0], [-2.0]]


def test_a_game_may_start_without_a_first_observation():
    from stackrl.blocks.env.protocol import Episode

    class Silent:
        def reset(self, **row):
            return None

        def step(self, action):
            return "ok", 1.0, True, {}

    assert Episode(Silent(), 1, 0).reset({"prompt": "Q"}) is None
