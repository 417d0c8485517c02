"""Self-judging: the live policy checks each of its solutions — working through it, then a verdict line — and the
verdict (1 correct, 0 wrong) is the reward; no reference solution is read. A judgement without a verdict scores
nothing (``None``), so the completion counts only through the run's other rewards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from stackrl.judges import JudgeReward, JudgeSettings, Mode, Scale

VERIFICATION = (
    "Problem:\n{prompt}\nProposed solution:\n{attempt}\n"
    "Check the solution step by step without trusting it, then finish with a line \"Verdict: correct\" or "
    "\"Verdict: wrong\".\n"
)


@dataclass
class SelfJudgeConfig(JudgeSettings):
    judge_template: str = VERIFICATION
    scale: Scale = Scale.correct_wrong
    mode: Mode = Mode.generate
    verdict_prefix: Optional[str] = "Verdict:"
    max_new_tokens: int = 1024


class SelfJudge(JudgeReward):
    """Self-judging RL (Simonds et al., 2025, arXiv 2505.08827) on the reward hook."""

    Config = SelfJudgeConfig
    section = "selfjudge"
