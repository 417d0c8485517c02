"""RLoop against plain GRPO on the built-in task: held-out pass@1 and pass@8 after each of three iterations, and
pass@1 on the two easiest categories (what forgetting would lower).

Trains the CPU recipe (configs/recipes/rloop-cpu.yaml) and the same recipe without the plugin for the same steps
and seeds, evaluating both at every iteration's end (for RLoop, after its fine-tuning phase).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/rloop/benchmarks/mechanism.py --seeds 0 1 2
"""

from __future__ import annotations

from pathlib import Path

import yaml
from transformers import TrainerCallback

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "rloop-cpu.yaml"
EASY = ("2 steps, 1-digit", "3 steps, 1-digit")


class _EvaluateEvery(TrainerCallback):
    """Held-out figures at every iteration's end, after the plugin's post_step (so, for RLoop, after its phase)."""

    def __init__(self, config, every: int):
        self.config, self.every, self.trainer, self.figures = config, every, None, []

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % self.every == 0:
            from stackrl.evaluation import evaluate

            trainer = self.trainer
            result = evaluate(trainer.model, trainer.processing_class, self.config, args.max_completion_length)
            easy = [result["by_category"][c] for c in EASY if c in result["by_category"]]
            k = self.config.host.eval.samples
            self.figures.append({"pass@1": result["pass@1"], f"pass@{k}": result[f"pass@{k}"],
                                 "easy pass@1": sum(easy) / len(easy)})


def run(method: str, seed: int, folder: Path, overrides=()) -> list[dict[str, float]]:
    """Train the recipe (``method`` rloop) or plain GRPO; the held-out figures after each iteration."""
    from stackrl.run import build_trainer
    from stackrl.testing.heldout import recipe_config

    tree = yaml.safe_load(RECIPE.read_text())
    every, steps = tree["rloop"]["iteration_steps"], tree["trainer"]["max_steps"]
    config = recipe_config(RECIPE, plugins=method == "rloop", seed=seed, steps=steps,
                           output_dir=folder / f"{method}-{seed}", overrides=overrides)
    watch = _EvaluateEvery(config, every)
    watch.trainer = build_trainer(config)
    watch.trainer.add_callback(watch)  # after the trainer's own: it evaluates once the plugin's post_step has run
    watch.trainer.train()
    return watch.figures


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.split("\n\n")[0], steps=None).parse_args()
    overrides = ["trainer.disable_tqdm=true", *args.overrides]

    def iterations(method: str, seed: int, folder: Path) -> dict[str, float]:
        found = run(method, seed, folder, overrides)
        return {f"iter{i} {key}": value for i, row in enumerate(found, 1) for key, value in row.items()}

    compare(args, ("rloop", "grpo"), iterations)


if __name__ == "__main__":
    main()
