"""OSFT: the policy fine-tunes on its own completions, sampled colder than the loss reads them."""

from __future__ import annotations

import torch

import stackrl
from stackrl_osft.config import OsftConfig, check


class Osft(stackrl.Plugin):
    """Online SFT: sample at ``sampling_temperature``, then raise the likelihood of every sampled token.

    With every advantage 1, TRL's on-policy policy-gradient loss has the gradient of the token-mean negative
    log-likelihood of the samples (``loss_type: dapo``, the authors' token-mean), read at ``trainer.temperature``.
    Rewards are computed and logged but move nothing.
    """

    Config = OsftConfig
    activity = "completions had every token trained up (advantage 1)"

    def __init__(self, config=None):
        super().__init__(config)
        check(self.config)

    @stackrl.hookimpl
    def generate_rollout(self, prompts, ctx):
        if not ctx.training:
            return None
        samples = ctx.generate(prompts, temperature=self.config.sampling_temperature)
        return stackrl.Samples(completion_ids=[s.completion_ids for s in samples])

    @stackrl.hookimpl
    def estimate_advantages(self, ctx):
        ctx.acted(len(ctx.rollout), of=len(ctx.rollout))
        return torch.ones(len(ctx.rollout))
