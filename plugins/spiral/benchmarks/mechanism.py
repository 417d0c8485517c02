"""SPIRAL on the built-in games model: self-play at tic-tac-toe credited by role-conditioned advantages (RAE).

``run`` trains ``configs/recipes/spiral-cpu.yaml`` (both seats the live policy, a row each) for a few steps and keeps,
for every step, what the advantage stage saw (each row's seat, game and return, and TRL's GRPO advantages) and
what TRL's loss received (each row's advantage, by its index in the rollout): the mechanism test recomputes the
moving baselines by hand from the returns and compares.

The main trains each method for ``--steps`` steps at each seed and measures the policy's win, draw and loss rates
against the random player before and after (``benchmarks/games_grpo.py``'s ``run``, the same held-out episodes):
``spiral`` (self-play, RAE), ``selfplay`` (self-play, GRPO's group advantages: SPIRAL without RAE) and ``grpo``
(plain GRPO against the random player, the recipe configs/recipes/env-tictactoe-cpu.yaml; recorded in
core/stackrl/assets/arith-games/README.md at 40 steps on 100 held-out episodes: win 0.500 / 0.490 / 0.410, mean
0.467; on these 200, 0.540 / 0.460 / 0.460, the README's table).

    nice -n 15 .venv/bin/python plugins/spiral/benchmarks/mechanism.py --seeds 0 1 2 --steps 40 --methods spiral selfplay
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

import stackrl.testing  # noqa: F401  (offline environment, before transformers is imported)
from stackrl.blocks.env import RETURN_COLUMN, SEAT_COLUMN
from stackrl.run import build_trainer
from stackrl.testing.benchmark import one_thread
from stackrl.testing.heldout import recipe_config
from stackrl.testing.repository import load_script
from stackrl.trainer import ROW_INDEX

ROOT = Path(__file__).resolve().parents[3]
RECIPE = ROOT / "configs" / "recipes" / "spiral-cpu.yaml"
SELF_PLAY = ["env.seats=[policy,policy]", "env.rotate_seats=false"]
METHODS = {  # overrides of benchmarks/games_grpo.py's recipe (env-tictactoe-cpu.yaml: GRPO against the random player)
    "spiral": ["plugins=[env,spiral]", *SELF_PLAY],
    "selfplay": SELF_PLAY,
    "grpo": [],
}


class Step:
    """One step's rollout as the advantage stage saw it, and the advantages TRL's loss received."""

    def __init__(self, seats: list[int], games: list[str], returns: list[float], grpo: torch.Tensor):
        self.seats, self.games, self.returns = seats, games, returns
        self.grpo = grpo  # TRL's GRPO advantages of the rollout, before the estimator
        self.loss: dict[int, float] = {}  # row -> the advantage the loss was given


class Recorder:
    """A run's monitor: at each ``estimate_advantages`` call, the rollout's columns and GRPO's advantages."""

    def __init__(self):
        self.steps: list[Step] = []

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "estimate_advantages":
            return
        rollout = kwargs["ctx"].rollout
        self.steps.append(Step(list(rollout.columns[SEAT_COLUMN]), list(rollout.columns.get("game") or []),
                               [float(r) for r in rollout.columns[RETURN_COLUMN]], rollout.advantages.clone()))

    def watch_loss(self, trainer) -> None:
        """Record each row's advantage from the padded batches TRL's loss receives."""
        compute = trainer._compute_loss

        def recording(model, inputs):
            for row, advantage in zip(inputs[ROW_INDEX].tolist(), inputs["advantages"].tolist()):
                self.steps[-1].loss[row] = advantage
            return compute(model, inputs)

        trainer._compute_loss = recording


def run(seed: int = 0, steps: int = 3, rows: int = 16, overrides=()) -> tuple[list[Step], object]:
    """``steps`` steps of the CPU recipe at ``rows`` rows a step (groups of 8: four episodes, two seats each):
    the recorded steps and the plugin as the run left it."""
    with one_thread(), tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=out,
                               overrides=[f"trainer.per_device_train_batch_size={rows}", *overrides])
        recorder = Recorder()
        trainer = build_trainer(config, monitor=recorder)
        recorder.watch_loss(trainer)
        trainer.train()
    return recorder.steps, trainer.plugins.plugins["spiral"]


def win_rates(method: str, seed: int, steps: int, episodes: int, overrides=()) -> dict[str, float]:
    games = load_script(ROOT / "benchmarks" / "games_grpo.py")
    return games.run(seed, steps, [*METHODS[method], *overrides], episodes)


def main():
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.splitlines()[0], steps=40, methods=tuple(METHODS))
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args()
    compare(args, args.methods, lambda method, seed, folder: win_rates(method, seed, args.steps, args.episodes,
                                                                      args.overrides),
            figures=("legal_after", "win_before", "win_after", "draw_after", "loss_after", "return_last"))


if __name__ == "__main__":
    main()
