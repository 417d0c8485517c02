"""UCOB on the built-in task: the better view teaches the other, and retrieval leaves a skill that misleads.

Two measurements on configs/recipes/ucob-cpu.yaml (stackrl/arith-tiny, groups of two plain and two skilled rows).

``run(seed, steps, planted=True)`` (the mechanism test): a pool of eight problems, four easy (the plain view
solves them) and four hard (it does not), and a planted library, all at utility 0.5. Each easy problem has two
records: a misleading one (the question itself, word for word, with another problem's solution) and a helpful one
(the question after one more word, "Compute:", so less similar, with its own solution). Each hard problem has one,
its own solution ("own"). No exploration bonus and no new records, so only the utility update can move retrieval.
A monitor reads each advantage stage: per group the record used, each view's mean reward and the view whose rows
were distilled.

``run(seed, steps, method)`` (the benchmark): the recipe as it is against plain GRPO at equal steps, the library
filled from the run's own successes; greedy accuracy on the pool after (plain prompts: what the plain view
internalised), the share of groups that had a skill, and which view taught.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/ucob/benchmarks/mechanism.py --seeds 0 1 2 --steps 24
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from stackrl.blocks.experience import Experience
from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.testing.benchmark import one_thread
from stackrl.testing.heldout import recipe_config
from stackrl_ucob.plugin import SKILL_KEY, VIEW, WEIGHT
from stackrl_ucob.views import PLAIN, SKILL

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "ucob-cpu.yaml"
PLANTED = ["data.size=8", "trainer.per_device_train_batch_size=32", "ucob.ucb_scale=0.0", "ucob.write_min=1000.0",
           'data.options={"categories": ["2 steps, 1-digit", "3 steps, 2-digit"]}']


class Views:
    """A run's monitor: each advantage stage of ucob, group by group."""

    def __init__(self):
        self.steps: list[list[dict]] = []

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "reshape_advantages" or plugin != "ucob" or WEIGHT not in kwargs["ctx"].rollout.columns:
            return
        ctx = kwargs["ctx"]
        rollout, size = ctx.rollout, ctx.rollout.group_size
        rewards = [float(r) for r in ctx.total_reward]
        views, keys, weights = rollout.columns[VIEW], rollout.columns[SKILL_KEY], rollout.columns[WEIGHT]
        groups = []
        for start in range(0, len(rewards), size):
            rows = range(start, start + size)
            means = {v: [rewards[i] for i in rows if views[i] == v] for v in (SKILL, PLAIN)}
            if not means[SKILL]:
                continue
            taught = {views[i] for i in rows if weights[i] > 0}
            groups.append({"key": keys[start], "skill": sum(means[SKILL]) / len(means[SKILL]),
                           "plain": sum(means[PLAIN]) / len(means[PLAIN]),
                           "teacher": taught.pop() if len(taught) == 1 else None if not taught else "both"})
        self.steps.append(groups)


def plant(plugin, rows) -> None:
    """For each easy problem a misleading record (its question, another problem's solution) and a helpful one (its
    question with one more word, its own solution); for each hard problem its own solution; all at utility 0.5."""
    for i, row in enumerate(rows):
        if row["category"] != "2 steps, 1-digit":
            plugin.memory.add(Experience(prompt_ids=[3, i], completion_ids=[0], prompt=row["question"],
                                         completion=row["solution"], utility=0.5, key=f"own:{i}"))
            continue
        other = rows[(i + 1) % len(rows)]
        plugin.memory.add(Experience(prompt_ids=[1, i], completion_ids=[0], prompt=row["question"],
                                     completion=other["solution"], utility=0.5, key=f"misleading:{i}"))
        plugin.memory.add(Experience(prompt_ids=[2, i], completion_ids=[0], prompt="Compute: " + row["question"],
                                     completion=row["solution"], utility=0.5, key=f"helpful:{i}"))


def planted_figures(views: Views) -> dict[str, float]:
    def share(groups, test):
        return sum(map(test, groups)) / max(1, len(groups))

    def easy(groups):
        return [g for g in groups if not g["key"].startswith("own")]

    every = [g for step in views.steps for g in step]
    misleading = [g for g in every if g["key"].startswith("misleading")]
    own = [g for g in every if g["key"].startswith("own")]
    decided = [g for g in every if g["teacher"] is not None]
    return {
        "helpful_first": share(easy(views.steps[0]), lambda g: g["key"].startswith("helpful")),
        "helpful_last": share(easy(views.steps[-1]), lambda g: g["key"].startswith("helpful")),
        "skill_reward_misleading": share(misleading, lambda g: g["skill"]),
        "plain_reward_misleading": share(misleading, lambda g: g["plain"]),
        "skill_reward_own": share(own, lambda g: g["skill"]),
        "plain_reward_own": share(own, lambda g: g["plain"]),
        "plain_taught_misleading": share(misleading, lambda g: g["teacher"] == PLAIN),
        "skill_taught_own": share(own, lambda g: g["teacher"] == SKILL),
        # the rule: every group that distilled did so from the view of the higher mean reward
        "teacher_higher": share(decided, lambda g: g["teacher"] == (SKILL if g["skill"] > g["plain"] else PLAIN)),
    }


def run(seed: int, steps: int, method: str = "ucob", overrides=(), planted: bool = False) -> tuple[dict, Views]:
    """The run's figures and its monitor (see the module's docstring)."""
    views = Views()
    overrides = [*PLANTED, *overrides] if planted else list(overrides)
    with one_thread(), tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=method == "ucob", seed=seed, steps=steps, output_dir=out,
                               overrides=overrides if method == "ucob" else
                               [o for o in overrides if not o.startswith(("ucob.", "losses.ucob"))])
        trainer = build_trainer(config, monitor=views)
        rows = trainer.train_dataset
        if planted:
            plant(trainer.plugins.plugins["ucob"], rows)
        trainer.train()
        if planted:
            return planted_figures(views), views
        greedy = trainer._shared_policy.generate(list(rows["prompt"]), do_sample=False)
        accuracy = sum(exact_match(g.text, a) for g, a in zip(greedy, rows["answer"])) / len(rows)
    figures = {"accuracy": accuracy}
    if method == "ucob":
        every = [g for step in views.steps for g in step]
        groups = len(views.steps) * 8
        figures.update({"skilled": len(every) / max(1, groups),
                        "skill_taught": sum(g["teacher"] == SKILL for g in every) / max(1, groups),
                        "plain_taught": sum(g["teacher"] == PLAIN for g in every) / max(1, groups),
                        "skill_gap": sum(g["skill"] - g["plain"] for g in every) / max(1, len(every))})
    return figures, views


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=24, methods=("ucob", "grpo")).parse_args()
    compare(args, args.methods, lambda method, seed, folder: run(seed, args.steps, method, args.overrides)[0],
            figures=("accuracy", "skilled", "skill_taught", "plain_taught", "skill_gap"))


if __name__ == "__main__":
    main()
