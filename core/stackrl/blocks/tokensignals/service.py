"""The per-batch token-signal service: each row's sampled tokens scored once per distinct context, then shared.

``TokenSignals.of(ctx)`` is the service of the batch a hook sees: the whole rollout in the advantage stage (no
gradient; results on the CPU, where advantages live), one micro-batch in ``loss_term`` (results on the loss's
device). Every plugin of the stage gets the same service, so a context two plugins ask for is scored once.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from stackrl.blocks.tokensignals.contexts import STUDENT, SignalContext
from stackrl.blocks.tokensignals.statistics import entropy_and_topk_mass
from stackrl.context import LossContext

if TYPE_CHECKING:
    from stackrl.context import Rollout

# One service per rollout object (a generation batch, or a loss micro-batch), dropped with it.
_SERVICES: dict[int, TokenSignals] = {}


@dataclass
class _Scored:
    """One row scored under one context: the sampled tokens' log-probs, and per-position statistics if asked."""

    logprobs: torch.Tensor
    entropy: torch.Tensor | None = None
    topk_mass: dict[int, torch.Tensor] = field(default_factory=dict)


class TokenSignals:
    """Per-token signals of one batch, ``(N, T)`` each, zero on padding (``mask``); ``T`` the longest completion.

    Each method takes contexts (:class:`SignalContext`) and optionally ``model`` (any model ``ctx.score`` knows) and
    ``temperature`` (default: the run's sampling temperature, the one TRL's loss uses). Statistics (entropy,
    top-k mass) need the whole next-token distribution; ask for them first when a context needs both, since a
    context scored for log-probs alone is scored again for them.

    A context applies to the rows with its privileged context (:meth:`SignalContext.rows`; a row without an answer
    has none): on the others its log-probs and statistics are zero, and so are the gaps and contrasts it enters,
    which leaves those rows' advantages as GRPO's under every modulator. :meth:`covered` masks the rows a signal
    applies to, for a mean over them.
    """

    rows_per_forward = 4  # rows scored per forward when statistics are asked (their full distributions are held)

    def __init__(self, ctx, rollout: Rollout):
        self._ctx = ctx
        self._rollout = weakref.proxy(rollout)
        self._cache: dict[tuple, _Scored] = {}
        self.device = ctx.completion_ids.device if isinstance(ctx, LossContext) else torch.device("cpu")
        self.mask = rollout.completion_mask().to(self.device)

    @classmethod
    def of(cls, ctx) -> TokenSignals:
        """The service of ``ctx.rollout``: created on first use, shared by every later call on the same batch."""
        rollout = ctx.rollout
        service = _SERVICES.get(id(rollout))
        if service is None:
            service = _SERVICES[id(rollout)] = cls(ctx, rollout)
            weakref.finalize(rollout, _SERVICES.pop, id(rollout), None)
        return service

    # -- signals ------------------------------------------------------------------------------------------------

    def covered(self, *contexts: SignalContext) -> torch.Tensor:
        """``(N, T)``: ``mask`` on the rows every one of ``contexts`` applies to, 0 on the others."""
        rows = set(range(len(self._rollout)))
        for context in contexts:
            rows &= set(context.rows(self._rollout))
        keep = torch.zeros(len(self._rollout), dtype=self.mask.dtype, device=self.device)
        keep[sorted(rows)] = 1
        return self.mask * keep.unsqueeze(1)

    def logprobs(self, context: SignalContext, *, model: str = "policy", temperature: float | None = None):
        """``log pi(y_t | context, y_<t)`` of every sampled token."""
        return self._stack({i: s.logprobs for i, s in self._scored(context, model, temperature).items()})

    def gap(
        self, teacher: SignalContext, student: SignalContext = STUDENT, *, model: str = "policy",
        temperature: float | None = None,
    ) -> torch.Tensor:
        """``log pi_T(y_t | teacher) - log pi(y_t | student)``: how much more the teacher expects each token.

        ``model`` is the teacher's; the student is always the live policy.
        """
        student_logps = self.logprobs(student, temperature=temperature)
        teacher_logps = self.logprobs(teacher, model=model, temperature=temperature)
        return (teacher_logps - student_logps) * self.covered(teacher, student)

    def contrast(self, first: SignalContext, second: SignalContext, **options) -> torch.Tensor:
        """``log pi(y_t | first) - log pi(y_t | second)``: the student's own term cancels between two teachers."""
        return (self.logprobs(first, **options) - self.logprobs(second, **options)) * self.covered(first, second)

    def mixture_logprobs(self, contexts: list[SignalContext], **options) -> tuple[torch.Tensor, torch.Tensor]:
        """``(log mean_k pi(y_t | contexts[k]), count)``: each token's log-probability under the uniform mixture of
        the contexts that apply to its row, and how many do (``(N,)``; a row none applies to gets 0 and 0)."""
        logprobs = torch.stack([self.logprobs(c, **options) for c in contexts])
        applies = torch.stack([self.covered(c).sum(1) > 0 for c in contexts])
        count = applies.sum(0)
        mixed = torch.logsumexp(logprobs.masked_fill(~applies.unsqueeze(2), float("-inf")), 0)
        mixed = (mixed - count.clamp_min(1).log().unsqueeze(1)).nan_to_num(0.0, neginf=0.0)
        return mixed * (count > 0).unsqueeze(1) * self.mask, count

    def entropy(self, context: SignalContext, *, model: str = "policy", temperature: float | None = None):
        """The entropy of the next-token distribution at each position, under ``context``."""
        scored = self._scored(context, model, temperature, statistics=True)
        return self._stack({i: s.entropy for i, s in scored.items()})

    def topk_mass(self, context: SignalContext, k: int, *, model: str = "policy", temperature: float | None = None):
        """The probability of the ``k`` most likely next tokens at each position, under ``context``."""
        scored = self._scored(context, model, temperature, statistics=True, k=k)
        return self._stack({i: s.topk_mass[k] for i, s in scored.items()})

    # -- scoring and the cache ----------------------------------------------------------------------------------

    def _scored(self, context, model="policy", temperature=None, *, statistics=False, k=None) -> dict[int, _Scored]:
        """The rows ``context`` applies to, scored, by row."""
        ctx, rollout = self._ctx, self._rollout
        temperature = ctx.sampling_temperature if temperature is None else temperature
        prompts = context.prompts(rollout)
        keys = {i: (i, model, temperature, repr(p)) for i, p in prompts.items()}
        todo = [i for i, key in keys.items() if not self._has(key, statistics, k)]
        if todo:
            self._score(todo, [prompts[i] for i in todo], [keys[i] for i in todo], model, temperature, statistics, k)
        return {i: self._cache[key] for i, key in keys.items()}

    def _has(self, key: tuple, statistics: bool, k: int | None) -> bool:
        scored = self._cache.get(key)
        if scored is None:
            return False
        return not statistics or (scored.entropy is not None and (k is None or k in scored.topk_mass))

    def _score(self, rows, prompts, keys, model, temperature, statistics, k) -> None:
        """Score ``rows``: log-probs alone in one call (``ctx.score`` batches it); with statistics, ``rows_per_forward``
        rows per call and per forward, so at most ``rows_per_forward x T x V`` log-probs are ever held."""
        ctx, rollout = self._ctx, self._rollout
        chunk = self.rows_per_forward if statistics else len(rows)
        for start in range(0, len(rows), chunk):
            part = slice(start, start + chunk)
            scores = ctx.score(
                prompts[part], [rollout.completion_ids[i] for i in rows[part]], model=model,
                temperature=temperature, full_vocab=statistics, batch_size=chunk if statistics else None,
            )
            if statistics:
                entropy, masses = entropy_and_topk_mass(scores.vocab_logprobs, k or 1)
            for j, key in enumerate(keys[part]):
                length = int(scores.mask[j].sum())
                scored = self._cache.get(key) or _Scored(scores.logprobs[j, :length].detach().to(self.device))
                if statistics:
                    scored.entropy = entropy[j, :length].detach().to(self.device)
                    if k is not None:
                        scored.topk_mass[k] = masses[j, :length].detach().to(self.device)
                self._cache[key] = scored

    def _stack(self, rows: dict[int, torch.Tensor]) -> torch.Tensor:
        """``(N, T)`` with each given row's values, zero elsewhere."""
        out = torch.zeros(self.mask.shape, dtype=torch.float32, device=self.device)
        for i, row in rows.items():
            out[i, : len(row)] = row
        return out

