"""The optional adapters (stackrl.blocks.env.adapters): OpenSpiel's and TextArena's games played to the end through
the real runner with a scripted policy, seats and rewards mapped, legal actions for a scripted seat, replay from the
seed, and a ConfigError naming the key where the package or the game is missing. The games need the ``envs`` extra;
the refusals are tested everywhere."""

from __future__ import annotations

import random
import sys

import pytest

from stackrl import ConfigError
from stackrl.blocks.env import (
    END_COLUMN, INFO_COLUMN, MOVES_COLUMN, RETURN_COLUMN, SEED_COLUMN, TURN_REWARDS_COLUMN, EnvSettings, Runner,
    replay,
)
from stackrl.testing.scripted import ScriptedPlayers

LONG = {"max_turns": 12, "max_tokens": 4000, "turn_tokens": 24, "observation_tokens": None}


def first_legal(model, text):
    """A policy that plays the first action of the last ``legal:`` line it was shown."""
    return "move: " + text.rsplit("legal: ", 1)[1].splitlines()[0].split(" | ")[0]


# -- OpenSpiel --------------------------------------------------------------------------------------------------------

def test_an_openspiel_game_is_played_to_the_end_with_seats_and_rewards_mapped():
    pytest.importorskip("pyspiel")
    players = ScriptedPlayers(first_legal)
    samples = Runner(EnvSettings(environment="openspiel:tic_tac_toe", **LONG)).run(["t"] * 2, players.context(group_size=2))
    moves = ["x(0,0)", "o(0,1)", "x(0,2)", "o(1,0)", "x(1,1)", "o(1,2)", "x(2,0)"]  # x wins on the anti-diagonal
    assert samples.columns[MOVES_COLUMN][0] == [[i % 2, m] for i, m in enumerate(moves)]
    assert samples.columns[RETURN_COLUMN] == [1.0, -1.0] and samples.columns[END_COLUMN] == ["done", "done"]
    assert samples.columns[TURN_REWARDS_COLUMN] == [[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, -1.0]]
    decode = players.tokenizer.decode
    assert decode(samples.prompt_ids[0]) == "t\n...\n...\n...\nlegal: " + " | ".join(
        f"x({r},{c})" for r in range(3) for c in range(3)) + "\n"
    assert decode(samples.prompt_ids[1]).startswith("t\nx..\n...\n...\nlegal: o(0,1) | ")  # seat 1 starts at its move


def test_a_scripted_seat_plays_the_legal_actions_of_its_own_seat():
    pytest.importorskip("pyspiel")
    players = ScriptedPlayers(first_legal)
    samples = Runner(EnvSettings(environment="openspiel:tic_tac_toe", seats=["policy", "scripted"], **LONG)).run(
        ["t"] * 3, players.context(group_size=3))
    for moves, end in zip(samples.columns[MOVES_COLUMN], samples.columns[END_COLUMN]):
        assert end == "done" and [seat for seat, _ in moves] == [i % 2 for i in range(len(moves))]
        assert all(move.startswith("o(") for seat, move in moves if seat == 1)  # the scripted seat's own actions
        assert len({move[1:] for _, move in moves}) == len(moves)  # every cell once: each action was legal
    from stackrl.blocks.env.adapters import adapter_class

    game = adapter_class("openspiel:tic_tac_toe")()
    game.reset(seed=0)
    game.step("x(1,1)")
    assert game.turn == 1 and "o(1,1)" not in game.legal_actions() and len(game.legal_actions()) == 8


def test_chance_is_drawn_from_the_episode_seed_and_replays():
    pytest.importorskip("pyspiel")
    players = ScriptedPlayers(lambda model, text: "move: Bet" if "Bet" in text.rsplit("legal:", 1)[1] else "move: Call")
    settings = EnvSettings(environment="stackrl.blocks.env.adapters:OpenSpielGame", kwargs={"game": "kuhn_poker"}, **LONG)
    samples = Runner(settings).run(["k"] * 4, players.context(group_size=2, step=1))
    returns = samples.columns[RETURN_COLUMN]
    assert all(returns[i] == -returns[i + 1] and abs(returns[i]) == 2.0 for i in (0, 2))  # bet, call: 2 chips
    for row in (0, 2):
        outcomes = replay(settings, {"prompt": "k"}, samples.columns[SEED_COLUMN][row], samples.columns[MOVES_COLUMN][row])
        assert outcomes[-1].done and outcomes[-1].rewards == [returns[row], returns[row + 1]]
    again = Runner(settings).run(["k"] * 4, ScriptedPlayers(players.play).context(group_size=2, step=1))
    assert again.columns == samples.columns


