"""Afterburner's reward of a program (grpo/afterburner_reward_function.py in the authors' code): correctness
first, against the baseline's, then a bounded relative gain in run time, only for a program that passes.

    pass:   baseline passed  and program passes   ->  0.5   (kept passing)
            baseline failed  and program passes   ->  1.0   (a new pass)
            baseline passed  and program fails    -> -1.0   (a degradation)
            baseline failed  and program fails    -> -0.5   (still failing)
    speed:  tanh(scale * clip((t_baseline - t) / t_baseline, -1, 1))     (t: the program's median run time)
    reward: pass + speed_weight * speed    for a passing program with a baseline time, else pass
"""

from __future__ import annotations

import math
import statistics

KEPT, NEW_PASS, DEGRADED, STILL_FAILING = 0.5, 1.0, -1.0, -0.5
EPSILON = 1e-9  # the authors' guard against a zero baseline time


def pass_reward(baseline_passed: bool, passed: bool) -> float:
    """The correctness part: the program's pass against the baseline's (the table above)."""
    if passed:
        return KEPT if baseline_passed else NEW_PASS
    return DEGRADED if baseline_passed else STILL_FAILING


def speed_gain(baseline_s: float, program_s: float, scale: float = 1.0) -> float:
    """``tanh(scale * clip((baseline - program) / baseline, -1, 1))``: positive when the program is faster, 0.76 at
    most for a program taking no time at ``scale`` 1, -0.76 for one taking twice the baseline's or longer."""
    gain = (baseline_s - program_s) / (baseline_s + EPSILON)
    return math.tanh(scale * min(1.0, max(-1.0, gain)))


def program_reward(passed: bool, baseline_passed: bool, program_s: float | None, baseline_s: float | None,
                   speed_weight: float, scale: float) -> float:
    """One program's reward: its pass part, plus ``speed_weight`` times its speed gain only when it passes and
    both times are known (a failing program's time is never read)."""
    reward = pass_reward(baseline_passed, passed)
    if passed and program_s is not None and baseline_s is not None:
        reward += speed_weight * speed_gain(baseline_s, program_s, scale)
    return reward


def run_time(times: list[float]) -> float:
    """A program's time: the median of its timed runs (one slow run, another process taking the core, moves it
    little)."""
    return statistics.median(times)
