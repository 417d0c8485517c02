"""RISE's two rewards: a solution's by its final answer, a critique's by whether its verdict is right."""

from __future__ import annotations

from stackrl.rewards import OUTCOME_REWARDS, extract_answer
from stackrl.tasks import parse_verdict
from stackrl_rise.config import RiseConfig


def solution_score(text: str, answer: str, config: RiseConfig) -> float:
    """``correct`` for the right final answer, ``wrong`` for another, ``unanswered`` when there is none."""
    if extract_answer(text) is None:
        return config.unanswered
    return config.correct if OUTCOME_REWARDS[config.metric](text, answer) else config.wrong


def critique_score(text: str, attempt_correct: bool, config: RiseConfig) -> float:
    """``agree`` when the critique's verdict (``stackrl.tasks.parse_verdict``) matches the attempt's real
    correctness, ``disagree`` when not, ``no_verdict`` when it gave none or is shorter than ``min_critique_chars``."""
    verdict = parse_verdict(text)
    if verdict is None or len(text) < config.min_critique_chars:
        return config.no_verdict
    return config.agree if verdict == attempt_correct else config.disagree
