"""Plain GRPO in the environment runner raises ``stackrl/arith-games``' win rate at tic-tac-toe against the scripted
opponent (a random legal move): the baseline the game-playing plugins are measured against.

Each seed trains ``configs/recipes/env-tictactoe-cpu.yaml`` (the ``env`` plugin alone, the policy X in half the
episodes and O in the other half) for ``--steps`` steps and measures the policy before and after on the same
``--episodes`` held-out episodes, sampled at temperature 1 as training samples
(:func:`stackrl.blocks.env.imitation.play`): its legal-move rate and win, draw and loss rates; and the mean seat
return the runner logged (``env/return``) over the first and the last three steps.

    nice python benchmarks/games_grpo.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import stackrl.testing  # noqa: F401  (offline environment, before transformers is imported)
from stackrl.blocks.env.imitation import play
from stackrl.run import build_trainer
from stackrl.testing.benchmark import arguments, one_thread
from stackrl.testing.heldout import recipe_config

RECIPE = Path(__file__).resolve().parents[1] / "configs" / "recipes" / "env-tictactoe-cpu.yaml"
HELD_OUT = 10**9 + 7  # the measured episodes' first seed (the pretraining measured from 10**9)
FIGURES = ("legal", "win", "draw", "loss")


def run(seed: int, steps: int, overrides=(), episodes: int = 200) -> dict[str, float]:
    """One seed's figures before and after ``steps`` steps of the recipe."""
    with one_thread(), tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=out, overrides=overrides)
        trainer = build_trainer(config)
        model, tokenizer = trainer.model, trainer.processing_class
        penalty = trainer.plugins.plugins["env"].config.penalty  # an unparsed turn scores as in training
        before = play(model, tokenizer, "tictactoe", episodes, greedy=False, seed=HELD_OUT, penalty=penalty)
        trainer.train()
        after = play(model, tokenizer, "tictactoe", episodes, greedy=False, seed=HELD_OUT, penalty=penalty)
    returns = [entry["env/return"] for entry in trainer.state.log_history if "env/return" in entry]
    figures = {f"{name}_before": before[name] for name in FIGURES}
    figures |= {f"{name}_after": after[name] for name in FIGURES}
    head, tail = returns[:3], returns[-3:]
    return figures | {"return_first": sum(head) / len(head), "return_last": sum(tail) / len(tail)}


def main(argv=None) -> dict[str, float]:
    parser = arguments(__doc__.split("\n")[0], steps=20)
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args(argv)
    rows = []
    for seed in args.seeds:
        rows.append(run(seed, args.steps, args.overrides, args.episodes))
        print(f"seed {seed}: " + "  ".join(f"{k} {v:.3f}" for k, v in rows[-1].items()), flush=True)
    means = {name: sum(row[name] for row in rows) / len(rows) for name in rows[0]}
    print("mean: " + "  ".join(f"{k} {v:.3f}" for k, v in means.items()), flush=True)
    return means


if __name__ == "__main__":
    main()
