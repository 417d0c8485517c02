"""CoMAS's interaction rewards: a scorer reads a solution and a critique of it and gives a score; the solution earns
the normalised score, the critique its complement (zero-sum).

The authors' scorer gives an integer s from 1 (the critique found a fatal mistake) to 3 (the solution is right and
none of the critique's points holds), normalised to (s - 1) / 2 in [0, 1]. Here the scorer is the built-in task's
judge role reading the critique's check lines and giving the verdict, so the normalised score is 1 for "correct",
0 for "wrong" (or P(correct) by likelihood); ``None`` when no verdict can be read.
"""

from __future__ import annotations

from stackrl.tasks import judge_prompt

VERDICT_MARK = "Verdict:"


def solution_reward(score: float | None, malformed: float = 0.0) -> float:
    """A solution's reward: the normalised score its critique led the scorer to give; ``malformed`` without one."""
    return malformed if score is None else score


def critique_reward(score: float | None, malformed: float = 0.0) -> float:
    """A critique's reward: one minus the normalised score of the solution it critiqued (the critique earns what the
    solution loses); ``malformed`` without a score."""
    return malformed if score is None else 1.0 - score


def check_lines(critique: str) -> str:
    """What the scorer reads of a critique: its check lines, the text before its first verdict line (its own
    verdict left out, so the scorer decides), ending in a line break where there is any."""
    checks = critique.split(VERDICT_MARK, 1)[0]
    return checks if not checks or checks.endswith("\n") else checks + "\n"


def scorer_prompt(question: str, solution: str, critique: str) -> str:
    """The scorer's prompt: the judge prompt of ``solution`` (``stackrl.tasks.judge_prompt``) followed by the
    critique's check lines; the scorer goes on with the verdict."""
    return judge_prompt(question, solution) + check_lines(critique)
