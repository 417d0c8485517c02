"""The DAPD loss written out from its definition, for the rule test and the mechanism test alike."""

import pytest
import torch

from stackrl.policy import _SNAPSHOTS
from stackrl.testing.heldout import completion_logits

# The paper's six terms in our own table, independent of the plugin's: (completion, anchor context, anchor weights,
# student context). "cross" carries the other completion, "self" the completion itself.
TERMS = {
    "entangled_rollout": ("rollout", "cross", "snapshot", "none"),
    "inference_reference": ("reference", "none", "base", "self"),
    "privileged_rollout": ("rollout", "cross", "base", "self"),
    "entangled_reference": ("reference", "cross", "snapshot", "none"),
    "inference_rollout": ("rollout", "none", "base", "self"),
    "privileged_reference": ("reference", "cross", "base", "self"),
}


def by_hand(trainer, rollout, references, weights, *, clip, temperature, snapshot, base, layout="{}\n\n{}",
            cache=None):
    """The DAPD loss on the raw logits, float64: for each term, the anchor's and the student's
    log-softmax(logits / T) at every token of its completion; the terms q (log q - log p), each clipped above at
    ``clip``, summed over the vocabulary; the mean over the term's tokens; the weighted sum. The teacher prompt is
    ``layout`` filled with the carried text and the question (the built-in model's reference layout). ``cache``, a
    dict, keeps each forward's result for the next call on the same models (one test's variants)."""
    snapshots = _SNAPSHOTS[trainer]
    models = {"snapshot": snapshots[snapshot].model, "base": snapshots[base].model}
    text = lambda texts: [list(ids) for ids in trainer._tokenize_prompts(texts)[0]]  # noqa: E731
    solutions, attempts = rollout.columns["solution"], rollout.completions
    prompts = [list(p) for p in rollout.prompt_ids]
    with_solution = text([layout.format(s, q) for s, q in zip(solutions, rollout.prompts)])
    contexts = {
        ("rollout", "none"): prompts,
        ("rollout", "cross"): with_solution,
        ("rollout", "self"): [p + list(c) for p, c in zip(prompts, rollout.completion_ids)],
        ("reference", "none"): prompts,
        ("reference", "cross"): text([layout.format(y, q) for y, q in zip(attempts, rollout.prompts)]),
        ("reference", "self"): with_solution,
    }
    completions = {"rollout": [list(c) for c in rollout.completion_ids], "reference": references}
    logits = {} if cache is None else cache

    def scaled(model, context, ids):  # each forward once: the variants a test compares share them
        key = (id(model), tuple(context), tuple(ids), temperature)
        if key not in logits:
            logits[key] = (completion_logits(model, context, ids) / temperature).log_softmax(-1)
        return logits[key]

    total = torch.zeros((), dtype=torch.float64)
    for name, weight in weights.items():
        completion, anchor_view, anchor, student_view = TERMS[name]
        values = []
        for i, ids in enumerate(completions[completion]):
            q = scaled(models[anchor], contexts[completion, anchor_view][i], ids)
            p = scaled(trainer.model, contexts[completion, student_view][i], ids)
            values.append((q.exp() * (q - p)).clamp(max=clip).sum(-1))
        total = total + weight * torch.cat(values).mean()
    return total


@pytest.fixture
def dapd_by_hand():
    return by_hand
