"""RISE's mechanism on the built-in task: held-out judging improves, held-out solving does not drop.

Trains a CPU recipe (configs/recipes/rise-cpu.yaml, or selfverify-cpu.yaml with ``--plugin selfverify``; both on
stackrl/arith-skills) and the same run without the plugin (plain GRPO on exact_match), for the same steps and
seeds, and measures each trained model and the untrained one on held-out problems:

- judge: balanced accuracy of greedy verdicts on the test split's solutions and slipped copies of them
  (``eval.skill: judge``);
- pass@1, maj@k and vmaj@k: solving, with the plain and the verification-weighted vote (``eval.verify_vote``).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/rise/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

from pathlib import Path

import yaml

RECIPES = Path(__file__).resolve().parents[3] / "configs" / "recipes"
FIGURES = ("judge", "pass@1", "maj", "vmaj")


def load(plugin: str, method: str, seed: int, steps: int, folder: Path, overrides=()):
    """``plugin``'s CPU recipe as ``method`` runs it: with the plugin, or without it (``grpo``)."""
    from stackrl.config import load_config

    tree = yaml.safe_load((RECIPES / f"{plugin}-cpu.yaml").read_text())
    if method == "grpo":
        tree["plugins"] = []
        tree["rewards"] = {"exact_match": 1.0}
        del tree[plugin]
    tree["output_dir"] = str(folder / f"{method}-{seed}")
    path = folder / f"{method}-{seed}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return load_config([path], [f"trainer.seed={seed}", f"trainer.max_steps={steps}", *overrides])


def measure(model, tokenizer, config) -> dict:
    """Held-out judging (balanced accuracy, greedy) and solving (pass@1, maj@k, vmaj@k) of ``model``."""
    from dataclasses import replace

    from stackrl.evaluation import evaluate

    def with_eval(**settings):
        return replace(config, host=replace(config.host, eval=replace(config.host.eval, **settings)))

    length = config.host.trainer["max_completion_length"]
    judging = evaluate(model, tokenizer, with_eval(skill="judge", temperature=0.0), length)
    solving = evaluate(model, tokenizer, with_eval(verify_vote=True), length)
    k = config.host.eval.samples
    return {
        "judge": judging["balanced_accuracy"],
        "pass@1": solving["pass@1"],
        "maj": solving[f"maj@{k}"],
        "vmaj": solving[f"vmaj@{k}"],
    }


def run(plugin: str, method: str, seed: int, steps: int, folder: Path, overrides=()) -> dict:
    """Train one run (``method``: ``plugin`` or ``grpo``); its held-out figures after training."""
    from stackrl.testing.fixtures import train_steps

    config = load(plugin, method, seed, steps, folder, overrides)
    trainer = train_steps(config)
    return measure(trainer.model, trainer.processing_class, config)


def untrained(plugin: str, folder: Path, overrides=()) -> dict:
    from stackrl.run import build_trainer

    config = load(plugin, "grpo", 0, 0, folder, overrides)
    trainer = build_trainer(config)
    return measure(trainer.model, trainer.processing_class, config)


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.split("\n\n")[0], steps=20, eval_size=200)
    parser.add_argument("--plugin", choices=["rise", "selfverify"], default="rise")
    args = parser.parse_args()
    overrides = [f"eval.size={args.eval_size}", *args.overrides]
    compare(args, ("grpo", args.plugin),
            lambda method, seed, folder: run(args.plugin, method, seed, args.steps, folder, overrides),
            figures=FIGURES, before=lambda folder: untrained(args.plugin, folder, overrides))


if __name__ == "__main__":
    main()
