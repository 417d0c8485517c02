"""SAAS on the built-in tool model: the boundary penalties redone by hand on each real step, and tool use against
plain GRPO.

A run of configs/recipes/saas-cpu.yaml (stackrl/arith-tools, the calculator as the "search"). Every `ctx.generate`
call the plugin makes is recorded (below the plugin, at the policy), and at each training reward stage a monitor
redoes SAAS's rule by hand from those generations and the rollout: before `stage_two_step` no tool-free answer is
drawn and every penalty is 0; from it on, each question's tool-free answers are judged by exact match, the question
labelled (2 or more right: inside the boundary; else a right episode: outside; else undetermined), each right
episode's calls counted from `env_moves` and penalised 0.05 per call beyond the sufficient count (0 inside, the
fewest of a right episode of the group outside), and each episode repeating one of its own calls 0.1. `mismatches`
counts every row where the plugin's reward differs from the hand rule. Against plain GRPO in the same runner
(configs/recipes/env-cpu.yaml) at equal steps: held-out accuracy with the tool, calls per step and accuracy
without the tool (benchmarks/tool_use.py's measure, sampled at temperature 1).

    nice python plugins/saas/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import stackrl.testing  # noqa: F401  (offline environment, before transformers is imported)
from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.testing.benchmark import one_thread, recorded_generations
from stackrl.testing.heldout import recipe_config

RECIPES = Path(__file__).resolve().parents[3] / "configs" / "recipes"
RECIPE, GRPO = RECIPES / "saas-cpu.yaml", RECIPES / "env-cpu.yaml"
FIGURES = ("accuracy", "call_rate", "call_correct", "no_tool")


class Monitor:
    """Redoes the plugin's rule by hand at each training reward stage and counts what it saw."""

    def __init__(self, config):
        self.config = config  # the run's saas section
        self.calls: list = []
        self.mismatches = 0
        self.notes: list = []
        self.counts = Counter()
        self.last = None  # the last training reward stage: (ctx, the plugin's rewards, its generations)
        self.plugin = None  # the run's saas instance

    def miss(self, what):
        self.mismatches += 1
        if len(self.notes) < 10:
            self.notes.append(what)

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "reward" or plugin != "saas" or not kwargs["ctx"].training:
            return
        calls, self.calls[:] = list(self.calls), []
        self.last = (kwargs["ctx"], list(result), calls)
        self.check(kwargs["ctx"], result, calls)

    def check(self, ctx, result, calls):
        """Redo the rule by hand on one reward stage: its rollout, the plugin's rewards and its generations."""
        c = self.config
        rollout, size = ctx.rollout, ctx.rollout.group_size
        if ctx.step < c.stage_two_step:
            self.counts["stage_one_steps"] += 1
            if calls or any(r != 0.0 for r in result):
                self.miss(("stage I acted", ctx.step))
            return
        self.counts["stage_two_steps"] += 1
        answers = rollout.columns["answer"]
        (prompts, texts), = calls
        n = c.tool_free_samples
        for g in range(rollout.num_groups):
            first = g * size
            if prompts[g * n:(g + 1) * n] != [rollout.prompts[first]] * n:
                self.miss(("tool-free prompts", ctx.step, g))
            free = sum(exact_match(t, answers[first]) == 1.0 for t in texts[g * n:(g + 1) * n])
            rows = range(first, first + size)
            right = [exact_match(rollout.completions[i], answers[i]) == 1.0 for i in rows]
            made = [[(m[1][0], *(str(a).strip() for a in m[1][1])) for m in rollout.columns["env_moves"][i]
                     if not isinstance(m[1], str)] for i in rows]
            if free >= c.min_correct:
                label, allowed = "no_search", 0
            elif any(right):
                label, allowed = "need_search", min(len(m) for m, ok in zip(made, right) if ok)
            else:
                label, allowed = "undetermined", None
            self.counts[label] += 1
            for i, ok, m in zip(rows, right, made):
                over = max(0, len(m) - allowed) if ok and allowed is not None else 0
                again = len(set(m)) < len(m)
                expected = -c.beta * over - (c.repeat_penalty if again else 0.0)
                self.counts["rows"] += 1
                self.counts[f"{label}_penalised"] += over > 0
                self.counts["necessary_calls_spared"] += label == "need_search" and ok and 0 < len(m) <= allowed
                self.counts["repeated"] += again
                if abs(result[i] - expected) > 1e-9:
                    self.miss(("penalty", ctx.step, i, label, len(m), ok, again, result[i], expected))

    def figures(self) -> dict[str, float]:
        rows = max(1, self.counts["rows"])
        return {"mismatches": self.mismatches, **{k: v for k, v in self.counts.items()},
                "penalised_inside": self.counts["no_search_penalised"] / rows,
                "penalised_outside": self.counts["need_search_penalised"] / rows}


def run(seed: int, steps: int, method: str = "saas", overrides=(), eval_size: int = 0):
    """The run's figures and, for saas, its monitor: held-out tool use after training where ``eval_size`` > 0."""
    from stackrl.blocks.env.pretrain_tools import evaluate_tools
    from stackrl.tasks import TASKS

    with one_thread(), tempfile.TemporaryDirectory() as out:
        settings = overrides if method == "saas" else [o for o in overrides if not o.startswith("saas.")]
        config = recipe_config(RECIPE if method == "saas" else GRPO, plugins=True, seed=seed, steps=steps,
                               output_dir=out, overrides=settings)
        monitor = Monitor(config.plugin_configs["saas"]) if method == "saas" else None
        with recorded_generations(monitor.calls if monitor else [], "saas"):
            trainer = build_trainer(config, monitor=monitor)
            if monitor:
                monitor.plugin = trainer.plugins.plugins["saas"]
            trainer.train()
        figures = {}
        if eval_size:
            test = TASKS["arithmetic"]("test", size=eval_size, seed=0)
            found = evaluate_tools(trainer.model, trainer.processing_class, test, greedy=False, seed=seed)
            figures = {name: found[name] for name in FIGURES}
    steps_logged = [e for e in trainer.state.log_history if "saas/calls" in e]
    if steps_logged:
        figures["train_calls"] = sum(e["saas/calls"] for e in steps_logged) / len(steps_logged)
    return ({**figures, **monitor.figures()} if monitor else figures), monitor


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=20, eval_size=200, methods=("saas", "grpo")).parse_args()
    compare(args, args.methods,
            lambda method, seed, folder: run(seed, args.steps, method, args.overrides, args.eval_size)[0],
            figures=(*FIGURES, "mismatches", "penalised_inside", "penalised_outside", "repeated"))


if __name__ == "__main__":
    main()
