"""The self-aligned reward: ``(PPL(a) - PPL(a|q)) / PPL(a)``, floored at -1.

``PPL(a|q)`` is the perplexity of a completion under the prompt it was sampled from, ``PPL(a)`` under the same
chat with the question taken out (the system prompt kept, the user turn empty). An answer that the question makes
much more likely than it is on its own scores near 1; one that reads as well without the question (generic
padding, restating) scores near 0 or below. The authors add it with weight 0.2 to the verifiable reward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from stackrl import ConfigError, Plugin, hookimpl


@dataclass
class SARConfig:
    floor: float = -1.0  # the reward's lower bound (the authors' clip_value)
    batch_size: Optional[int] = None  # rows per scoring forward; default the train batch

    def __post_init__(self):
        if self.floor > 0:
            raise ConfigError(f"sar.floor must be 0 or below (the reward is at most 1 and often near 0), not {self.floor}")


def self_aligned_reward(
    with_question: torch.Tensor, answer_only: torch.Tensor, mask: torch.Tensor, floor: float = -1.0
) -> torch.Tensor:
    """``max((PPL(a) - PPL(a|q)) / PPL(a), floor)`` per row, from ``(N, T)`` token log-probs of the same completions
    under their prompts (``with_question``) and under the question-free prompt (``answer_only``).

    With ``PPL = exp(mean NLL)`` the ratio is ``1 - exp(NLL(a|q) - NLL(a))``, computed in that form (float64) so
    that long, unlikely completions do not overflow.
    """
    mask = mask.double()
    tokens = mask.sum(dim=1)
    nll_q = -(with_question.double() * mask).sum(dim=1) / tokens
    nll_a = -(answer_only.double() * mask).sum(dim=1) / tokens
    return (1 - torch.exp(nll_q - nll_a)).clamp(min=floor)


def answer_only_prompt(prompt, tokenizer):
    """The prompt without its question: a chat keeps its system messages and gets an empty user turn; a plain-text
    prompt becomes the tokenizer's start token (BOS, else EOS), the least a completion can be scored after."""
    if isinstance(prompt, str):
        start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        return [start]
    return [*(m for m in prompt if m["role"] == "system"), {"role": "user", "content": ""}]


class SAR(Plugin):
    """SAR (arXiv 2509.05489) on the reward hook."""

    Config = SARConfig
    activity = "completions scored above the reward's floor"

    @hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        options = {"temperature": ctx.sampling_temperature, "batch_size": self.config.batch_size}
        asked = ctx.score(rollout.prompt_ids, rollout.completion_ids, **options)
        bare = [answer_only_prompt(prompt, ctx.tokenizer) for prompt in rollout.prompts]
        unasked = ctx.score(bare, rollout.completion_ids, **options)
        rewards = self_aligned_reward(asked.logprobs, unasked.logprobs, asked.mask, self.config.floor)
        scored = asked.mask.sum(dim=1) > 0
        ctx.acted(int((scored & (rewards > self.config.floor)).sum()), of=len(rollout))
        if scored.any():
            ctx.log("floored", (rewards[scored] <= self.config.floor).double().mean().item())
            ctx.log("ppl_with_question", _perplexity(asked)[scored].mean().item())
            ctx.log("ppl_answer_only", _perplexity(unasked)[scored].mean().item())
        return [value if ok else None for value, ok in zip(rewards.tolist(), scored.tolist())]


def _perplexity(scores) -> torch.Tensor:
    mask = scores.mask.double()
    return torch.exp(-(scores.logprobs.double() * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1))
