"""The warm-up's targets: the policy's own attempt annotated with the functional tokens, and the reading of a
completion that uses them.

The authors annotate the policy's tree-search paths with functional tokens; on the built-in task the checks and
fixes come from the task's own formats (docs/roles.md): a right attempt is followed by ``<verify>`` and its check
(:func:`stackrl.tasks.judge_reply`, ending "Verdict: correct"); a wrong one by ``<verify>``, its check (ending
"Verdict: wrong" at the first wrong line) and ``<refine>`` with the reference solution.
"""

from __future__ import annotations

from stackrl.rewards import exact_match
from stackrl.tasks.roles import judge_reply, parse_verdict


def annotated(attempt: str, answer: str, solution: str, verify: str, refine: str) -> str | None:
    """The warm-up target for ``attempt``; ``None`` where the check cannot say why it is right or wrong (a malformed
    attempt, or a wrong answer whose every line is sound, such as a misread operand)."""
    attempt = attempt.strip()
    try:
        check = judge_reply(attempt)
    except (ValueError, IndexError):
        return None
    right = exact_match(attempt, answer) == 1.0
    if parse_verdict(check) is not right:
        return None
    text = f"{attempt}\n{verify}\n{check}"
    return text if right else f"{text}\n{refine}\n{solution}"


def functional_use(completion: str, verify: str, refine: str) -> str:
    """What a completion does with the tokens: "none", "verify" (a check only), "refine" (a check then a fix) or
    "malformed" (a ``<refine>`` without a ``<verify>`` before it)."""
    v, r = completion.find(verify), completion.find(refine)
    if r >= 0:
        return "refine" if 0 <= v < r else "malformed"
    return "verify" if v >= 0 else "none"
