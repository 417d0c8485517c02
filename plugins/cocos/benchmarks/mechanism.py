"""CoCoS on the built-in code role: hand-built trajectories through the reward hook on the real sandbox, then
short runs of configs/recipes/cocos-cpu.yaml against GRPO on the final turn's pass alone.

``constructed(...)``: one problem of the task and five two-turn trajectories of hand-written programs (the task's
own program, one with a slip in its last line, which passes the tests of the lines before it, and one with a slip in
its first line, which passes none), rewarded by the plugin's hook with its real sandbox: kept right, fixed at turn
2, broken at turn 2, a partial program finished, wrong twice. It returns each turn's score and each reward, to be
checked by hand.

``run(...)``: trains the CPU recipe (stackrl/arith-code: a program, "Try again.", a second program) and reads per
step the first and second turns' pass shares and the fix rate (wrong first programs whose second passes), against
the same rollout rewarded by the final turn's pass alone (``cocos.gamma=1 cocos.fine_grained=false``: the
accumulated reward telescopes to r_2, 0 or 1; plain GRPO has no reward here, no built-in reward reading a program).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/cocos/benchmarks/mechanism.py --seeds 0 1 2 --steps 16
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "cocos-cpu.yaml"
FINAL_PASS = ("cocos.gamma=1", "cocos.fine_grained=false")  # the baseline: GRPO on the final turn's pass


class Recorded:
    """A reward stage's context for hand-built rows: the rollout, the real sandbox (the section's defaults), and what
    the plugin logs and reports acting on."""

    sandbox = None  # bubblewrap or unshare, refused where neither works

    def __init__(self, completions: list, columns: dict, group_size: int | None = None):
        from stackrl.context import Rollout

        n = len(completions)
        self.rollout = Rollout(prompts=[""] * n, completions=list(completions), prompt_ids=[[]] * n,
                               completion_ids=[[]] * n, columns=columns, group_size=group_size or n)
        self.logged: dict = {}
        self.acted_on = None

    def log(self, name, value):
        self.logged[name] = value

    def acted(self, n, *, of, hint=None):
        self.acted_on = (n, of)


def slipped(program: str, line: int) -> str:
    """``program`` with the last operand of its line ``line`` one more: a copying slip."""
    lines = program.split("\n")
    head, operand = lines[line].rsplit(" ", 1)
    lines[line] = f"{head} {int(operand) + 1}"
    return "\n".join(lines)


def constructed(seed: int = 0, **settings) -> dict:
    """The five trajectories' names, turn scores and rewards, the problem's tests, and the plugin's logged figures."""
    from stackrl.blocks.turns import SEGMENTS_COLUMN, Segment
    from stackrl.tasks.arithmetic import make_dataset
    from stackrl.tasks.programs import write_program
    from stackrl.testing.fixtures import make_plugin
    from stackrl_cocos.rewards import arithmetic_tests

    row = next(r for r in make_dataset("train", 32, seed=seed) if r["question"].count("(") >= 2)  # 3 lines or more
    right = write_program(row["question"])
    last_slip, first_slip = slipped(right, -2), slipped(right, 0)
    trajectories = {"kept_right": (right, right), "fixed": (first_slip, right), "broken": (right, first_slip),
                    "partial_finished": (last_slip, right), "wrong_twice": (first_slip, last_slip)}
    segments = [[Segment("answer", t, 0, 1, text) for t, text in enumerate(pair)] for pair in trajectories.values()]
    n = len(trajectories)
    plugin = make_plugin("cocos", **settings)
    ctx = Recorded(["\nTry again.\nProgram:\n".join(p) for p in trajectories.values()],
                   {"question": [row["question"]] * n, "answer": [row["answer"]] * n, SEGMENTS_COLUMN: segments})
    rewards = plugin.reward(ctx=ctx)
    return {"names": list(trajectories), "scores": plugin.last["turn_scores"], "rewards": rewards,
            "tests": arithmetic_tests(row["question"], row["answer"]), "logged": ctx.logged, "acted": ctx.acted_on}


class Steps:
    """A run's monitor: each cocos reward call's turn scores and rewards."""

    def __init__(self):
        self.trainer = None
        self.calls: list[dict] = []

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "reward" or plugin != "cocos" or result is None:
            return
        last = self.trainer.plugins.plugins["cocos"].last
        self.calls.append({"scores": [s for s in last["turn_scores"] if s], "rewards": [r for r in result if r is not None]})


def run(seed: int = 0, steps: int = 2, method: str = "cocos", overrides=()) -> tuple[dict, Steps]:
    """Train the CPU recipe ``steps`` steps (``method`` ``final_pass``: rewarded by the final turn's pass alone) and
    return its figures and monitor: over the first and the last quarter of the steps, the first turn's pass share
    (``first_*``), the second's (``second_*``) and the fix rate (wrong first programs whose second passes)."""
    from stackrl.run import build_trainer
    from stackrl.testing.benchmark import one_thread
    from stackrl.testing.heldout import recipe_config

    steps_seen = Steps()
    extra = list(FINAL_PASS) if method == "final_pass" else []
    with tempfile.TemporaryDirectory() as out, one_thread():
        config = recipe_config(RECIPE, plugins=True, seed=seed, steps=steps, output_dir=out,
                               overrides=[*overrides, *extra, "trainer.disable_tqdm=true"])
        trainer = build_trainer(config, monitor=steps_seen)
        steps_seen.trainer = trainer
        trainer.train()
    calls, quarter = steps_seen.calls, max(1, len(steps_seen.calls) // 4)

    def share(part, turn):
        return statistics.mean(statistics.mean(s[turn] == 1.0 for s in c["scores"]) for c in part)

    def fixes(part):
        wrong = [s for c in part for s in c["scores"] if s[0] < 1.0]
        return sum(s[-1] == 1.0 for s in wrong) / len(wrong) if wrong else float("nan")

    figures = {}
    for name, part in (("first", calls[:quarter]), ("last", calls[-quarter:])):
        figures[f"turn1_{name}"], figures[f"turn2_{name}"] = share(part, 0), share(part, -1)
        figures[f"fix_{name}"] = fixes(part)
    return figures, steps_seen


def main():
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(__doc__.splitlines()[0], steps=16, methods=("cocos", "final_pass")).parse_args()
    compare(args, args.methods, lambda method, seed, folder: run(seed, args.steps, method, args.overrides)[0],
            figures=("turn1_first", "turn1_last", "turn2_first", "turn2_last", "fix_first", "fix_last"))


if __name__ == "__main__":
    main()
