"""Self-rewards checked against hidden truth.

A ``data.label_free`` run whose dataset still has answers keeps them away from every hook: the answer column is
renamed to ``TRUTH_COLUMN``, which no context shows. The host alone reads it, and logs for each generation batch
how far each reward component tracks correctness (a reward that drifts away from it is being hacked) and how
often the pseudo-labels plugins declare are right.
"""

from __future__ import annotations

import torch

from stackrl.answers import equivalent
from stackrl.context import Rollout

TRUTH_COLUMN = "stackrl_truth"
PREFIX = "truth"


def auroc(scores: torch.Tensor, positives: torch.Tensor) -> float | None:
    """The probability that a random positive row scores above a random negative one, ties counting one half.

    Rows whose score is NaN (not scored) are left out; ``None`` when the rest lacks a positive or a negative.
    """
    scored = ~torch.isnan(scores)
    scores, positives = scores[scored].double(), positives[scored].bool()
    high, low = scores[positives], scores[~positives]
    if not len(high) or not len(low):
        return None
    above = (high[:, None] > low[None, :]).double().sum()
    tied = (high[:, None] == low[None, :]).double().sum()
    return ((above + 0.5 * tied) / (len(high) * len(low))).item()


def truth_figures(rollout: Rollout, truth: list, check, math_verify: bool) -> dict[str, float]:
    """What the host logs against the hidden answers ``truth`` (one per row).

    ``truth/correct``: the share of completions ``check(text, answer)`` finds correct; ``truth/<component>/auroc``
    for every reward component, where the batch has correct and wrong completions it scored; and
    ``truth/<plugin>/pseudo_label_accuracy``: the share of the rows a plugin labelled whose label is
    ``equivalent`` to the answer (``math_verify`` as the run's metric).
    """
    correct = torch.tensor([check(text, str(answer)) > 0 for text, answer in zip(rollout.completions, truth)])
    figures = {f"{PREFIX}/correct": correct.double().mean().item()}
    for name, values in rollout.rewards.items():
        area = auroc(values, correct)
        if area is not None:
            figures[f"{PREFIX}/{name}/auroc"] = area
    for plugin, labels in rollout.pseudo_labels.items():
        right = [equivalent(str(label), str(answer), math_verify) for label, answer in zip(labels, truth) if label is not None]
        if right:
            figures[f"{PREFIX}/{plugin}/pseudo_label_accuracy"] = sum(right) / len(right)
    return figures
