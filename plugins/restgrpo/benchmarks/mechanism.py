"""ReST-GRPO's mechanism on the built-in task: more of GRPO's groups have a reward spread (a non-zero advantage)
than under plain sampling of the same problems.

Trains configs/recipes/restgrpo-cpu.yaml (64 problems, 8 a step, an iteration every 24 steps), the same recipe as
plain GRPO, and two ablations: the filter alone (no partial solutions) and the assembly alone (no filter,
std_threshold 0). Prints for each run the share of groups whose rewards spread, over the steps after the first
pass over the problems (the steps before it sample every problem alike), and held-out pass@1 after training.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/restgrpo/benchmarks/mechanism.py --seeds 0 1 2 --steps 40
"""

from __future__ import annotations

from pathlib import Path

import yaml

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "restgrpo-cpu.yaml"
# method -> its restgrpo settings over the recipe's; None: the recipe without the plugin (plain GRPO)
METHODS = {"restgrpo": {}, "grpo": None, "filter_only": {"partial_ratio": 0.0}, "no_filter": {"std_threshold": 0.0}}


def load(method: str, seed: int, steps: int, folder: Path, overrides=()):
    """The recipe as ``method`` runs it, at this seed and length."""
    from stackrl.config import load_config

    tree = yaml.safe_load(RECIPE.read_text())
    if METHODS[method] is None:
        tree["plugins"] = []
        del tree["restgrpo"]
    else:
        tree["restgrpo"].update(METHODS[method])
    tree["output_dir"] = str(folder / f"{method}-{seed}")
    path = folder / f"{method}-{seed}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return load_config([path], [f"trainer.seed={seed}", f"trainer.max_steps={steps}", *overrides])


def run(method: str, seed: int, steps: int, folder: Path, overrides=(), evaluate_after: bool = True) -> dict:
    """Train one run; return the share of groups with a reward spread after the first pass (``spread``) and, where
    ``evaluate_after``, held-out ``pass@1``."""
    from stackrl.evaluation import evaluate
    from stackrl.testing.fixtures import train_steps

    config = load(method, seed, steps, folder, overrides)
    trainer = train_steps(config)
    first_pass = -(-config.host.data.size // (trainer.args.per_device_train_batch_size // trainer.args.num_generations))
    flat = [log["frac_reward_zero_std"] for log in trainer.state.log_history
            if "frac_reward_zero_std" in log and log["step"] > first_pass]
    figures = {"spread": 1 - sum(flat) / len(flat)}
    if evaluate_after:
        figures["pass@1"] = evaluate(trainer.model, trainer.processing_class, config,
                                     trainer.args.max_completion_length)["pass@1"]
    return figures


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.split("\n\n")[0], steps=40, eval_size=200, methods=list(METHODS)).parse_args()
    overrides = [f"eval.size={args.eval_size}", "trainer.disable_tqdm=true", *args.overrides]
    compare(args, args.methods, lambda method, seed, folder: run(method, seed, args.steps, folder, overrides),
            figures=("spread", "pass@1"))


if __name__ == "__main__":
    main()
