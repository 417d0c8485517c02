"""EvolveR's experience lifecycle on the built-in task: retrieved principles, their scores, merges and pruning.

A short run of configs/recipes/evolver-cpu.yaml (GRPO, a pool of 8 problems that recur every 2 steps; a principle
is a success's completion, whole, retrieved into the prompt of the lexically closest question). A monitor reads
each training batch: the principles each row was shown, whether the row succeeded, and the repository before and
after the step's update. Figures: the success rate of the rows shown a principle distilled from their own question,
from another question, and of the rows shown none; the principles pruned and merged; against plain GRPO at equal
steps, the success rate of the training rows and greedy accuracy on the pool (plain prompts) after.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/evolver/benchmarks/mechanism.py --seeds 0 1 2 --steps 12
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from stackrl.blocks.selfinstruct import rouge_l
from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.testing.benchmark import one_thread
from stackrl.testing.heldout import recipe_config

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "evolver-cpu.yaml"


class Lifecycle:
    """A run's monitor: per training batch, the principles each row was shown and its outcome, and the repository
    before and after the step's update (credit, distillation and, on its steps, the prune)."""

    def __init__(self):
        self.plugin = None  # the run's evolver, set once the trainer is built
        self.steps: list[dict] = []

    def __call__(self, hook, plugin, kwargs, result):
        ctx = kwargs.get("ctx")
        if plugin != "evolver" or self.plugin is None:
            return
        principles = self.plugin.principles
        if hook == "transform_prompts" and ctx.training:
            shown = [list(keys) for keys in self.plugin.pending]
            self.steps.append({
                "shown": shown, "trained": list(result),
                "sources": {k: principles.library.get(k).prompt for keys in shown for k in keys},
                "texts": {k: principles.library.get(k).artefact for keys in shown for k in keys},
                "before": {k: list(v) for k, v in principles.counts.items()}})
        if hook == "post_step" and self.steps and "after" not in self.steps[-1]:
            rollout = ctx.rollout
            self.steps[-1].update(
                step=ctx.step, prompts=list(rollout.prompts),
                ok=[exact_match(t, a) > 0 for t, a in zip(rollout.completions, rollout.columns["answer"])],
                after={k: list(v) for k, v in principles.counts.items()},
                kept={r.key: r.artefact for r in principles.library},
                scores={r.key: principles.score(r.key) for r in principles.library})

    def rows(self) -> list[dict]:
        """Every training row: the principles shown, whether one came from its own question, its outcome."""
        return [{"shown": keys, "own": any(step["sources"][k] == step["prompts"][i] for k in keys), "ok": step["ok"][i]}
                for step in self.steps if "after" in step for i, keys in enumerate(step["shown"])]

    def figures(self) -> dict[str, float]:
        def rate(rows):
            return sum(r["ok"] for r in rows) / len(rows) if rows else float("nan")

        rows = self.rows()
        own = [r for r in rows if r["own"]]
        other = [r for r in rows if r["shown"] and not r["own"]]
        bare = [r for r in rows if not r["shown"]]
        pruned = sum(len(set(s["before"]) - set(s["after"])) for s in self.steps if "after" in s)
        return {"own_success": rate(own), "other_success": rate(other), "bare_success": rate(bare),
                "shown": (len(own) + len(other)) / max(1, len(rows)), "pruned": pruned,
                "principles": len(self.plugin.principles)}


def duplicates(texts: dict[str, str], threshold: float) -> list[tuple[str, str]]:
    """Pairs of kept principles whose texts repeat each other (ROUGE-L F at least ``threshold``)."""
    keys = sorted(texts)
    return [(a, b) for i, a in enumerate(keys) for b in keys[i + 1:] if rouge_l(texts[a], texts[b]) >= threshold]


def run(seed: int, steps: int, method: str = "evolver", overrides=()) -> tuple[dict, Lifecycle]:
    """The run's figures (the training rows' success rate, greedy accuracy on the pool after) and, for evolver,
    its monitor's."""
    lifecycle = Lifecycle()
    with one_thread(), tempfile.TemporaryDirectory() as out:
        config = recipe_config(RECIPE, plugins=method == "evolver", seed=seed, steps=steps, output_dir=out,
                               overrides=overrides if method == "evolver"
                               else [o for o in overrides if not o.startswith("evolver.")])
        trainer = build_trainer(config, monitor=lifecycle)
        if method == "evolver":
            lifecycle.plugin = trainer.plugins.plugins["evolver"]
        trainer.train()
        rows = trainer.train_dataset
        greedy = trainer._shared_policy.generate(list(rows["prompt"]), do_sample=False)
        accuracy = sum(exact_match(g.text, a) for g, a in zip(greedy, rows["answer"])) / len(rows)
    rewards = [e["rewards/exact_match/mean"] for e in trainer.state.log_history if "rewards/exact_match/mean" in e]
    figures = {"train_success": sum(rewards) / max(1, len(rewards)), "accuracy": accuracy}
    return ({**figures, **lifecycle.figures()} if method == "evolver" else figures), lifecycle


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=12, methods=("evolver", "grpo")).parse_args()
    compare(args, args.methods, lambda method, seed, folder: run(seed, args.steps, method, args.overrides)[0],
            figures=("train_success", "accuracy", "own_success", "other_success", "bare_success", "pruned"))


if __name__ == "__main__":
    main()
