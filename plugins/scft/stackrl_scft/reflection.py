"""RLERR's reward: the outcome plus the effective-reflection score of the row's self-critique.

The authors score a whole trajectory's reflections with a strong LLM judge (GPT-4o) on five principles, P1
truthfulness, P2 constructiveness, P3 specificity, P4 substantiveness, P5 information gain, on a 0-10 rubric:
0-2 when P1 fails (a right step called wrong, a wrong one confirmed), 3-5 for a superficial reflection (the same
wrong logic repeated, an error found but not fixed, a vague "something is wrong"), 6-8 for an effective correction
(the error found where it is and fixed), 9-10 for a profound one. Here the check of the built-in task stands in for
the reflection and its case is read off the reference answer and the task's checker, no judge asked:

- ``silent``: the check gives no verdict;
- ``hallucinated``: its verdict contradicts the answer it checks (P1);
- ``superficial``: a right "wrong" whose correction is wrong, or (with ``locate``) whose check stopped at a line
  other than the attempt's first wrong one (P2, P3);
- ``corrected``: a right "wrong" at the right line, then a right answer;
- ``confirmed``: a right "correct", every line worked out afresh on the way (P4).

Each case has its score (the config's ``score_<case>``); the row's reward is ``outcome_weight`` times its final
answer's correctness plus ``reflection_weight * score / 10``.
"""

from __future__ import annotations

from collections.abc import Sequence

from stackrl.blocks.turns import ANSWER, VERIFY, Segment
from stackrl.tasks import first_wrong_line, judged_wrong_step
from stackrl_scft.critiques import row_outcomes

CASES = ("silent", "hallucinated", "superficial", "corrected", "confirmed")


def reflection_case(first_right: bool, verdict: bool | None, final_right: bool, located: bool) -> str:
    """The rubric's case of a check (above): ``located`` whether a "wrong" stopped at the attempt's wrong line."""
    if verdict is None:
        return "silent"
    if verdict != first_right:
        return "hallucinated"
    if first_right:
        return "confirmed"
    return "corrected" if final_right and located else "superficial"


def located(segments: Sequence[Segment]) -> bool:
    """Whether the row's first check stops at its answer's first wrong line (the task's checker); an answer whose
    lines all hold (wrong by its choice of operands) has no line to find, and any stop counts."""
    answer = next(s for s in segments if s.kind == ANSWER)
    check = next((s for s in segments if s.kind == VERIFY), None)
    lines = [line for line in answer.text.strip().splitlines() if line.strip()]
    wrong = first_wrong_line(lines)
    return wrong is None or (check is not None and judged_wrong_step(check.text, len(lines)) == wrong)


def row_reward(segments: Sequence[Segment], answer, settings) -> tuple[float, str, bool]:
    """A row's reward, its case and whether its final answer is right, under ``settings`` (the plugin's config)."""
    first_right, verdict, final_right = row_outcomes(segments, answer, settings.is_correct)
    case = reflection_case(first_right, verdict, final_right, not settings.locate or located(segments))
    score = getattr(settings, f"score_{case}")
    return settings.outcome_weight * final_right + settings.reflection_weight * score / 10.0, case, final_right
