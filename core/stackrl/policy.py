"""The two capabilities hooks get instead of the model: ``generate`` and ``score``.

Hooks of the sample, reward and advantage stages run on every process with the same whole batch. There, both
capabilities split their work across processes and return the full result to each, so a plugin that decides from
their results decides the same everywhere and its state stays identical on all ranks. In the loss stage they work
on the process's own rows only, and ``score`` may keep the gradient.
"""

from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from accelerate.utils import gather_object

from stackrl.errors import StackrlError

if TYPE_CHECKING:
    from stackrl.trainer import StackTrainer


@dataclass
class Generation:
    """One sampled completion and the prompt tokens it was sampled from."""

    prompt_ids: list[int]
    completion_ids: list[int]
    text: str


@dataclass
class Scores:
    """Per-token log-probs of continuations, right-padded to the longest: ``logprobs`` and ``mask`` are ``(N, T)``.

    ``topk_logprobs``/``topk_ids`` are ``(N, T, k)`` when ``topk`` was asked, ``vocab_logprobs`` ``(N, T, V)`` when
    ``full_vocab`` was; position ``t`` holds the distribution the model predicted continuation token ``t`` from.
    """

    logprobs: torch.Tensor
    mask: torch.Tensor
    topk_logprobs: torch.Tensor | None = None
    topk_ids: torch.Tensor | None = None
    vocab_logprobs: torch.Tensor | None = None


def _pad(rows: list[torch.Tensor], value: float = 0.0) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=value)


