"""The built-in task ``games`` (``data.source: games``, ``data.options: {game: NAME}``): the prompt of each of the
environment runner's built-in games (:mod:`stackrl.blocks.env.games`), the one ``stackrl/arith-games`` learned to
play from (:mod:`stackrl.blocks.env.imitation`). A row is only the prompt: the ``env`` plugin plays it as episodes
and the environment rewards them.
"""

from __future__ import annotations

__all__ = ["GAMES", "PROMPTS", "make_dataset"]

PROMPTS = {
    "tictactoe": "Tic-tac-toe. Play with move: N.",
    "kuhn_poker": "Kuhn poker. Play with move: ACTION.",
    "prisoners_dilemma": "Prisoners dilemma. Play with move: C or move: D.",
    "bandit": "Bandit. Pull an arm with move: N.",
    "negotiation": "Negotiation. Play with move: propose A B C or move: accept.",
}
GAMES = tuple(PROMPTS)


def make_dataset(split: str = "train", size: int = 256, seed: int = 0, game: str = "tictactoe"):
    """``size`` rows of ``game``'s prompt (the split and seed change nothing: the runner seeds the episodes).
    Columns question, answer (none: the environment rewards), game."""
    from datasets import Dataset

    if game not in PROMPTS:
        raise ValueError(f"game '{game}' is none of {', '.join(GAMES)}")
    return Dataset.from_dict({"question": [PROMPTS[game]] * size, "answer": [None] * size, "game": [game] * size})
