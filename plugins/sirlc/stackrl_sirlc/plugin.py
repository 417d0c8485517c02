"""SIRLC: the same model answers unlabeled questions and grades the answers; reinforcement learning maximises the
grade. By default the grade is the likelihood judgement P(yes) / (P(yes) + P(no)) of a correctness question."""

from __future__ import annotations

from dataclasses import dataclass

from stackrl.blocks.judges import JudgeReward, JudgeSettings, Mode, Scale

CORRECTNESS = (
    "Here is a question and an answer to it.\nQuestion: {prompt}\nAnswer: {attempt}\n"
    "Is the answer to the question correct? Reply yes or no.\nReply:"
)
QUALITY = (
    "Here is a task and a response to it.\nTask: {prompt}\nResponse: {attempt}\n"
    "Is the response a good one for the task? Reply yes or no.\nReply:"
)


@dataclass
class SIRLCConfig(JudgeSettings):
    judge_template: str = CORRECTNESS  # stackrl_sirlc.QUALITY for generation tasks (summaries, translations)
    scale: Scale = Scale.yes_no
    mode: Mode = Mode.likelihood


class SIRLC(JudgeReward):
    """SIRLC (Pang et al., ICLR 2024, arXiv 2305.14483) on the reward hook."""

    Config = SIRLCConfig
    section = "sirlc"
    activity = "completions got a well-formed grade from the judge"
