"""MR-RLVR's mechanism on the built-in task: stage 1 teaches the fill task, then stage 2 is plain RLVR.

Trains the CPU recipe (configs/recipes/mrrlvr-cpu.yaml: arith-tiny, ``switch_step`` steps of fill and reorder
tasks, then outcome-only RLVR) and plain RLVR (the same recipe without the plugin) for the same number of steps
and seeds, and prints for each run:

- MR-RLVR's held-out fill accuracy (test-split problems, one masked step each, sampled at temperature 1) and the
  log-probability of writing the original solution out, before training and at the switch;
- held-out pass@1 and pass@k after the last step (k samples a test problem at temperature 1, seeded), for both.

Equal budget: both runs take the same optimizer steps on rollouts of the same size.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/mrrlvr/benchmarks/mechanism.py --seeds 0 1 2
"""

from __future__ import annotations

import random
from pathlib import Path

import torch
from transformers import TrainerCallback

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "mrrlvr-cpu.yaml"
METHODS = ("rlvr", "mrrlvr")


def fill_tasks(size: int, seed: int) -> list[tuple[str, str, int]]:
    """``size`` held-out fill tasks: (mrrlvr's default fill prompt, the original solution, the masked step) of
    test-split problems, the step drawn per problem with ``seed``."""
    from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE, make_dataset

    from stackrl_mrrlvr.tasks import maskable_steps, masked_solution

    tasks = []
    for i, row in enumerate(make_dataset("test", size, seed=seed)):
        step = random.Random(f"{seed}/{i}").choice(maskable_steps(row["solution"]))
        shown = masked_solution(row["solution"], step, "[MASK]")
        tasks.append((REFERENCE_TEMPLATE.format(solution=shown, prompt=row["question"]), row["solution"], step))
    return tasks


def fill_figures(model, tokenizer, tasks: list, seed: int, samples: int = 2) -> dict[str, float]:
    """On fill ``tasks`` (:func:`fill_tasks`): ``accuracy``, the share of sampled completions that restore the masked
    step; ``logprob``, the mean log-probability of writing the original solution out (the masked result is where
    nearly all of it is lost), a smoother signal of the same skill."""
    from stackrl.tasks.pretrain import generate
    from stackrl.testing.heldout import completion_logits

    from stackrl_mrrlvr.tasks import fill_agreement

    texts = generate(model, tokenizer, [prompt for prompt, _, _ in tasks for _ in range(samples)], greedy=False,
                     seed=seed)
    solved = [fill_agreement(t, solution, step) for t, (_, solution, step) in
              zip(texts, [task for task in tasks for _ in range(samples)])]
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    logprobs = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for prompt, solution, _ in tasks:
            target = encode(solution)
            logits = completion_logits(model, encode(prompt), target)
            logprobs.append(float(logits.log_softmax(-1).gather(1, torch.tensor(target).unsqueeze(1)).sum()))
    model.train(was_training)
    return {"accuracy": sum(solved) / len(solved), "logprob": sum(logprobs) / len(logprobs)}


class FillAt(TrainerCallback):
    """Held-out fill figures (:func:`fill_figures`) when training begins and after step ``step``."""

    def __init__(self, trainer, step: int, tasks: list, seed: int):
        self.trainer, self.step, self.tasks, self.seed = trainer, step, tasks, seed
        self.figures: dict[int, float] = {}

    def _measure(self, state):
        self.figures[state.global_step] = fill_figures(self.trainer.model, self.trainer.processing_class,
                                                       self.tasks, self.seed)

    def on_train_begin(self, args, state, control, **kwargs):
        self._measure(state)

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            self._measure(state)


def load(method: str, seed: int, steps: int, folder: Path, overrides=()):
    from stackrl.testing.heldout import recipe_config

    return recipe_config(RECIPE, plugins=method == "mrrlvr", seed=seed, steps=steps,
                         output_dir=folder / f"{method}-{seed}", overrides=overrides)


def pass_at(trainer, size: int, k: int, seed: int) -> dict[str, float]:
    """Held-out pass@1 (mean correctness) and pass@k (problems with a right sample among k)."""
    from stackrl.testing.heldout import heldout_rollout

    rollout = heldout_rollout(trainer, size, seed=1000 + seed, group_size=k)
    correct = rollout.rewards["exact_match"].view(-1, k)
    return {"pass@1": float(correct.mean()), f"pass@{k}": float(correct.max(1).values.mean())}


def run(method: str, seed: int, switch_step: int, steps: int, folder: Path, *, heldout: int = 200, k: int = 8,
        fill_size: int = 100, fill_on=None, overrides=()) -> dict:
    """Train one run; its held-out pass@1 and pass@k after ``steps`` steps, and (mrrlvr) its fill figures
    before training and at ``switch_step`` (``fill``: step -> figures) on ``fill_on`` (a list of fill tasks;
    default ``fill_size`` held-out ones)."""
    from stackrl.run import build_trainer

    config = load(method, seed, steps, folder, [f"mrrlvr.switch_step={switch_step}", *overrides]
                  if method == "mrrlvr" else overrides)
    trainer = build_trainer(config)
    tasks = fill_tasks(fill_size, seed) if fill_on is None else fill_on
    fill = FillAt(trainer, switch_step, tasks, seed) if method == "mrrlvr" else None
    if fill:
        trainer.add_callback(fill)
    trainer.train()
    return {**pass_at(trainer, heldout, k, seed), "fill": fill.figures if fill else {}, "trainer": trainer}


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    parser = arguments(__doc__.split("\n\n")[0], steps=40, eval_size=200)
    parser.add_argument("--switch-step", type=int, default=20)
    parser.add_argument("--k", type=int, default=8)
    args = parser.parse_args()

    def measured(method: str, seed: int, folder: Path) -> dict:
        figures = run(method, seed, args.switch_step, args.steps, folder, heldout=args.eval_size, k=args.k,
                      overrides=args.overrides)
        fill = {f"fill {key}@{step}": value for step, found in figures.pop("fill").items()
                for key, value in found.items()}
        return {key: value for key, value in {**figures, **fill}.items() if key != "trainer"}

    fill = [f"fill {key}@{step}" for step in (0, args.switch_step) for key in ("accuracy", "logprob")]
    compare(args, METHODS, measured, figures=("pass@1", f"pass@{args.k}", *fill))


if __name__ == "__main__":
    main()
