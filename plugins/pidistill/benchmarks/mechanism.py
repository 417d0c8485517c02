"""π-Distill's mechanism on the built-in task: the student, never shown the solution, learns the teacher's tokens.

The teacher (the built-in model shown the worked solution before the question) writes the solution nearly always;
the student (the same weights shown the question alone) does so about half the time. After a short run of
configs/recipes/pidistill-cpu.yaml (``pidistill``), of the same recipe with ``alpha: 1`` (``teacher_only``: GRPO on the
teacher's rollouts alone, the student term off, what the paper's alpha = 1 is) and of plain GRPO (``grpo``), with the
same settings and steps: the student's mean negative log-likelihood per token of held-out reference solutions
(``student_nll``) and its held-out greedy accuracy (``accuracy``).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/pidistill/benchmarks/mechanism.py --seeds 0 1 2 --steps 10
"""

from __future__ import annotations

from pathlib import Path

import torch

from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import make_dataset
from stackrl.testing.benchmark import arguments, compare
from stackrl.testing.heldout import greedy_accuracy, recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "pidistill-cpu.yaml"
METHODS = ("pidistill", "teacher_only", "grpo")


def student_nll(trainer, size: int, seed: int) -> float:
    """The policy's mean NLL per token of ``size`` held-out reference solutions, given the question alone."""
    rows = make_dataset(split="test", size=size, seed=seed)
    tokenizer = trainer.processing_class
    solutions = [tokenizer(s, add_special_tokens=False)["input_ids"] for s in rows["solution"]]
    with torch.no_grad():
        scores = trainer._shared_policy.score(list(rows["question"]), solutions)
    return (-(scores.logprobs * scores.mask).sum() / scores.mask.sum()).item()


def run(method: str, seed: int, folder: Path, *, steps: int, heldout: int, overrides=(),
        accuracy: bool = True) -> dict[str, float]:
    """Train ``method`` (one of :data:`METHODS`) for ``steps`` steps; the student's held-out NLL and, where
    ``accuracy``, its greedy accuracy."""
    extra = ["pidistill.alpha=1.0"] if method == "teacher_only" else []
    config = recipe_config(RECIPE, plugins=method != "grpo", seed=seed, steps=steps,
                           output_dir=folder / f"{method}-{seed}", overrides=[*overrides, *extra])
    trainer = build_trainer(config)
    trainer.train()
    figures = {"student_nll": student_nll(trainer, heldout, seed=1000 + seed)}
    if accuracy:
        figures["accuracy"] = greedy_accuracy(trainer, heldout, seed=1000 + seed)
    return figures


def untrained(heldout: int, folder: Path) -> dict[str, float]:
    """The same figures for the built-in model before any training (held-out seed 1000, that of seed 0's runs)."""
    trainer = build_trainer(recipe_config(RECIPE, plugins=False, seed=0, steps=1, output_dir=folder / "before"))
    return {"student_nll": student_nll(trainer, heldout, seed=1000), "accuracy": greedy_accuracy(trainer, heldout, seed=1000)}


def main():
    parser = arguments(__doc__.splitlines()[0], steps=10, eval_size=128, methods=METHODS)
    args = parser.parse_args()
    compare(args, args.methods, lambda method, seed, folder: run(
        method, seed, folder, steps=args.steps, heldout=args.eval_size, overrides=args.overrides),
        before=lambda folder: untrained(args.eval_size, folder))


if __name__ == "__main__":
    main()