class PolicyAccess:
    """``generate`` and ``score`` against a trainer's models, without handing the trainer to plugins."""

    def __init__(self, trainer: StackTrainer, *, sharded: bool, model: torch.nn.Module | None = None):
        self._trainer = trainer
        self._sharded = sharded and trainer.accelerator.num_processes > 1
        self._grad_model = model

    # -- splitting work over processes --------------------------------------------------------------------------

    def _local(self, items: list) -> list:
        """This process's equal share of ``items``, padded with repeats so every rank runs the same forwards."""
        if not self._sharded:
            return items
        world, rank = self._trainer.accelerator.num_processes, self._trainer.accelerator.process_index
        per_rank = math.ceil(len(items) / world)
        padded = items + [items[-1]] * (per_rank * world - len(items))
        return padded[rank * per_rank : (rank + 1) * per_rank]

    def _whole(self, local: list, n: int) -> list:
        return gather_object(local)[:n] if self._sharded else local

    # -- generate ---------------------------------------------------------------------------------------------------

    def generate(self, prompts: list, **sampling) -> list[Generation]:
        """Sample one completion per prompt (text or chat messages) with the current policy, no gradient.

        ``sampling`` overrides the run's generation settings for this call (``temperature``, ``top_p``,
        ``max_new_tokens``, ``do_sample``, ...). Prompts go through the chat template as training prompts do.
        """
        if not prompts:
            return []
        trainer = self._trainer
        local = self._local(list(prompts))
        prompt_ids, _, _ = trainer._tokenize_prompts(local)
        with self._sampling_overrides(sampling):
            completion_ids, _ = trainer._generate_single_turn(prompt_ids, None, {}, 1)
        texts = trainer.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
        results = [Generation(list(p), list(c), t) for p, c, t in zip(prompt_ids, completion_ids, texts)]
        return self._whole(results, len(prompts))

    @contextlib.contextmanager
    def _sampling_overrides(self, sampling: dict):
        trainer = self._trainer
        if not sampling:
            yield
            return
        if trainer.use_vllm:
            raise StackrlError("generate(): sampling overrides are not available with vLLM generation yet")
        original = trainer.generation_config
        updated = copy.deepcopy(original)
        unknown = [k for k in sampling if not hasattr(updated, k)]
        if unknown:
            raise StackrlError(f"generate(): unknown sampling setting(s) {', '.join(unknown)}")
        updated.update(**sampling)
        trainer.generation_config = updated
        try:
            yield
        finally:
            trainer.generation_config = original

    # -- score ------------------------------------------------------------------------------------------------------

    def score(
        self,
        contexts: list,
        continuation_ids: list[list[int]],
        *,
        model: str = "policy",
        topk: int | None = None,
        full_vocab: bool = False,
        grad: bool = False,
        temperature: float = 1.0,
        batch_size: int | None = None,
    ) -> Scores:
        """Log-probs of each continuation given its context, batched, one forward per batch.

        ``contexts`` are token-id lists, or prompts (text or chat messages) tokenized as training prompts are.
        ``model`` is ``"policy"`` (the live model) or ``"reference"`` (the frozen reference model, or the base
        model with the LoRA adapter disabled). Without ``grad`` no graph is kept; ``grad=True`` is for loss terms.
        Logits are divided by ``temperature`` before the softmax.
        """
        if len(contexts) != len(continuation_ids):
            raise StackrlError(
                f"score(): {len(contexts)} contexts but {len(continuation_ids)} continuations; give one each"
            )
        if grad and self._grad_model is None:
            raise StackrlError("score(grad=True) is only available in the loss stage (loss_term)")
        if not contexts:
            return Scores(torch.zeros(0, 0), torch.zeros(0, 0, dtype=torch.long))
        trainer = self._trainer
        if not isinstance(contexts[0], list) or (contexts[0] and isinstance(contexts[0][0], dict)):
            contexts = trainer._tokenize_prompts(list(contexts))[0]
        items = self._local(list(zip(contexts, continuation_ids)))
        batch_size = batch_size or trainer.args.per_device_train_batch_size
        rows = []
        with self._scoring_model(model, grad) as net, torch.set_grad_enabled(grad):
            for start in range(0, len(items), batch_size):
                rows.extend(self._score_batch(net, items[start : start + batch_size], topk, full_vocab, temperature))
        rows = self._whole(rows, len(contexts))
        fields = zip(*rows)
        logprobs, topk_lp, topk_ids, vocab = (list(f) for f in fields)
        lengths = torch.tensor([len(x) for x in logprobs])
        return Scores(
            logprobs=_pad(logprobs),
            mask=(torch.arange(int(lengths.max())).unsqueeze(0) < lengths.unsqueeze(1)).long(),
            topk_logprobs=_pad(topk_lp) if topk else None,
            topk_ids=_pad(topk_ids, 0).long() if topk else None,
            vocab_logprobs=_pad(vocab) if full_vocab else None,
        )

    @contextlib.contextmanager
    def _scoring_model(self, which: str, grad: bool):
        trainer = self._trainer
        if which == "policy":
            yield self._grad_model if grad else trainer.accelerator.unwrap_model(trainer.model)
        elif which == "reference":
            if grad:
                raise StackrlError("score(): the reference model is frozen; grad=True needs model='policy'")
            unwrapped = trainer.accelerator.unwrap_model(trainer.model)
            if hasattr(unwrapped, "disable_adapter"):
                with unwrapped.disable_adapter():
                    yield unwrapped
            elif trainer.ref_model is not None:
                yield trainer.ref_model
            else:
                raise StackrlError(
                    "score(model='reference'): this run has no reference model; use LoRA (model.lora) "
                    "or set trainer.beta > 0 so TRL loads one"
                )
        else:
            raise StackrlError(f"score(): model must be 'policy' or 'reference', not {which!r}")

    def _score_batch(self, net, items, topk, full_vocab, temperature):
        device = self._trainer.accelerator.device
        pad_id = self._trainer.processing_class.pad_token_id
        ctx_len = max(len(c) for c, _ in items)
        cont_len = max(len(k) for _, k in items)
        ids = torch.full((len(items), ctx_len + cont_len), pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, (context, continuation) in enumerate(items):
            # Contexts end at one column so every continuation starts there: the model need only project
            # the last cont_len + 1 hidden states onto the vocabulary.
            ids[row, ctx_len - len(context) : ctx_len] = torch.tensor(context, dtype=torch.long)
            ids[row, ctx_len : ctx_len + len(continuation)] = torch.tensor(continuation, dtype=torch.long)
            mask[row, ctx_len - len(context) : ctx_len + len(continuation)] = 1
        positions = (mask.cumsum(1) - 1).clamp(min=0)
        ids, mask, positions = ids.to(device), mask.to(device), positions.to(device)
        with self._trainer.accelerator.autocast():
            logits = net(
                input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=cont_len + 1
            ).logits
        logps = F.log_softmax(logits[:, :-1].float() / temperature, dim=-1)
        token_lp = logps.gather(-1, ids[:, ctx_len:].unsqueeze(-1)).squeeze(-1)
        if topk:
            top_lp, top_ids = logps.topk(topk, dim=-1)
        out = []
        for row, (_, continuation) in enumerate(items):
            n = len(continuation)
            out.append(
                (
                    token_lp[row, :n],
                    top_lp[row, :n] if topk else None,
                    top_ids[row, :n] if topk else None,
                    logps[row, :n] if full_vocab else None,
                )
            )
        return out
