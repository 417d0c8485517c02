"""RISE's mechanism on the built-in task: held-out judging improves, held-out solving does not drop.

Trains the CPU recipe (configs/recipes/rise-cpu.yaml, stackrl/arith-skills) and the same run without the plugin
(plain GRPO on exact_match), for the same steps and seeds, and measures each trained model and the untrained one:

- judge: held-out balanced accuracy of verdicts on the test split's solutions and slipped copies of them
  (``eval.skill: judge``, greedy);
- pass@1: held-out solving accuracy (``eval.skill: solve``).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/rise/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
import yaml

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "rise-cpu.yaml"
METHODS = ("grpo", "rise")


def load(method: str, seed: int, steps: int, folder: Path, overrides=(), skill: str = "solve"):
    from stackrl.config import load_config

    tree = yaml.safe_load(RECIPE.read_text())
    if method == "grpo":
        tree["plugins"] = []
        tree["rewards"] = {"exact_match": 1.0}
        del tree["rise"]
    tree["output_dir"] = str(folder / f"{method}-{seed}")
    path = folder / f"{method}-{seed}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return load_config(
        [path], [f"trainer.seed={seed}", f"trainer.max_steps={steps}", f"eval.skill={skill}", *overrides]
    )


def measure(model, tokenizer, method: str, folder: Path, overrides=()) -> dict:
    """Held-out judging (balanced accuracy, greedy) and solving (pass@1) of ``model``."""
    from stackrl.evaluation import evaluate

    judging = load(method, 0, 0, folder, [*overrides, "eval.temperature=0"], skill="judge")
    solving = load(method, 0, 0, folder, overrides)
    length = solving.host.trainer.max_completion_length
    return {
        "judge": evaluate(model, tokenizer, judging, length)["balanced_accuracy"],
        "pass@1": evaluate(model, tokenizer, solving, length)["pass@1"],
    }


def run(method: str, seed: int, steps: int, folder: Path, overrides=()) -> dict:
    """Train one run; its held-out figures after training."""
    from stackrl.testing.fixtures import train_steps

    trainer = train_steps(load(method, seed, steps, folder, overrides))
    return measure(trainer.model, trainer.processing_class, method, folder, overrides)


def untrained(folder: Path, overrides=()) -> dict:
    from stackrl.run import build_trainer

    trainer = build_trainer(load("grpo", 0, 0, folder, overrides))
    return measure(trainer.model, trainer.processing_class, "grpo", folder, overrides)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--eval-size", type=int, default=200)
    parser.add_argument("overrides", nargs="*", help="key=value overrides of the recipe, for every run")
    args = parser.parse_args()
    torch.set_num_threads(1)
    overrides = [f"eval.size={args.eval_size}", *args.overrides]
    results = {method: [] for method in METHODS}
    with tempfile.TemporaryDirectory() as tmp:
        before = untrained(Path(tmp), overrides)
        print(f"before training: judge {before['judge']:.3f}  pass@1 {before['pass@1']:.3f}", flush=True)
        for seed in args.seeds:
            for method in METHODS:
                figures = run(method, seed, args.steps, Path(tmp), overrides)
                results[method].append(figures)
                print(f"seed {seed} {method:>4}: judge {figures['judge']:.3f}  pass@1 {figures['pass@1']:.3f}", flush=True)
    print(f"\n{args.steps} steps, seeds {args.seeds}, held-out problems {args.eval_size}, overrides {args.overrides}")
    print(f"{'':>6} {'judge':>8} {'pass@1':>8}")
    print(f"{'before':>6} {before['judge']:>8.3f} {before['pass@1']:>8.3f}")
    for method, rows in results.items():
        means = {key: sum(r[key] for r in rows) / len(rows) for key in ("judge", "pass@1")}
        print(f"{method:>6} {means['judge']:>8.3f} {means['pass@1']:>8.3f}")


if __name__ == "__main__":
    main()
