"""Venus (Afterburner): GRPO rewarding a program by running it, correctness first, then its speed.

Paper: "Afterburner: Reinforcement Learning Facilitates Self-Improving Code Efficiency Optimization", Mingzhe Du,
Luu Anh Tuan, Yue Liu, Yuhao Qing, Dong Huang, Xinyi He, Qian Liu, Zejun Ma, See-Kiong Ng, arXiv 2505.23387 (the
Venus dataset). Code followed: github.com/Elfsong/Afterburner@ee3f90e (grpo/afterburner_reward_function.py).

Each completion holds a program (its last fenced code block, else the whole completion). It runs in the sandbox (``stackrl.blocks.sandbox``) once to be judged (a clean exit
printing exactly the row's answer); a passing one runs ``repeats`` times in all and its time is the median of its
CPU times. Its reward is the authors' pass reward against a baseline's pass (``efficiency``), plus, for a passing
program, ``speed_weight`` times tanh of its clipped relative gain over the baseline's time. The baseline is the
problem's reference program, timed in the same rounds (``baseline: reference``; the authors' "original solution"),
or the median time of the group's passing programs (``baseline: group``). The whole measurement is made on the
main process and broadcast (``measured_once``), so every process trains on the same rewards.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import stackrl
from stackrl.blocks.sandbox import Sandbox, check_isolation, measured_once, program_of
from stackrl_venus.efficiency import program_reward, run_time
from stackrl_venus.timing import measure

BASELINES = ("reference", "group")
TIMERS = ("cpu", "wall")


@dataclass
class VenusConfig:
    """The config section ``venus:``."""

    baseline: str = "reference"  # reference: the problem's reference program, timed alongside (the authors' original
    # solution); group: the median time of the group's passing programs
    reference_column: str = ""  # the column of each problem's reference program; "": the built-in arithmetic
    # task's program written from the question (stackrl.tasks.programs.write_program)
    question_column: str = "question"  # where the built-in task's program is written from (reference_column "")
    answer_column: str = "answer"  # what a passing program prints
    repeats: int = 5  # timed runs of each passing program (and baseline); its time is their median (ours: the
    # authors time one run of the tests repeated 64 times)
    timer: str = "cpu"  # cpu: the program's CPU time (ExecResult.cpu_s); wall: its wall-clock time (the authors')
    speed_weight: float = 0.5  # the speed term's weight for a passing program (the authors' 0.5)
    scale: float = 1.0  # inside the tanh (the authors' 1.0)
    timeout_s: float = 5.0  # each run's wall-clock limit
    cpu_s: float = 5.0  # each run's CPU-time limit

    def __post_init__(self):
        if self.baseline not in BASELINES:
            raise stackrl.ConfigError(f"venus.baseline: must be one of {', '.join(BASELINES)}, not {self.baseline!r}")
        if self.timer not in TIMERS:
            raise stackrl.ConfigError(f"venus.timer: must be one of {', '.join(TIMERS)}, not {self.timer!r}")
        if self.repeats < 1:
            raise stackrl.ConfigError(f"venus.repeats: must be at least 1, not {self.repeats}")
        if self.speed_weight < 0:
            raise stackrl.ConfigError(f"venus.speed_weight: must be non-negative, not {self.speed_weight}")
        if not self.scale > 0:
            raise stackrl.ConfigError(f"venus.scale: must be positive, not {self.scale}")
        for key in ("timeout_s", "cpu_s"):
            if not getattr(self, key) > 0:
                raise stackrl.ConfigError(f"venus.{key}: must be positive, not {getattr(self, key)}")
        if not self.answer_column:
            raise stackrl.ConfigError("venus.answer_column: must name a column")


class Venus(stackrl.Plugin):
    """Rewards each program by its pass against the baseline's and, passing, by its median run time against the
    baseline's, measured on one process and shared."""

    Config = VenusConfig
    activity = "completions were programs that printed the answer, timed"

    def __init__(self, config=None):
        super().__init__(config)
        self.last: dict = {}  # the last reward stage's measurement and rewards, to inspect

    def check_run(self, run):
        check_isolation(run.sandbox)
        config = self.config
        if config.baseline == "reference" and not config.reference_column and run.source != "arithmetic":
            raise stackrl.ConfigError(
                f"venus.reference_column: needed with data.source {run.source!r} (only the built-in arithmetic "
                "task's reference program is written by the plugin); or venus.baseline: group")
        run.need_column("venus.answer_column", config.answer_column, "the answer a program must print")
        if config.baseline == "reference":
            key = "reference_column" if config.reference_column else "question_column"
            run.need_column(f"venus.{key}", getattr(config, key), "from which the baseline program is taken")

    @stackrl.hookimpl
    def reward(self, ctx):
        rollout, config = ctx.rollout, self.config
        answers = rollout.columns.get(config.answer_column)
        if answers is None:
            ctx.acted(0, of=len(rollout), hint=f"venus.answer_column {config.answer_column!r} is no column")
            return [None] * len(rollout)
        size = rollout.group_size
        scored = [start for start in range(0, len(rollout), size) if answers[start]]
        references = self._references(rollout, scored) if config.baseline == "reference" else {}
        programs, expected, owners = [], [], []  # owners: a row, or ("reference", group start)
        for start in scored:
            for row in range(start, start + size):
                programs.append(program_of(rollout.completions[row]))
                expected.append(str(answers[start]))
                owners.append(row)
            if references.get(start) is not None:
                programs.append(references[start])
                expected.append(str(answers[start]))
                owners.append(("reference", start))
        if programs:
            measurement = measured_once(lambda: measure(  # the other processes run nothing meanwhile
                Sandbox.of(ctx), programs, expected, repeats=config.repeats, timer=config.timer,
                timeout_s=config.timeout_s, cpu_s=config.cpu_s), what="venus")
        else:
            measurement = None
        timed = dict(zip(owners, measurement.programs)) if measurement else {}
        rewards: list[float | None] = [None] * len(rollout)
        baselines = {}
        for start in scored:
            rows = range(start, start + size)
            baseline_passed, baseline_s = self._baseline(timed, start, rows)
            baselines[start] = (baseline_passed, baseline_s)
            for row in rows:
                program = timed[row]
                rewards[row] = program_reward(program.passed, baseline_passed,
                                              run_time(program.times) if program.passed else None, baseline_s,
                                              config.speed_weight, config.scale)
        passing = [timed[row] for start in scored for row in range(start, start + size) if timed[row].passed]
        ctx.acted(len(passing), of=len(rollout), hint="no program printed its answer: the prompts must ask for a "
                  "program (data.prompt_template: '{question}Program:\\n') of a model that writes one "
                  "(stackrl/arith-code)")
        self.last = {"timed": timed, "baselines": baselines, "rewards": rewards, "measurement": measurement}
        if measurement is not None:
            ctx.log("pass_rate", len(passing) / (len(scored) * size))
            ctx.log("sandbox_s", measurement.seconds)
            ctx.log("runs", float(measurement.runs))
            if passing:
                ctx.log("median_ms", 1000 * statistics.median(run_time(p.times) for p in passing))
            known = [b for b in baselines.values() if b[1] is not None]
            if known:
                ctx.log("baseline_ms", 1000 * statistics.median(b[1] for b in known))
        return rewards

    def _references(self, rollout, scored: list[int]) -> dict[int, str | None]:
        """Each scored group's reference program: its column's, or the built-in task's written from the question
        (``None`` where the question is not one the built-in task can write a program for)."""
        config = self.config
        if config.reference_column:
            column = rollout.columns.get(config.reference_column) or [None] * len(rollout)
            return {start: column[start] or None for start in scored}
        from stackrl.tasks.programs import write_program

        questions = rollout.columns.get(config.question_column) or [None] * len(rollout)
        references = {}
        for start in scored:
            try:
                references[start] = write_program(questions[start]) if questions[start] else None
            except (ValueError, KeyError, IndexError, AttributeError):
                references[start] = None
        return references

    def _baseline(self, timed: dict, start: int, rows: range) -> tuple[bool, float | None]:
        """Whether the group's baseline passes, and its time (``None``: no passing baseline to compare with)."""
        if self.config.baseline == "group":
            times = [run_time(timed[row].times) for row in rows if timed[row].passed]
            return bool(times), statistics.median(times) if times else None
        reference = timed.get(("reference", start))
        if reference is None or not reference.passed:
            return False, None
        return True, run_time(reference.times)
