"""SVR-R1's mechanism on the built-in task: the self-verified final answer against plain GRPO at equal steps.

Trains configs/recipes/svrr1-cpu.yaml (stackrl/arith-skills) and the same recipe without the plugin (plain GRPO on
plain solutions) for the same steps and seeds, and runs the SVR-R1 trajectory (answer, check, a rethink after
"wrong", the second answer checked; sampled, seeded) on held-out problems of the recipe's categories with the
untrained and each trained model:

- ``first``: the first answer's accuracy (plain solving); ``final``: the final answer's, the one SVR-R1 outputs;
- ``verifications``: verdicts per problem (the paper's "verification turns"), ``rethought``: the share rethought;
- ``yes_precision``: of first answers the model said "correct" to, the share that are right (the verdict that
  finalises).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/svrr1/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "svrr1-cpu.yaml"
FIGURES = ("first", "final", "verifications", "rethought", "yes_precision")


def measure(trainer, settings, categories, size: int) -> dict:
    from stackrl.tasks import parse_verdict
    from stackrl.tasks.arithmetic import make_dataset
    from stackrl_svrr1 import SvrR1

    rows = make_dataset("test", size, seed=0, categories=categories)
    policy = trainer._shared_policy
    ctx = SimpleNamespace(generate=policy.generate, tokenizer=trainer.processing_class, eos_token_ids=policy.eos_token_ids)
    torch.manual_seed(1234)
    answers, first_verdicts, verifications = [], [], 0
    for trajectory, answer in zip(SvrR1(settings).trajectories(list(rows["question"]), ctx), rows["answer"]):
        answers.append([settings.is_correct(s.text, answer) for s in trajectory.of_kind("answer")])
        checks = trajectory.of_kind("verify")
        verifications += len(checks)
        first_verdicts.append(parse_verdict(checks[0].text) if checks else None)
    said_yes = [a[0] for a, v in zip(answers, first_verdicts) if v is True]
    return {
        "first": sum(a[0] for a in answers) / size,
        "final": sum(a[-1] for a in answers) / size,
        "verifications": verifications / size,
        "rethought": sum(len(a) > 1 for a in answers) / size,
        "yes_precision": sum(said_yes) / len(said_yes) if said_yes else None,
    }


def run(method: str, seed: int, steps: int, folder: Path, overrides, size: int) -> dict:
    from stackrl.run import build_trainer
    from stackrl.testing.heldout import recipe_config

    recipe = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=folder, overrides=overrides)
    if method == "grpo":  # plain GRPO on plain solutions: the outcome reward back on, the plugin's settings left out
        overrides = [*(o for o in overrides if not o.startswith("svrr1.")), "rewards.exact_match=1.0"]
    trained = recipe_config(RECIPE, plugins=method == "svrr1", seed=seed, steps=steps,
                            output_dir=folder / f"{method}-{seed}", overrides=overrides)
    trainer = build_trainer(trained)
    if steps:
        trainer.train()
    categories = recipe.host.data.options.get("categories")
    return measure(trainer, recipe.plugin_configs["svrr1"], categories, size)


def main() -> None:
    from stackrl.testing.benchmark import against_plain_grpo

    against_plain_grpo(__doc__.split("\n\n")[0], "svrr1", run, FIGURES, steps=30, eval_size=300)


if __name__ == "__main__":
    main()
