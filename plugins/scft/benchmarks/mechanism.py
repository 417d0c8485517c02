"""SCFT + RLERR on the built-in task: the held-out critique trajectory against plain GRPO at equal steps.

Trains configs/recipes/scft-cpu.yaml (stackrl/arith-skills: critiques collected and fine-tuned on every 4 steps, RL
with the reflection reward from the first phase on) and the same recipe without the plugin (plain GRPO on plain
solutions) for the same steps and seeds, and runs the critique trajectory (answer, check, a corrected solution only
after "wrong"; sampled, seeded) on held-out problems of the recipe's categories with the untrained and each trained
model:

- ``first``: the first answer's accuracy; ``final``: the critique's final answer's; ``gain``: final - first;
- ``corrected``: the share of problems whose check found the wrong line of a wrong answer and the correction was
  right (the reward's ``corrected`` case); ``hallucinated``: whose verdict contradicted the answer (P1 failed);
- ``err``: the authors' effective reflection ratio, one reflection a problem: the share of checks with a verdict
  whose trajectory ends right.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/scft/benchmarks/mechanism.py --seeds 0 1 2 --steps 12
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "scft-cpu.yaml"
FIGURES = ("first", "final", "gain", "corrected", "hallucinated", "err")


def measure(trainer, settings, categories, size: int) -> dict:
    from stackrl.tasks.arithmetic import make_dataset
    from stackrl_scft import Scft, row_reward

    rows = make_dataset("test", size, seed=0, categories=categories)
    policy = trainer._shared_policy
    ctx = SimpleNamespace(generate=policy.generate, tokenizer=trainer.processing_class, eos_token_ids=policy.eos_token_ids)
    torch.manual_seed(1234)
    cases, first, final = [], [], []
    for trajectory, answer in zip(Scft(settings).critiques(list(rows["question"]), ctx), rows["answer"]):
        _, case, right = row_reward(trajectory.segments, answer, settings)
        cases.append(case)
        first.append(settings.is_correct(trajectory.segments[0].text, answer))
        final.append(right)
    reflected = [right for case, right in zip(cases, final) if case != "silent"]
    return {
        "first": sum(first) / size, "final": sum(final) / size, "gain": (sum(final) - sum(first)) / size,
        "corrected": cases.count("corrected") / size, "hallucinated": cases.count("hallucinated") / size,
        "err": sum(reflected) / len(reflected) if reflected else None,
    }


def run(method: str, seed: int, steps: int, folder: Path, overrides, size: int) -> dict:
    from stackrl.testing.heldout import recipe_config, trained_for

    recipe = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=folder, overrides=overrides)
    trainer, _ = trained_for(RECIPE, "scft", method, seed=seed, steps=steps, folder=folder, overrides=overrides)
    return measure(trainer, recipe.plugin_configs["scft"], recipe.host.data.options.get("categories"), size)


def main() -> None:
    from stackrl.testing.benchmark import against_plain_grpo

    against_plain_grpo(__doc__.split("\n\n")[0], "scft", run, FIGURES, steps=12, eval_size=300)


if __name__ == "__main__":
    main()