@pytest.mark.parametrize("illegal,end,returns", [("lose", "done", [-1.0, 1.0]), ("retry", "turns", [0.0, 0.0])])
def test_an_illegal_action_loses_or_is_shown_back(illegal, end, returns):
    pytest.importorskip("pyspiel")
    players = ScriptedPlayers(lambda model, text: "move: x(9,9)")
    samples = Runner(EnvSettings(environment="openspiel:tic_tac_toe", kwargs={"illegal": illegal}, seats=["policy", "scripted"],
                                 **{**LONG, "max_turns": 2})).run(["t"], players.context(group_size=1))
    assert samples.columns[END_COLUMN] == [end] and samples.columns[RETURN_COLUMN] == returns[:1]
    assert samples.columns[INFO_COLUMN][0][0] == {"illegal": "x(9,9)"}
    from stackrl.blocks.env.adapters import adapter_class

    game = adapter_class("openspiel:tic_tac_toe")(illegal=illegal)
    game.reset(seed=0)
    game.step("x(0,0)")
    assert game.step("o(0,0)")[1:3] == (returns[::-1] if illegal == "lose" else returns, illegal == "lose")
    if illegal == "retry":
        assert samples.columns[MOVES_COLUMN][0] == [[0, "x(9,9)"], [0, "x(9,9)"]]
        assert "illegal action: x(9,9)\n..." in players.tokenizer.decode(samples.completion_ids[0])


# -- TextArena --------------------------------------------------------------------------------------------------------

def cells(seat0: list[str], seat1: list[str]):
    queues = {"Player 0": list(seat0), "Player 1": list(seat1)}

    def play(model, text):
        return "move: " + queues["Player 0" if "You are Player 0" in text else "Player 1"].pop(0)

    return play


def test_a_textarena_game_is_played_to_the_end_with_seats_and_rewards_mapped():
    pytest.importorskip("textarena")
    outer = random.getstate()
    players = ScriptedPlayers(cells(["0", "1", "2"], ["4", "5"]))  # seat 0 takes the top row
    samples = Runner(EnvSettings(environment="textarena:TicTacToe-v0", **LONG)).run(["t"] * 2, players.context(group_size=2))
    assert samples.columns[MOVES_COLUMN][0] == [[0, "0"], [1, "4"], [0, "1"], [1, "5"], [0, "2"]]
    assert samples.columns[RETURN_COLUMN] == [1.0, -1.0] and samples.columns[END_COLUMN] == ["done", "done"]
    assert samples.columns[TURN_REWARDS_COLUMN] == [[0.0, 0.0, 1.0], [0.0, -1.0]]
    seat1 = players.tokenizer.decode(samples.prompt_ids[1])
    assert "[GAME] You are Player 1 in Tic Tac Toe." in seat1 and "[Player 0] [0]" in seat1  # the action wrapper's [0]
    seat0 = players.tokenizer.decode(samples.completion_ids[0])
    assert "[Player 1] [4]" in seat0 and "[Player 0]" not in seat0  # only what it has not seen: not its own actions
    assert random.getstate() == outer  # TextArena's seeding of the global random is kept to each episode


def test_textarena_episodes_played_side_by_side_replay_from_their_seeds():
    pytest.importorskip("textarena")
    settings = EnvSettings(environment="textarena:KuhnPoker-v0", **{**LONG, "max_turns": 20})
    players = ScriptedPlayers(lambda model, text: "move: check")
    samples = Runner(settings).run(["k"] * 4, players.context(group_size=2, step=2))
    for row in (0, 2):
        outcomes = replay(settings, {"prompt": "k"}, samples.columns[SEED_COLUMN][row], samples.columns[MOVES_COLUMN][row])
        assert outcomes[-1].done and outcomes[-1].rewards == samples.columns[RETURN_COLUMN][row : row + 2]
    again = Runner(settings).run(["k"] * 4, ScriptedPlayers(players.play).context(group_size=2, step=2))
    assert again.columns == samples.columns and again.completion_ids == samples.completion_ids


# -- refusals ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("environment,module", [("textarena:TicTacToe-v0", "textarena"), ("openspiel:tic_tac_toe", "pyspiel")])
def test_a_missing_package_is_a_config_error_naming_the_key(environment, module, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as where it is not installed
    with pytest.raises(ConfigError, match=rf"env.environment: .*needs the '{module}' package.*stackrl\[envs\]"):
        Runner(EnvSettings(environment=environment))


@pytest.mark.parametrize("module,settings,message", [
    ("pyspiel", {"environment": "openspiel:tic_tac_tow"}, "env.kwargs.game: OpenSpiel has no game 'tic_tac_tow'"),
    ("pyspiel", {"environment": "openspiel:matrix_pd"}, "env.kwargs.game: matrix_pd is a simultaneous-move game"),
    ("pyspiel", {"environment": "openspiel:tic_tac_toe", "kwargs": {"illegal": "ignore"}}, "env.kwargs.illegal"),
    ("pyspiel", {"environment": "openspiel:", "kwargs": {}}, "env.environment: 'openspiel:' names no game"),
    ("pyspiel", {"environment": "openspiel:kuhn_poker", "kwargs": {"params": {"nosuch": 1}}}, "env.kwargs.params"),
    ("textarena", {"environment": "textarena:TicTacTo-v0"}, "env.kwargs.game: textarena has no game 'TicTacTo-v0'"),
    ("textarena", {"environment": "textarena:TicTacToe-v0", "kwargs": {"num_players": 3}},
     "env.kwargs.num_players: textarena's TicTacToe-v0 cannot be played by 3 player"),
    ("textarena", {"environment": "stackrl.blocks.env.adapters:TextArenaGame"}, "env.kwargs.game: the textarena adapter needs"),
])
def test_a_missing_game_or_a_bad_setting_is_a_config_error_naming_the_key(module, settings, message):
    pytest.importorskip(module)
    with pytest.raises(ConfigError, match=message):
        Runner(EnvSettings(**settings))
