"""The formats ``stackrl/arith-games`` learned (stackrl.blocks.env.imitation, stackrl.tasks.games): its demonstrations
are the runner's own rows, its measurement lays contexts out as the runner does and counts legal moves and outcomes
as the games end them, and the built-in task ``games`` gives each game's prompt."""

from __future__ import annotations

import pytest

from stackrl.blocks.env import EnvSettings, Runner, turn_examples
from stackrl.blocks.env.imitation import demo_action, demo_examples, play
from stackrl.blocks.env.runner import episode_seed
from stackrl.tasks import TASKS
from stackrl.tasks.games import GAMES, PROMPTS
from stackrl.testing.scripted import CharTokenizer, PaddedCharTokenizer, ScriptedModel, ScriptedPlayers

EOS = CharTokenizer.eos_token_id


def first_legal(env, rng):
    return env.legal_actions()[0]


def first_listed(model, text):
    """The runner's players as :func:`first_legal`, read from the seat's last observation."""
    last = text.rstrip("\n").split("\n")
    if last[-1].startswith("you: "):  # tic-tac-toe: the first free cell of the board above
        return "move: " + next(c for c in "".join(last[-4:-1]) if c.isdigit())
    if last[-1].startswith("actions: "):  # Kuhn poker, the prisoner's dilemma
        return "move: " + last[-1].split()[1]
    return "move: 1"  # the bandit's first arm


@pytest.mark.parametrize("game", ["tictactoe", "kuhn_poker", "prisoners_dilemma", "bandit"])
def test_demonstrations_are_the_runners_rows_turn_by_turn(game):
    players = ScriptedPlayers(first_listed)
    seats = 1 if game == "bandit" else 2
    settings = EnvSettings(environment=game, max_turns=20, max_tokens=1000, turn_tokens=32)
    samples = Runner(settings).run([PROMPTS[game]] * seats, players.context(group_size=seats))
    assert samples.columns["env_end"][0] == "done"
    runner_pairs = [pair for row in range(seats) for pair in turn_examples(
        samples.prompt_ids[row], samples.completion_ids[row], samples.columns["segments"][row], EOS)]
    demo = demo_examples(CharTokenizer(), game, episode_seed(0, 0, 0), choose=first_legal)
    assert demo == runner_pairs
    context, action = demo[0]
    assert CharTokenizer().decode(context).startswith(PROMPTS[game] + "\n") and action[-1] == EOS


def test_demonstrated_moves_are_legal_and_the_negotiation_accepts_or_proposes():
    import random

    from stackrl.blocks.env.games import Negotiation, TicTacToe

    rng = random.Random(0)
    game = TicTacToe()
    game.reset()
    assert all(demo_action(game, rng) in game.legal_actions() for _ in range(50))
    deal = Negotiation()
    deal.reset(seed=3)
    deal.step("propose 1 0 0")
    moves = [demo_action(deal, rng) for _ in range(200)]
    assert 60 < moves.count("accept") < 140 and all(m == "accept" or m.startswith("propose ") for m in moves)
    pairs = demo_examples(CharTokenizer(), "negotiation", 5)
    assert all(CharTokenizer().decode(a[:-1]).startswith(("move: propose ", "move: accept")) for _, a in pairs)


def test_play_lays_contexts_out_as_the_runner_and_counts_legal_moves():
    model = ScriptedModel(lambda text: first_listed(None, text))
    figures = play(model, PaddedCharTokenizer(), "tictactoe", 4)
    assert figures["legal"] == 1.0 and figures["win"] + figures["draw"] + figures["loss"] == 1.0
    assert model.seen[0] == "Tic-tac-toe. Play with move: N.\n123\n456\n789\nyou: X\n"  # the runner's first prompt
    later = next(c for c in model.seen if c.startswith(model.seen[0]) and c != model.seen[0])
    assert later.startswith(model.seen[0] + "move: 1\nX")  # the action, its eos held back, then the board seen next
    assert chr(EOS) not in later and later.endswith("you: X\n")


def test_an_illegal_move_loses_and_an_unparsed_turn_ends_the_episode():
    illegal = play(ScriptedModel(lambda text: "move: 0"), PaddedCharTokenizer(), "tictactoe", 4)
    assert illegal == {"legal": 0.0, "return": -1.0, "win": 0.0, "draw": 0.0, "loss": 1.0}
    unparsed = play(ScriptedModel(lambda text: "five"), PaddedCharTokenizer(), "kuhn_poker", 4)
    assert unparsed["legal"] == 0.0 and unparsed["draw"] == 1.0  # the runner's on_unparsed end: no reward
    penalised = play(ScriptedModel(lambda text: "five"), PaddedCharTokenizer(), "kuhn_poker", 4, penalty=-1.0)
    assert penalised["return"] == -1.0 and penalised["loss"] == 1.0  # with env.penalty -1
    bandit = play(ScriptedModel(lambda text: "move: 2"), PaddedCharTokenizer(), "bandit", 3)
    assert bandit["legal"] == 1.0 and "win" not in bandit and 0.0 <= bandit["return"] <= 5.0


def test_the_games_task_gives_each_games_prompt():
    rows = TASKS["games"](size=3, game="negotiation")
    assert rows["question"] == [PROMPTS["negotiation"]] * 3 and rows["game"] == ["negotiation"] * 3
    assert set(GAMES) == {"tictactoe", "kuhn_poker", "prisoners_dilemma", "bandit", "negotiation"}
    with pytest.raises(ValueError, match="chess"):
        TASKS["games"](game="chess")

