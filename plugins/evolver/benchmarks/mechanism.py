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
    """A run's monitor: per training batch, each row's principles and outcome, and the repository around the
    step's update."""

    def __init__(self):
        self.plugin = None  # the run's evolver, set once the trainer is built
        self.rows: list[dict] = []  # per training row: step, shown (keys), own (a shown principle of its question), ok
        self.steps: list[dict] = []  # per update: counts before and after, rows shown each key, pruned keys
        self._batch = None
        self.rates: list[float] = []  # per step, the success rate of the training rows (any method)

    def __call__(self, hook, plugin, kwargs, result):
        ctx = kwargs.get("ctx")
        if hook == "transform_prompts" and plugin == "evolver" and ctx.training:
            library = self.plugin.principles.library
            shown = [list(keys) for keys in self.plugin.pending]
            self._batch = {"prompts": list(kwargs["prompts"]), "trained": list(result), "shown": shown,
                           "sources": {k: library.get(k).prompt for keys in shown for k in keys},
                           "texts": {k: library.get(k).artefact for keys in shown for k in keys}}
        if hook == "post_step" and plugin == "evolver" and self._batch is not None:
            self._after_update(ctx)
        if hook == "post_step" and plugin is None or (hook == "post_step" and plugin == "evolver"):
            pass

    def before_update(self):
        return {k: list(v) for k, v in self.plugin.principles.counts.items()}

    def _after_update(self, ctx):
        batch, self._batch = self._batch, None
        rollout = ctx.rollout
        ok = [exact_match(t, a) > 0 for t, a in zip(rollout.completions, rollout.columns["answer"])]
        for i, keys in enumerate(batch["shown"]):
            own = any(batch["sources"][k] == rollout.prompts[i] for k in keys)
            self.rows.append({"step": ctx.step, "shown": keys, "own": own, "ok": ok[i],
                              "prompt_has_principles": all(batch["texts"][k] in batch["trained"][i] for k in keys)})
        self.steps[-1].update(after={k: list(v) for k, v in self.plugin.principles.counts.items()},
                              texts={r.key: r.artefact for r in self.plugin.principles.library}, ok=ok,
                              shown=batch["shown"], step=ctx.step)

    def figures(self) -> dict[str, float]:
        def rate(rows):
            return sum(r["ok"] for r in rows) / len(rows) if rows else float("nan")

        own = [r for r in self.rows if r["own"]]
        other = [r for r in self.rows if r["shown"] and not r["own"]]
        bare = [r for r in self.rows if not r["shown"]]
        pruned = sum(len(s["pruned"]) for s in self.steps)
        return {"own_success": rate(own), "other_success": rate(other), "bare_success": rate(bare),
                "shown": (len(own) + len(other)) / max(1, len(self.rows)), "pruned": pruned,
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
            _wrap_update(lifecycle)
        trainer.train()
        rows = trainer.train_dataset
        greedy = trainer._shared_policy.generate(list(rows["prompt"]), do_sample=False)
        accuracy = sum(exact_match(g.text, a) for g, a in zip(greedy, rows["answer"])) / len(rows)
    rewards = [e["rewards/exact_match/mean"] for e in trainer.state.log_history if "rewards/exact_match/mean" in e]
    figures = {"train_success": sum(rewards) / max(1, len(rewards)), "accuracy": accuracy}
    return ({**figures, **lifecycle.figures()} if method == "evolver" else figures), lifecycle


def _wrap_update(lifecycle: Lifecycle) -> None:
    """Record the repository's counts before each update and the keys each prune removes."""
    plugin = lifecycle.plugin
    lifecycle_update, prune = plugin.lifecycle, plugin.principles.prune

    def update(keys, correct, rollout, ctx):
        lifecycle.steps.append({"before": lifecycle.before_update(), "pruned": []})
        return lifecycle_update(keys, correct, rollout, ctx)

    def pruning(threshold):
        removed = prune(threshold)
        if lifecycle.steps:
            lifecycle.steps[-1]["pruned"].extend(removed)
        return removed

    plugin.lifecycle, plugin.principles.prune = update, pruning


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=12, methods=("evolver", "grpo")).parse_args()
    compare(args, args.methods, lambda method, seed, folder: run(seed, args.steps, method, args.overrides)[0],
            figures=("train_success", "accuracy", "own_success", "other_success", "bare_success", "pruned"))


if __name__ == "__main__":
    main()
