"""The shipped ``stackrl/arith-games``: made by the current script from arith-tiny, with the figures its README
states, moving legally most of the time in every game and winning no more than chance play does: room for RL."""

from __future__ import annotations

import pytest

from stackrl.blocks.env.pretrain_games import RECIPE
from stackrl.tasks import BUILTIN_MODELS, arith_games_path, arith_tiny_path
from stackrl.tasks.games import GAMES
from stackrl.testing.shipped import assert_made_by, readme_rows, record

FIGURES = record(arith_games_path())["summary"]["games"]
TWO_SEATS = [game for game in GAMES if game != "bandit"]
MODES = ("greedy", "sampled")


def test_the_shipped_model_is_what_the_current_script_makes_from_arith_tiny():
    assert BUILTIN_MODELS["stackrl/arith-games"]() == arith_games_path()
    assert_made_by(arith_games_path(), "stackrl.blocks.env.pretrain_games", RECIPE, arith_tiny_path())


def test_the_readme_states_the_recorded_figures():
    for game in GAMES:
        recorded = [FIGURES[game][mode][name] for mode in MODES for name in ("legal", "return")]
        assert readme_rows(arith_games_path(), game)[0] == [round(v, 2) for v in recorded], game
    for game in TWO_SEATS:
        recorded = [FIGURES[game][mode][name] for mode in MODES for name in ("win", "draw", "loss")]
        assert readme_rows(arith_games_path(), game)[1] == [round(v, 2) for v in recorded], game


def test_moves_are_legal_more_often_than_not_with_room_to_win():
    """Legal moves more often than not greedy in every game (the README's figures: 0.58 to 1.00), at least 0.4 of
    the time sampled, and tic-tac-toe won rarely: a legal-move rate and a win rate RL can raise."""
    for game in GAMES:
        assert FIGURES[game]["greedy"]["legal"] >= 0.55 and FIGURES[game]["sampled"]["legal"] >= 0.4, game
    assert FIGURES["bandit"]["greedy"]["legal"] >= 0.95 and FIGURES["prisoners_dilemma"]["greedy"]["legal"] >= 0.95
    assert FIGURES["tictactoe"]["sampled"]["win"] < 0.5 and FIGURES["tictactoe"]["sampled"]["legal"] < 1.0


@pytest.fixture(scope="module")
def measured():
    """Each game's figures on 8 held-out episodes (a small sample of the README's 100), greedy."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from stackrl.blocks.env.imitation import play

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = AutoModelForCausalLM.from_pretrained(arith_games_path())
        tokenizer = AutoTokenizer.from_pretrained(arith_games_path())
        return {game: play(model, tokenizer, game, 8, seed=10**9) for game in GAMES}
    finally:
        torch.set_num_threads(threads)


def test_a_small_held_out_sample_plays_legally(measured):
    for game in GAMES:  # the same seeds as the README's first 8 episodes; widened for a sample this small
        assert measured[game]["legal"] >= FIGURES[game]["greedy"]["legal"] - 0.3, game
