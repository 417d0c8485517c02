"""OSFT's mechanism on the built-in task: no reward, yet held-out pass@1 at temperature 1 rises toward what
sampling at 0.6 scores; sampling at the loss's own temperature (the authors' ablation) moves it far less.

Trains the CPU recipe (configs/recipes/osft-cpu.yaml: tau_s 0.6, tau_t 1.0) and its ablation (tau_s = tau_t = 1.0)
for the same steps and seeds, and prints for each run held-out pass@1 sampled at temperature 1 after training,
next to the untrained model's pass@1 at temperatures 1.0 and 0.6 (the level the method moves toward).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/osft/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--eval-size", type=int, default=200)
    parser.add_argument("overrides", nargs="*", help="key=value overrides of the recipe, for both runs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    overrides = [f"eval.size={args.eval_size}", "trainer.disable_tqdm=true", *args.overrides]
    results = {method: [] for method in METHODS}
    with tempfile.TemporaryDirectory() as tmp:
        before = untrained(Path(tmp), overrides)
        print("before training: " + "  ".join(f"{k} {v:.3f}" for k, v in before.items()), flush=True)
        for seed in args.seeds:
            for method in METHODS:
                figures = run(method, seed, args.steps, Path(tmp), overrides)
                results[method].append(figures)
                print(f"seed {seed} {method:>8}: pass@1 {figures['pass@1']:.3f}  entropy {figures['entropy']:.3f}",
                      flush=True)
    print(f"\n{args.steps} steps, seeds {args.seeds}, held-out problems {args.eval_size}, overrides {args.overrides}")
    print(f"{'':>10} {'pass@1':>8} {'entropy':>8}")
    for method, rows in results.items():
        means = {key: sum(r[key] for r in rows) / len(rows) for key in ("pass@1", "entropy")}
        print(f"{method:>10} {means['pass@1']:>8.3f} {means['entropy']:>8.3f}")


if __name__ == "__main__":
    main()
