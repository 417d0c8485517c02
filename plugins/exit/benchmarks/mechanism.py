"""ExIt's mechanism on the built-in retrying model: the self-iteration tasks it adds, and held-out self-correction
against plain GRPO at equal steps.

Trains configs/recipes/exit-cpu.yaml (stackrl/arith-skills, 64 problems, 8 a step) and, for the comparison, the same
recipe as plain GRPO. A monitor keeps every batch's groups (their pool row, prompt, completions and exact_match
rewards); with the rows the plugin added (``pool_added.jsonl``) it gives: ``added``, the tasks added; ``top``, the
share of them whose group had the highest learnability (reward variance) of its batch's groups that could give one
(the rule); ``shown``, the share whose prompt is their group's prompt, one of that group's own completions and the
retry instruction; and the share of groups with a reward spread (non-zero GRPO advantages) among the drawn
self-iteration tasks (``spread_tasks``) and among the dataset's problems (``spread_problems``). Held-out
self-correction (``eval.skill: repair``) after training: ``net`` (wrong -> right minus right -> wrong, over all
problems), ``fix``, ``keep`` and ``first`` (the first attempts' accuracy).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/exit/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from __future__ import annotations

import json
from pathlib import Path

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "exit-cpu.yaml"
RETRY = "\nTry again.\n"


class Groups:
    """A monitor: at each of exit's ``post_step`` calls, every group of the batch as (step, row, prompt,
    completions, exact_match rewards)."""

    def __init__(self):
        self.groups: list[tuple] = []

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "post_step" or plugin != "exit" or kwargs["ctx"].rollout is None:
            return
        ctx = kwargs["ctx"]
        rollout, size = ctx.rollout, ctx.rollout.group_size
        rewards = rollout.rewards["exact_match"].view(-1, size).tolist()
        for g, row in enumerate(ctx.pool.last_batch):
            span = slice(g * size, (g + 1) * size)
            self.groups.append((ctx.step, row, rollout.prompts[g * size], list(rollout.completions[span]), rewards[g]))


def variance(rewards: list[float]) -> float:
    """The population variance of a group's rewards, written out apart from the plugin's."""
    mean = sum(rewards) / len(rewards)
    return sum((r - mean) ** 2 for r in rewards) / len(rewards)


def task_figures(groups: list[tuple], added: list[tuple[int, str]], max_depth: int) -> dict:
    """``added``: (step, prompt) of each task the plugin added. The figures above, from the groups seen."""
    by_step: dict[int, list[tuple]] = {}
    for group in groups:
        by_step.setdefault(group[0], []).append(group)
    parents: dict[int, list[tuple]] = {}  # step -> the groups that gave its tasks
    shown = 0
    for step, prompt in added:
        batch = by_step[step]
        shown += any(prompt == g[2] + c + RETRY for g in batch for c in g[3])
        # the group it grew from: the one whose prompt it extends (the longest, should two share a start)
        parent = max((g for g in batch if prompt.startswith(g[2])), key=lambda g: len(g[2]), default=None)
        parents.setdefault(step, []).append(parent)
    top = 0
    for step, chosen in parents.items():
        # a task is from the top when its group varied, and at least as much as every eligible group that gave none
        others = [variance(g[4]) for g in by_step[step] if g[2].count(RETRY) < max_depth and g not in chosen]
        top += sum(g is not None and 0 < variance(g[4]) >= max(others, default=0.0) for g in chosen)
    tasks = [g for g in groups if RETRY in g[2]]
    problems = [g for g in groups if RETRY not in g[2]]
    spread = lambda found: sum(variance(g[4]) > 0 for g in found) / len(found) if found else float("nan")  # noqa: E731
    return {"added": len(added), "top": top / len(added) if added else float("nan"),
            "shown": shown / len(added) if added else float("nan"), "tasks_drawn": len(tasks),
            "spread_tasks": spread(tasks), "spread_problems": spread(problems)}


def run(method: str, seed: int, steps: int, folder: Path, overrides=(), evaluate_after: bool = True) -> dict:
    """Train ``method`` (``exit`` or ``grpo``) for ``steps`` steps at ``seed``; return its figures (those of the
    tasks for exit; held-out self-correction where ``evaluate_after``)."""
    from stackrl.run import build_trainer
    from stackrl.testing.heldout import recipe_config, self_correction

    if method == "grpo":
        overrides = [o for o in overrides if not o.startswith("exit.")]
    config = recipe_config(RECIPE, plugins=method == "exit", seed=seed, steps=steps,
                           output_dir=folder / f"{method}-{seed}", overrides=overrides)
    monitor = Groups()
    trainer = build_trainer(config, monitor=monitor)
    trainer.train()
    figures = {}
    if method == "exit":
        lines = (Path(config.host.output_dir) / "pool_added.jsonl").read_text().splitlines()
        added = [(entry["step"], entry["row"]["prompt"]) for entry in map(json.loads, lines)]
        figures = task_figures(monitor.groups, added, config.plugin_configs["exit"].max_depth)
    if evaluate_after:
        figures.update(self_correction(trainer.model, trainer.processing_class, config))
    return figures


def main() -> None:
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.split("\n\n")[0], steps=30, eval_size=300, methods=("exit", "grpo")).parse_args()
    overrides = [f"eval.size={args.eval_size}", "trainer.disable_tqdm=true", *args.overrides]
    compare(args, args.methods, lambda method, seed, folder: run(method, seed, args.steps, folder, overrides),
            figures=("net", "fix", "keep", "first", "added", "top", "shown", "spread_tasks", "spread_problems"),
            number_format="+.3f")


if __name__ == "__main__":
    main()
