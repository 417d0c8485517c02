"""The DAPD objective: six clipped forward KLs between three views of the same completion.

Each completion ``s`` (the policy's rollout ``y`` or the data's reference solution ``y*``; ``s̄`` is the other) is
scored under three contexts that differ only in the privileged text they show:

- ``none``:  the student prompt ``x`` alone, as at inference;                    ``p(· | x, s<t)``
- ``cross``: the teacher prompt carrying the *other* completion ``s̄``;           ``p(· | x, s̄, s<t)``
- ``self``:  a context carrying ``s`` itself, the self-conditioned bridge;         ``p(· | x, s, s<t)``

(the authors' code builds ``self`` for ``y*`` as the teacher prompt carrying ``y*``, and for ``y`` as the student
prompt followed by ``y``, before ``y`` is scored again). A term is ``KL(sg anchor || student)``: the anchor is a
no-gradient view scored by a fixed copy (``snapshot``: refreshed every few steps; ``base``: the initial model),
the student a live view with gradient:

========================  ==========  ==================  ===============
term                      completion  anchor (weights)    student
========================  ==========  ==================  ===============
entangled_rollout         y           cross (snapshot)    none
inference_reference       y*          none  (base)        self
privileged_rollout        y           cross (base)        self
entangled_reference       y*          cross (snapshot)    none
inference_rollout         y           none  (base)        self
privileged_reference      y*          cross (base)        self
========================  ==========  ==================  ===============

The first three are the reference-to-rollout source (the reference's context supervises the rollout), the last
three the rollout-to-reference source (the rollout's context supervises the reference): Dual-Source Anchoring.
Within a source, Entangled Distillation plus the other completion's Inference Anchor is the unconditioned path
and the Privileged Anchor the privileged path: Dual-Path Anchoring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from stackrl import Rollout
from stackrl.blocks.teacher import teacher_prompts


@dataclass(frozen=True)
class Term:
    completion: str  # "rollout" (y) or "reference" (y*)
    anchor_view: str  # "none", "cross" or "self"
    anchor: str  # "snapshot" or "base"
    student_view: str


TERM_VIEWS = {
    "entangled_rollout": Term("rollout", "cross", "snapshot", "none"),
    "inference_reference": Term("reference", "none", "base", "self"),
    "privileged_rollout": Term("rollout", "cross", "base", "self"),
    "entangled_reference": Term("reference", "cross", "snapshot", "none"),
    "inference_rollout": Term("rollout", "none", "base", "self"),
    "privileged_reference": Term("reference", "cross", "base", "self"),
}


def clipped_forward_kl(student_logps: torch.Tensor, anchor_logps: torch.Tensor, clip: Optional[float]) -> torch.Tensor:
    """KL(anchor || student) at each position, each vocabulary entry's term ``q_v (log q_v - log p_v)`` clipped
    above at ``clip`` before the sum (the authors' component clip; ``None``: no clip), ``(P,)``."""
    q = anchor_logps.exp()
    terms = torch.where(q > 0, q * (anchor_logps - student_logps), torch.zeros_like(q))
    if clip is not None:
        terms = terms.clamp(max=clip)
    return terms.sum(-1)


def reference_ids(tokenizer, texts: list[str], eos_ids: list[int], limit: Optional[int]) -> list[list[int]]:
    """The reference completions ``y*`` as the policy would end them: the text's tokens and an end-of-sequence token,
    cut to ``limit`` tokens (``None``: whole)."""
    eos = list(eos_ids[:1])
    out = [tokenizer(text, add_special_tokens=False)["input_ids"] + eos for text in texts]
    return [ids[:limit] if limit is not None else ids for ids in out]


def view_contexts(rollout: Rollout, completion: str, view: str, template: str, reference_column: str) -> list:
    """The context of each row of ``rollout`` for ``completion`` seen through ``view`` (see the module's table)."""
    if view == "none":
        return [list(ids) for ids in rollout.prompt_ids]
    if completion == "rollout" and view == "self":
        return [list(p) + list(c) for p, c in zip(rollout.prompt_ids, rollout.completion_ids)]
    # cross of y and self of y* carry the reference; cross of y* carries the rollout.
    carried = rollout.completions if (completion, view) == ("reference", "cross") else rollout.columns[reference_column]
    return teacher_prompts(rollout.prompts, {**rollout.columns, "reference": list(carried)}, template,
                           where="dapd.teacher_template")


def dapd_terms(scorer, rollout: Rollout, references: list[list[int]], config, *, models: dict[str, str],
               grad: bool, only=None) -> dict[str, torch.Tensor]:
    """Each DAPD term's divergence at every token of its completion, packed over the rows, ``{term: (P,)}``.

    ``scorer`` has ``score`` and ``sampling_temperature`` (a hook's ``ctx``, a ``PolicyAccess``); ``references`` are
    the rows' ``y*`` token ids; ``models`` names the model of each anchor (``{"snapshot": ..., "base": ...}``); the
    student views keep their gradient when ``grad``. ``only`` (default: the terms of non-zero weight) picks terms.
    """
    temperature = scorer.sampling_temperature if config.temperature is None else config.temperature
    names = [n for n in TERM_VIEWS if getattr(config, n)] if only is None else list(only)
    completions = {"rollout": [list(ids) for ids in rollout.completion_ids], "reference": references}
    cache: dict = {}

    def scored(completion: str, view: str, model: str, with_grad: bool) -> torch.Tensor:
        key = (completion, view, model, with_grad)
        if key not in cache:
            ids = completions[completion]
            contexts = view_contexts(rollout, completion, view, config.teacher_template, config.reference_column)
            cache[key] = scorer.score(
                contexts, ids, model=model, grad=with_grad, full_vocab=True, temperature=temperature,
                positions=[range(len(row)) for row in ids],
            ).vocab_logprobs
        return cache[key]

    out = {}
    for name in names:
        term = TERM_VIEWS[name]
        anchor = scored(term.completion, term.anchor_view, models[term.anchor], False)
        student = scored(term.completion, term.student_view, "policy", grad)
        out[name] = clipped_forward_kl(student, anchor, config.component_clip)
    return out


def dapd_loss(terms: dict[str, torch.Tensor], config) -> torch.Tensor:
    """The weighted sum of the terms, each the mean over its completion tokens (the authors' per-pair average)."""
    return sum(getattr(config, name) * values.mean() for name, values in terms.items())
