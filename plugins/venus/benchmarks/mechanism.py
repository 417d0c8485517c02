"""Venus on the built-in code role: programs of known cost ranked by their median CPU time, failing ones penalised
whatever their speed, then a short run of configs/recipes/venus-cpu.yaml against the pass reward alone.

``constructed(...)``: one problem of the task and a group of hand-written programs through the plugin's reward hook
on the real sandbox: the task's own program, the same after a loop of ``LOOPS[0]`` and of ``LOOPS[1]`` iterations
(correct, slower by known amounts), and two printing a wrong answer (one at once, one after the long loop). It
returns the rewards, each program's run times and the reference's, so that the order and the formula can be
checked by hand.

``run(...)``: trains the CPU recipe (stackrl/arith-code writing programs after "Program:") and reads, per step, the
share of programs that pass, the median CPU time of the passing ones over the reference's, the sandbox's seconds
and the step's, against the same recipe with ``venus.speed_weight=0`` (GRPO on the pass reward alone: plain GRPO
has no reward here, no built-in reward reading a program).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/venus/benchmarks/mechanism.py --seeds 0 1 2 --steps 16
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "venus-cpu.yaml"
LOOPS = (300_000, 1_500_000)  # about 4 and 20 ms of CPU on an idle core, beside a run's 7 ms of start-up


class _Rollout:
    def __init__(self, completions, columns):
        self.completions, self.columns, self.group_size = completions, columns, len(completions)

    def __len__(self):
        return len(self.completions)


class _Context:
    sandbox = None  # the sandbox section's defaults: bubblewrap or unshare, refused where neither works

    def __init__(self, rollout):
        self.rollout, self.logged, self.acted_on = rollout, {}, None

    def log(self, name, value):
        self.logged[name] = value

    def acted(self, n, *, of, hint=None):
        self.acted_on = (n, of)


def constructed(repeats: int = 5, seed: int = 0) -> dict:
    """The constructed group's rewards, in the order ``names``, with each program's and the reference's run times."""
    from stackrl.tasks.arithmetic import make_dataset
    from stackrl.tasks.programs import write_program
    from stackrl.testing.fixtures import make_plugin

    row = make_dataset("train", 1, seed=seed)[0]
    program = write_program(row["question"])
    wrong = program.rsplit("\n", 1)[0] + f"\nprint({program.rsplit('(', 1)[1].rstrip(')')} + 1)"
    loop = "for _ in range({}):\n    pass\n"
    programs = {
        "plain": program,
        "short_loop": loop.format(LOOPS[0]) + program,
        "long_loop": loop.format(LOOPS[1]) + program,
        "wrong_fast": wrong,
        "wrong_slow": loop.format(LOOPS[1]) + wrong,
    }
    plugin = make_plugin("venus", repeats=repeats)
    ctx = _Context(_Rollout(list(programs.values()), {"question": [row["question"]] * len(programs),
                                                       "answer": [row["answer"]] * len(programs)}))
    rewards = plugin.reward(ctx=ctx)
    timed = plugin.last["timed"]
    return {"names": list(programs), "rewards": rewards, "passed": [timed[i].passed for i in range(len(programs))],
            "times": [timed[i].times for i in range(len(programs))], "reference_times": timed[("reference", 0)].times,
            "reference_passed": timed[("reference", 0)].passed}


class Steps:
    """A run's monitor: each venus reward call's rewards and its measurement."""

    def __init__(self):
        self.trainer = None
        self.calls: list[dict] = []

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "reward" or plugin != "venus" or result is None:
            return
        last = self.trainer.plugins.plugins["venus"].last
        timed = last["timed"]
        rows = [i for i in range(len(result)) if result[i] is not None]
        self.calls.append({
            "rewards": [result[i] for i in rows], "passed": [timed[i].passed for i in rows],
            "times": [timed[i].times for i in rows], "baselines": last["baselines"],
            "sandbox_s": last["measurement"].seconds if last["measurement"] else 0.0, "at": time.perf_counter(),
        })


def run(seed: int = 0, steps: int = 2, method: str = "venus", overrides=()) -> tuple[dict, Steps]:
    """Train the CPU recipe ``steps`` steps (``method`` ``pass_only``: with ``venus.speed_weight=0``) and return its
    figures and monitor: ``pass_first``/``pass_last`` (the share of passing programs over the first and the last
    quarter of the steps), ``time_ratio_last`` (median over those steps of the passing programs' median CPU time
    over the reference's), ``sandbox_share`` (the sandbox's seconds over the training's)."""
    from stackrl.run import build_trainer
    from stackrl.testing.benchmark import one_thread
    from stackrl.testing.heldout import recipe_config

    steps_seen = Steps()
    extra = ["venus.speed_weight=0"] if method == "pass_only" else []
    with tempfile.TemporaryDirectory() as out, one_thread():
        config = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=out,
                               overrides=[*overrides, *extra, "trainer.disable_tqdm=true"])
        trainer = build_trainer(config, monitor=steps_seen)
        steps_seen.trainer = trainer
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
    calls, quarter = steps_seen.calls, max(1, len(steps_seen.calls) // 4)
    share = lambda part: statistics.mean(sum(c["passed"]) / len(c["passed"]) for c in part)  # noqa: E731
    ratios = []
    for call in calls[-quarter:]:
        times = [statistics.median(t) for t, p in zip(call["times"], call["passed"]) if p]
        references = [b[1] for b in call["baselines"].values() if b[1] is not None]
        if times and references:
            ratios.append(statistics.median(times) / statistics.median(references))
    figures = {"pass_first": share(calls[:quarter]), "pass_last": share(calls[-quarter:]),
               "time_ratio_last": statistics.median(ratios) if ratios else float("nan"),
               "sandbox_share": sum(c["sandbox_s"] for c in calls) / seconds, "step_s": seconds / len(calls)}
    return figures, steps_seen


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=16, methods=("venus", "pass_only")).parse_args()
    compare(args, args.methods, lambda method, seed, folder: run(seed, args.steps, method, args.overrides)[0],
            figures=("pass_first", "pass_last", "time_ratio_last", "sandbox_share", "step_s"))


if __name__ == "__main__":
    main()
