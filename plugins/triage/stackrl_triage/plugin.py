"""TRIAGE: a labeller gives each step of a completion a role, and each role a fixed correction of the step's
outcome advantage.

Paper: "TRIAGE: Role-Typed Credit Assignment for Agentic Reinforcement Learning", Xu, Zhou, Sang et al., arXiv
2606.32017. Code followed: none public (see the README).
"""

from __future__ import annotations

import stackrl
from stackrl.aux_rules import RULES
from stackrl.blocks.turns import NewlineTokens, turn_spans
from stackrl_triage.config import TriageConfig
from stackrl_triage.credit import role_constants, segment_credit
from stackrl_triage.labels import ROLES, RULE, label_request, read_labels


def question(prompt) -> str:
    """The question a labeller is shown: a text prompt as it is, a chat prompt's last message's content."""
    return prompt if isinstance(prompt, str) else str(prompt[-1]["content"])


class Triage(stackrl.Plugin):
    """Role-typed credit: each line of each completion is labelled progress, exploration, infrastructure or
    regression by an auxiliary labeller, and its tokens get the row's outcome advantage plus the role's constant."""

    Config = TriageConfig
    activity = "completions had a step the labeller gave a role"

    def __init__(self, config=None):
        super().__init__(config)
        self._is_newline: NewlineTokens | None = None

    def label(self, ctx, prompts: list, steps: list[list[str]]) -> list[list[str | None]]:
        """Each row's step roles, from the configured labeller; rows without steps ask nothing."""
        asked = [i for i, row in enumerate(steps) if row]
        requests = [label_request(question(prompts[i]), steps[i], self.config.template) for i in asked]
        if not requests:
            replies = []
        elif self.config.labeller:
            replies = [g.text if not g.failed else None for g in ctx.generate(
                requests, model=self.config.labeller, do_sample=False, max_new_tokens=self.config.max_new_tokens)]
        else:
            replies = RULES[RULE](requests)
        labels: list[list[str | None]] = [[] for _ in steps]
        for i, reply in zip(asked, replies):
            labels[i] = read_labels(reply, len(steps[i]))
        return labels

    @stackrl.hookimpl
    def reshape_advantages(self, advantages, ctx):
        if not ctx.training:
            return None
        rollout = ctx.rollout
        self._is_newline = self._is_newline or NewlineTokens(ctx.tokenizer)
        spans = turn_spans(rollout, self._is_newline, lines=True)
        texts = [ctx.tokenizer.batch_decode([ids[a:b] for a, b in row], skip_special_tokens=True) if row else []
                 for ids, row in zip(rollout.completion_ids, spans)]
        # A span that decodes to nothing (an end-of-sequence token alone) is no step: it keeps the outcome advantage.
        kept = [[k for k, text in enumerate(row) if text.strip()] for row in texts]
        labels = self.label(ctx, rollout.prompts, [[row[k] for k in ks] for row, ks in zip(texts, kept)])
        full = [[None] * len(row) for row in spans]
        for i, (ks, row) in enumerate(zip(kept, labels)):
            for k, role in zip(ks, row):
                full[i][k] = role
        labelled = [role for row in full for role in row if role is not None]
        ctx.acted(sum(any(r is not None for r in row) for row in full), of=len(full), hint=(
            "triage.labeller gave no step a role: check its replies are '<k>. <role>' lines, roles "
            + ", ".join(ROLES)))
        for role in ROLES:
            ctx.log(f"share_{role}", labelled.count(role) / max(1, len(labelled)))
        width = rollout.completion_mask().size(1)
        return segment_credit(advantages, spans, role_constants(full, self.config.constants()), width)
