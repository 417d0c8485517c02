"""DARC's pseudo-label rule: the majority answer of a document-augmented teacher's samples, kept only where enough of
them agree, and the solver's reward, agreement with it.

The authors (``verl/trainer/ray_trainer.py``, the self-vote labelling): ``label_n`` = 8 teacher samples, empty
answers dropped before the count, a tie to the answer written first, an answer "none" no label, and the vote share
the majority's count over all samples (``self_vote_ratio_use_all``); a row whose share is below
``label_vote_threshold`` = 0.3 has its advantage zeroed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from stackrl.answers import GroupAnswers, equivalent, normalise
from stackrl.blocks.selfplay import majority


@dataclass(frozen=True)
class Label:
    """A question's pseudo-label: ``answer`` (``None``: no label) and ``share``, the teacher samples that give the
    majority answer over all samples."""

    answer: Optional[str]
    share: float


def pseudo_label(group: GroupAnswers, threshold: float) -> Label:
    """The teacher's majority answer over ``group`` (its samples' clustered answers; unanswered samples do not vote
    but count in the share), or no label where it is "none" or fewer than ``threshold`` of the samples give it."""
    vote = majority(group, unanswered_votes=False)
    share = vote.agreement
    if vote.answer is None or normalise(vote.answer).lower() == "none" or share < threshold:
        return Label(None, share)
    return Label(vote.answer, share)


def agreement_rewards(answers: list, label: Label, math_verify: bool = True) -> list:
    """The solver's reward of each of a group's ``answers``: 1.0 where it is equivalent to the label, 0.0 where not
    (no answer: 0.0); ``None`` for every row when the question has no label (unscored: GRPO learns nothing from it,
    as the authors' zeroed advantages)."""
    if label.answer is None:
        return [None] * len(answers)
    return [float(a is not None and equivalent(a, label.answer, math_verify)) for a in answers]
