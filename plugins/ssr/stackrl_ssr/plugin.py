"""SSR: the live policy judges each of its translations with a reference-free prompt — think, then a score from 0
to 100, with 0 for a translation into the wrong language, one that says something else, or several translations
at once — and the score (divided by 100) is the reward."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from stackrl.blocks.judges import JudgeReward, JudgeSettings, Scale

SCORING = (
    "Rate the translation below on a scale from 0 to 100, where 0 means it conveys none of the source's meaning "
    "and 100 means a perfect, fluent translation.\nGive 0 if the translation is not in the requested language, "
    "does not translate the source, or offers more than one translation.\n"
    "Source and instruction:\n{prompt}\nTranslation:\n{attempt}\n"
    "Think it through briefly, then finish with a line of the form \"Score: N\".\n"
)


@dataclass
class SSRConfig(JudgeSettings):
    # A score from 0 to 100 on the line the judgement ends with, asked for by the template.
    scale: Scale = Scale.score_100
    verdict_prefix: Optional[str] = "Score:"
    judge_template: str = SCORING
    max_new_tokens: int = 512


class SSR(JudgeReward):
    """SSR-Zero (Yang et al., 2025, arXiv 2505.16637) on the reward hook."""

    Config = SSRConfig
    section = "ssr"
