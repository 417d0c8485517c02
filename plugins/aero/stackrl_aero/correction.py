"""Independent Counterfactual Correction: the pseudo-label of a question in the ZPD, or none.

The two largest answer clusters are each taken to be wrong: one attempt of each (its first) is handed back to the
policy, which is told to try again (the built-in task's retry role, :func:`stackrl.tasks.retry_prompt`; the
authors' critic prompt says the attempt is suspected incorrect and asks for a fresh solution). The two corrections
are written independently of each other. When both give an answer and the answers agree, the question is labelled
with the first correction's answer, and a cluster whose answer differs from it was wrong; otherwise the question
is left unlabelled (no solver data).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from stackrl.answers import GroupAnswers, equivalent
from stackrl.tasks import retry_prompt


def top_two(group: GroupAnswers) -> list[int]:
    """The two largest clusters, largest first (a tie: the one answered first), fewer where fewer exist."""
    return sorted(range(len(group.counts)), key=lambda k: (-group.counts[k], k))[:2]


def first_attempt(group: GroupAnswers, texts: list[str], cluster: int) -> str:
    """The first of ``texts`` whose answer is in ``cluster`` (the authors' example of a cluster)."""
    return texts[group.index.index(cluster)]


def refine_text(prompts, question: str, attempt: str) -> str:
    """The problem text of the correction prompt of ``attempt`` at ``question``: the retry format after the question
    as the run writes it (:class:`stackrl.blocks.selfplay.QuestionPrompts`), less the run's problem ending, which
    the prompt format adds back, so ``prompts(refine_text(...))`` is the retry prompt in the run's format."""
    text = retry_prompt(prompts.text(question), attempt)
    ending = prompts.ending
    return text[:-len(ending)] if ending and text.endswith(ending) else text


@dataclass(frozen=True)
class Verdict:
    """The label the corrections agree on, and whether each of the two clusters was wrong (its answer differs)."""

    label: str
    wrong: tuple[bool, ...]


def counterfactual_label(clusters: list[str], corrected: list[Optional[str]], math_verify: bool = True
                         ) -> Optional[Verdict]:
    """The authors' rule on the answers of the two clusters (``clusters``) and of their corrections
    (``corrected``, ``None`` where a correction gave none): converged when both corrections answer and agree; the
    label is then the first correction's answer, and each cluster is wrong where its answer differs from the label.
    ``None``: not converged, no label."""
    if len(clusters) != 2 or len(corrected) != 2:
        raise ValueError("the counterfactual correction takes exactly two clusters and their two corrections")
    first, second = corrected
    if first is None or second is None or not equivalent(first, second, math_verify):
        return None
    return Verdict(first, tuple(not equivalent(answer, first, math_verify) for answer in clusters))
