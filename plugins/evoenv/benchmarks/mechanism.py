"""EvoEnv's filter on the real sandbox and the built-in solver: of four hand-written environments (a good one, a
non-deterministic one, one that crashes, one too easy for stackrl/arith-tiny) exactly the good one is kept and its
instances, with its answers, join the pool; then a short run of configs/recipes/evoenv-cpu.yaml, where the model's
own proposals are screened.

``screened(seed)``: a trainer of the CPU recipe is built, ``train_begin`` adds the request row, the four programs
are handed to the plugin's reward hook as the proposer's completions at step ``seed`` (their seed), its solver is
the policy (``ctx.generate``), and ``post_step`` adds the kept instances to the pool. It returns each
environment's stage failed, pass rate and reward, and the pool's solver rows with their answers.

``run(seed, steps)``: trains the recipe and reads, per proposer row, the stage its program failed. No built-in model
writes environment programs, so there is no accuracy to compare with plain GRPO (README).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/evoenv/benchmarks/mechanism.py --seeds 0 1 2 --steps 4
"""

from __future__ import annotations

import tempfile
from pathlib import Path

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "evoenv-cpu.yaml"

_SEEDED = "import json, random, sys\nrng = random.Random(int(sys.argv[1]))\n"
_UNSEEDED = "import json, random, sys\nrng = random.Random()\n"  # seeded from the system's entropy
# Chains of four operations on one-digit operands, written as the task writes them: the solver is right on some.
_CHAINS = '''for _ in range(int(sys.argv[2])):
    value = rng.randint(2, 9)
    text = str(value)
    for step in range(4):
        op = rng.choice("+*-")
        operand = rng.randint(2, 9) if op == "*" else rng.randint(1, 9)
        if op == "-" and operand > value:
            op = "+"
        value = value + operand if op == "+" else value - operand if op == "-" else value * operand
        text = f"{text} {op} {operand}" if step == 0 else f"({text}) {op} {operand}"
    print(json.dumps({"question": f"What is {text}?", "answer": value}))
'''
ENVIRONMENTS = {
    "good": _SEEDED + _CHAINS,
    # the same instances' kind, drawn without the seed: two runs print different instances
    "nondeterministic": _UNSEEDED + _CHAINS,
    # the good one's instances, then an error: it does not end cleanly
    "crashes": _SEEDED + _CHAINS + "print(1 / 0)\n",
    # a sum of small numbers doubled: the solver is nearly always right
    "too_easy": _SEEDED + '''for _ in range(int(sys.argv[2])):
    a, b = rng.randint(1, 4), rng.randint(1, 4)
    print(json.dumps({"question": f"What is ({a} + {b}) * 2?", "answer": (a + b) * 2}))
''',
}


class _Screenings:
    """A run's monitor: the stage each proposer row's program failed (``None``: kept)."""

    def __init__(self):
        self.trainer = None
        self.failed: list = []

    def __call__(self, hook, plugin, kwargs, result):
        if hook == "reward" and plugin == "evoenv" and kwargs["ctx"].training:
            self.failed.extend(s.failed for s in self.trainer.plugins.plugins["evoenv"].last)


def screened(seed: int = 0, overrides=()) -> dict:
    """The four environments through the plugin at step ``seed``: by name, the stage failed, the pass rate and the
    reward; the pool's solver rows (question, answer) after the step; the instances the good one printed."""
    import torch

    from stackrl import RewardContext, Rollout
    from stackrl.pool import CATEGORY_COLUMN
    from stackrl.run import build_trainer
    from stackrl.testing.benchmark import one_thread
    from stackrl.testing.heldout import recipe_config
    from stackrl_evoenv.plugin import ANSWER_COLUMN

    names = list(ENVIRONMENTS)
    with one_thread(), tempfile.TemporaryDirectory() as out:
        torch.manual_seed(seed)
        trainer = build_trainer(recipe_config(RECIPE, plugins=True, seed=seed, steps=1, output_dir=out,
                                              overrides=overrides))
        plugin = trainer.plugins.plugins["evoenv"]
        trainer.notify("train_begin")
        pool = trainer.pool
        request = next(pool.row(r)["prompt"] for r in pool.active_rows() if pool.stats(r).category == "evoenv/propose")
        rollout = Rollout([request] * len(names), [f"```python\n{ENVIRONMENTS[n]}```" for n in names],
                          [[1]] * len(names), [[2]] * len(names), {CATEGORY_COLUMN: ["evoenv/propose"] * len(names)},
                          group_size=len(names))
        trainer.state.global_step = seed
        trainer.model.train()  # a training step's reward stage: its kept instances wait for post_step
        ctx = trainer._context(RewardContext, rollout=rollout, _plugin="evoenv")
        rewards = plugin.reward(ctx=ctx)
        screenings = list(plugin.last)
        trainer.notify("post_step")
        solver = [pool.row(r) for r in pool.active_rows() if pool.stats(r).category == "evoenv/solve"]
    return {
        "failed": {n: s.failed for n, s in zip(names, screenings)},
        "pass_rate": {n: s.pass_rate for n, s in zip(names, screenings)},
        "reward": dict(zip(names, rewards)),
        "why": {n: s.why for n, s in zip(names, screenings)},
        "pool": [(row["question"], row[ANSWER_COLUMN]) for row in solver],
        "good_instances": [(i.question, i.answer) for i in screenings[0].instances],
    }


def run(seed: int = 0, steps: int = 4, overrides=(), screen: bool = True) -> dict:
    """The screening of the four environments at ``seed`` (with ``screen``), then ``steps`` steps of the recipe: the
    share of the model's proposals kept and failing at each stage."""
    from stackrl.run import build_trainer
    from stackrl.testing.benchmark import one_thread
    from stackrl.testing.heldout import recipe_config
    from stackrl_evoenv.screening import STAGES

    result = {}
    if screen:
        figures = screened(seed, overrides)
        ok = figures["failed"] == {"good": None, "nondeterministic": "deterministic", "crashes": "runs",
                                   "too_easy": "band"}
        result = {"right_kept": float(ok), "good_pass": figures["pass_rate"]["good"],
                  "easy_pass": figures["pass_rate"]["too_easy"], "pooled": float(len(figures["pool"]))}
    if steps:
        monitor = _Screenings()
        with one_thread(), tempfile.TemporaryDirectory() as out:
            trainer = build_trainer(recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=out,
                                                  overrides=overrides), monitor=monitor)
            monitor.trainer = trainer
            trainer.train()
        total = max(len(monitor.failed), 1)
        result["proposals"] = float(len(monitor.failed))
        result["kept"] = sum(f is None for f in monitor.failed) / total
        for stage in STAGES:
            result[f"failed_{stage}"] = sum(f == stage for f in monitor.failed) / total
    return result


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=4).parse_args()
    compare(args, ["evoenv"], lambda method, seed, folder: run(seed, args.steps, args.overrides),
            figures=("right_kept", "good_pass", "easy_pass", "pooled", "proposals", "kept", "failed_runs",
                     "failed_deterministic", "failed_checkable", "failed_band"))


if __name__ == "__main__":
    main()
