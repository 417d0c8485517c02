"""dmcot on the built-in bandit against plain GRPO in the environment runner, at equal steps.

Each seed trains configs/recipes/dmcot-cpu.yaml (stackrl/arith-games on the 3-armed, 5-pull bandit) twice: with the
paper's shaping (`dmcot`: +1 for each arm not pulled before in the episode, -5 for a pull of no arm or a turn with
no move) and as plain GRPO on the environment's return (`grpo`: the same recipe with dmcot.bonus=0 and
dmcot.invalid_penalty=0, so dmcot only measures). The figures are the paper's, measured on the training episodes
(sampled at temperature 1, 64 a step) as dmcot logs them: cumulative expected regret of an episode (`regret`), the
share of pulls on the best arm (`optimal`), the share of arms pulled (`coverage`) and the environment's return
(`return`), each the mean of the first three steps (`_first`) and of the last five (`_last`).

    nice -n 10 .venv/bin/python plugins/dmcot/benchmarks/mechanism.py --seeds 0 1 2 --steps 40
"""

from __future__ import annotations

from pathlib import Path

import stackrl.testing  # noqa: F401  (offline environment, before transformers is imported)
from stackrl.run import build_trainer
from stackrl.testing.benchmark import arguments, compare, one_thread
from stackrl.testing.heldout import recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "dmcot-cpu.yaml"
PLAIN = ("dmcot.bonus=0.0", "dmcot.invalid_penalty=0.0")  # plain GRPO on the return; dmcot only measures
LOGGED = {"regret": "dmcot/regret", "optimal": "dmcot/optimal", "coverage": "dmcot/coverage", "return": "env/return"}
FIGURES = [f"{name}_{when}" for name in LOGGED for when in ("first", "last")]


def run(seed: int, steps: int, method: str = "dmcot", overrides=(), folder=None, monitor=None, rows: int | None = None):
    """One run's figures (``FIGURES``) and the trainer; ``rows`` shrinks a step to that many rows (a test's run)."""
    extra = [*(PLAIN if method == "grpo" else ()), *overrides]
    if rows is not None:
        extra.append(f"trainer.per_device_train_batch_size={rows}")
    with one_thread():
        config = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps,
                               output_dir=str(Path(folder or ".") / f"{method}-{seed}"), overrides=extra)
        trainer = build_trainer(config, monitor=monitor) if monitor else build_trainer(config)
        trainer.train()
    history = [entry for entry in trainer.state.log_history if "dmcot/regret" in entry]
    figures = {}
    for name, key in LOGGED.items():
        values = [entry[key] for entry in history]
        head, tail = values[:3], values[-5:]
        figures[f"{name}_first"] = sum(head) / len(head) if head else None
        figures[f"{name}_last"] = sum(tail) / len(tail) if tail else None
    return figures, trainer


def main(argv=None):
    args = arguments(__doc__.split("\n")[0], steps=40, methods=("dmcot", "grpo")).parse_args(argv)
    return compare(args, args.methods,
                   lambda method, seed, folder: run(seed, args.steps, method, args.overrides, folder)[0],
                   figures=FIGURES)


if __name__ == "__main__":
    main()
