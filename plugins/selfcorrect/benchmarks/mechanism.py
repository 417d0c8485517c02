"""Self-rewarding correction on the built-in task: the self-correction trajectory against plain GRPO at equal steps.

Trains configs/recipes/selfcorrect-cpu.yaml (stackrl/arith-skills: stage 1's rejection-sampled fine-tuning, then RL
on the trajectory) and the same recipe without the plugin (plain GRPO on plain solutions) for the same steps and
seeds, and runs the trajectory (answer, check, a revision only after "wrong"; sampled, seeded) on held-out problems
of the recipe's categories with the untrained and each trained model, the paper's figures:

- ``first``: the first answer's accuracy (turn 1); ``final``: the final answer's; ``gain``: final - first;
- ``wrong_to_right``, ``right_to_wrong``: shares of problems whose answer the revision fixed, broke;
- ``rm_right``, ``rm_wrong``: the first verdict's accuracy on right and on wrong first answers (the paper's
  "RM accuracy (a, b)"); ``revised``: the share of problems revised (1 - the share stopped at the first answer).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/selfcorrect/benchmarks/mechanism.py --seeds 0 1 2 --steps 12
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "selfcorrect-cpu.yaml"
FIGURES = ("first", "final", "gain", "wrong_to_right", "right_to_wrong", "rm_right", "rm_wrong", "revised")


def measure(trainer, settings, categories, size: int) -> dict:
    from stackrl.blocks.turns import transitions, verifier_figures
    from stackrl.tasks import parse_verdict
    from stackrl.tasks.arithmetic import make_dataset
    from stackrl_selfcorrect import Selfcorrect

    rows = make_dataset("test", size, seed=0, categories=categories)
    policy = trainer._shared_policy
    ctx = SimpleNamespace(generate=policy.generate, tokenizer=trainer.processing_class, eos_token_ids=policy.eos_token_ids)
    torch.manual_seed(1234)
    answers, verdicts = [], []
    for trajectory, answer in zip(Selfcorrect(settings).trajectories(list(rows["question"]), ctx), rows["answer"]):
        answers.append([settings.is_correct(s.text, answer) for s in trajectory.of_kind("answer")])
        checks = trajectory.of_kind("verify")
        verdicts.append(parse_verdict(checks[0].text) if checks else None)
    first, final = [a[0] for a in answers], [a[-1] for a in answers]
    classifier = verifier_figures(first, verdicts)
    moved = transitions(first, final)
    return {
        "first": sum(first) / size, "final": sum(final) / size, "gain": (sum(final) - sum(first)) / size,
        "wrong_to_right": moved["wrong_to_right"], "right_to_wrong": moved["right_to_wrong"],
        "rm_right": classifier.get("recall"), "rm_wrong": classifier.get("recall_negative"),
        "revised": sum(len(a) > 1 for a in answers) / size,
    }


def run(method: str, seed: int, steps: int, folder: Path, overrides, size: int) -> dict:
    from stackrl.testing.heldout import recipe_config, trained_for

    recipe = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=folder, overrides=overrides)
    trainer, _ = trained_for(RECIPE, "selfcorrect", method, seed=seed, steps=steps, folder=folder, overrides=overrides)
    return measure(trainer, recipe.plugin_configs["selfcorrect"], recipe.host.data.options.get("categories"), size)


def main() -> None:
    from stackrl.testing.benchmark import against_plain_grpo

    against_plain_grpo(__doc__.split("\n\n")[0], "selfcorrect", run, FIGURES, steps=12, eval_size=300)


if __name__ == "__main__":
    main()
