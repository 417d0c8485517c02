"""S^2R's mechanism on the built-in task: self-verification and self-correction against plain GRPO at equal steps.

Trains configs/recipes/s2r-cpu.yaml (stackrl/arith-skills) and the same recipe without the plugin (plain GRPO on
plain solutions) for the same steps and seeds (``--methods s2r-outcome`` adds the recipe at the outcome level),
and runs the S^2R trajectory (answer, check, a new answer after "wrong", every answer checked; sampled, seeded) on
held-out problems of the recipe's categories with the untrained and each trained model:

- ``first``: the first answer's accuracy (plain solving); ``final``: the final answer's, the one S^2R outputs;
- ``verify_right``: the share of all checks whose verdict is right about the answer it checks (the paper's
  verification accuracy);
- ``corrected``: the share of problems answered again; ``w2r`` and ``r2w``: the shares of problems whose final
  answer turned a wrong first answer right, and a right one wrong.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/s2r/benchmarks/mechanism.py --seeds 0 1 2 --steps 15

``advantage_figures(rollout)`` reads a training rollout's checks: the mean advantage of those whose verdict is
right and wrong, and of those two where the row's final answer says the opposite (the mechanism test's figures).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "s2r-cpu.yaml"
FIGURES = ("first", "final", "verify_right", "corrected", "w2r", "r2w")


def truths(segments, answer: str, is_correct) -> tuple[list[bool], list[bool]]:
    """A trajectory's answers' correctness and whether each check's verdict is right, read from the texts and the
    hidden answer, not from the plugin."""
    from stackrl.tasks import parse_verdict

    answers, checks = [], []
    for segment in segments:
        if segment.kind == "answer":
            answers.append(is_correct(segment.text, answer))
        else:
            verdict = parse_verdict(segment.text)
            checks.append(verdict is not None and verdict == answers[-1])
    return answers, checks


def advantage_figures(rollout, is_correct) -> dict:
    """The mean advantage of a training rollout's checks by whether their verdict is right (``right``, ``wrong``),
    and of those whose row's final answer disagrees (``right_final_wrong``: a right verdict in a row that ends
    wrong; ``wrong_final_right``), with their counts (``n_...``)."""
    groups: dict[str, list[float]] = {"right": [], "wrong": [], "right_final_wrong": [], "wrong_final_right": []}
    for i, segments in enumerate(rollout.columns["segments"]):
        answers, checks = truths(segments, rollout.columns["answer"][i], is_correct)
        for segment, right in zip([s for s in segments if s.kind == "verify"], checks):
            # a segment's tokens share one; a per-row advantage (the outcome level) covers every token
            per_row = rollout.advantages.dim() == 1
            advantage = (rollout.advantages[i] if per_row else rollout.advantages[i, segment.start]).item()
            groups["right" if right else "wrong"].append(advantage)
            if right != answers[-1]:
                groups["right_final_wrong" if right else "wrong_final_right"].append(advantage)
    figures = {name: sum(v) / len(v) if v else None for name, v in groups.items()}
    return {**figures, **{f"n_{name}": len(v) for name, v in groups.items()}}


def measure(trainer, settings, categories, size: int) -> dict:
    from stackrl.tasks.arithmetic import make_dataset
    from stackrl_s2r import S2r

    rows = make_dataset("test", size, seed=0, categories=categories)
    policy = trainer._shared_policy
    ctx = SimpleNamespace(generate=policy.generate, tokenizer=trainer.processing_class, eos_token_ids=policy.eos_token_ids)
    torch.manual_seed(1234)
    answers, checks = [], []
    for trajectory, answer in zip(S2r(settings).trajectories(list(rows["question"]), ctx), rows["answer"]):
        right, judged = truths(trajectory.segments, answer, settings.is_correct)
        answers.append(right)
        checks += judged
    return {
        "first": sum(a[0] for a in answers) / size,
        "final": sum(a[-1] for a in answers) / size,
        "verify_right": sum(checks) / len(checks),
        "corrected": sum(len(a) > 1 for a in answers) / size,
        "w2r": sum(not a[0] and a[-1] for a in answers) / size,
        "r2w": sum(a[0] and not a[-1] for a in answers) / size,
    }


def run(method: str, seed: int, steps: int, folder: Path, overrides, size: int) -> dict:
    from stackrl.run import build_trainer
    from stackrl.testing.heldout import recipe_config

    recipe = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=folder, overrides=overrides)
    if method == "grpo":  # plain GRPO on plain solutions: the outcome reward back on, the plugin's settings left out
        overrides = [*(o for o in overrides if not o.startswith("s2r.")), "rewards.exact_match=1.0"]
    elif method == "s2r-outcome":
        overrides = [*overrides, "s2r.level=outcome"]
    trained = recipe_config(RECIPE, plugins=method != "grpo", seed=seed, steps=steps,
                            output_dir=folder / f"{method}-{seed}", overrides=overrides)
    trainer = build_trainer(trained)
    if steps:
        trainer.train()
    categories = recipe.host.data.options.get("categories")
    return measure(trainer, recipe.plugin_configs["s2r"], categories, size)


def main() -> None:
    from stackrl.testing.benchmark import against_plain_grpo

    against_plain_grpo(__doc__.split("\n\n")[0], "s2r", run, FIGURES, steps=15, eval_size=300)


if __name__ == "__main__":
    main()
