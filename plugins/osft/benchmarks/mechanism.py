"""OSFT's mechanism on the built-in task: no reward, yet held-out pass@1 at temperature 1 rises toward what
sampling at 0.6 scores; sampling at the loss's own temperature (the authors' ablation) moves it far less.

Trains the CPU recipe (configs/recipes/osft-cpu.yaml: tau_s 0.6, tau_t 1.0) and its ablation (tau_s = tau_t = 1.0)
for the same steps and seeds, and prints for each run held-out pass@1 sampled at temperature 1 after training,
next to the untrained model's pass@1 at temperatures 1.0 and 0.6 (the level the method moves toward).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/osft/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

from pathlib import Path

import yaml

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "osft-cpu.yaml"
# method -> the sampling temperature tau_s; the loss reads every sample at the recipe's tau_t = 1.0
METHODS = {"osft": 0.6, "ablation": 1.0}


def load(method: str, seed: int, steps: int, folder: Path, overrides=()):
    """The recipe as ``method`` runs it, at this seed and length."""
    from stackrl.config import load_config

    tree = yaml.safe_load(RECIPE.read_text())
    tree["osft"]["sampling_temperature"] = METHODS[method]
    tree["output_dir"] = str(folder / f"{method}-{seed}")
    path = folder / f"{method}-{seed}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return load_config([path], [f"trainer.seed={seed}", f"trainer.max_steps={steps}", *overrides])


def run(method: str, seed: int, steps: int, folder: Path, overrides=()) -> dict:
    """Train one run; return held-out ``pass@1`` at the eval temperature and the mean ``entropy`` TRL logged."""
    from stackrl.evaluation import evaluate
    from stackrl.testing.fixtures import train_steps

    config = load(method, seed, steps, folder, overrides)
    trainer = train_steps(config)
    entropy = [log["entropy"] for log in trainer.state.log_history if "entropy" in log]
    result = evaluate(trainer.model, trainer.processing_class, config, trainer.args.max_completion_length)
    return {"pass@1": result["pass@1"], "entropy": entropy[-1]}


def untrained(folder: Path, overrides=()) -> dict:
    """The untrained model's held-out pass@1 at the eval temperature (1.0) and at tau_s (0.6)."""
    from stackrl.run import evaluate_checkpoint

    return {
        f"pass@1 at {t}": evaluate_checkpoint(load("osft", 0, 0, folder, [*overrides, f"eval.temperature={t}"]))[
            "pass@1"
        ]
        for t in (1.0, METHODS["osft"])
    }


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.split("\n\n")[0], steps=30, eval_size=200).parse_args()
    overrides = [f"eval.size={args.eval_size}", "trainer.disable_tqdm=true", *args.overrides]

    def before(folder: Path) -> dict:
        at = untrained(folder, overrides)
        return {"pass@1": at["pass@1 at 1.0"], "pass@1 at 0.6": at["pass@1 at 0.6"]}

    compare(args, METHODS, lambda method, seed, folder: run(method, seed, args.steps, folder, overrides),
            figures=("pass@1", "entropy", "pass@1 at 0.6"), before=before)


if __name__ == "__main__":
    main()
