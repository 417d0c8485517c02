"""ExPO: where a group's own samples all fail, the policy explains the true answer, and learns from that."""

from __future__ import annotations

import torch

import stackrl
from stackrl_expo.config import ExpoConfig, check
from stackrl.blocks.insertion import failed_groups, into_last_rows, reaches
from stackrl_expo.explanations import explain

# The loss mode's column: on each explained group's first row, the token lists of its kept explanations.
EXPLANATIONS = "expo_explanations"
# The insert mode's column: whether a row is an explanation put in place of a sample.
INSERTED = "expo_inserted"


def explanation_nll(logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean over explanations of each one's token-mean negative log-likelihood (rows of ``(n, T)``)."""
    return -((logprobs * mask).sum(1) / mask.sum(1).clamp_min(1)).mean()


class Expo(stackrl.Plugin):
    """Self-explanation policy optimization: answer-conditioned explanations of the groups without a correct sample,
    learnt from the original prompt as a weighted likelihood term (``loss``) or as the group's positive (``insert``)."""

    Config = ExpoConfig
    activity = "groups got explanations"

    def __init__(self, config=None):
        super().__init__(config)
        check(self.config)

    def needs_rewards(self) -> dict[str, str]:
        return {"correct_reward": self.config.correct_reward} if self.config.mode == "loss" else {}

    def check_run(self, run):
        if self.config.explanations_per_group > run.group_size:
            raise stackrl.ConfigError(
                f"expo.explanations_per_group: at most the group size (trainer.num_generations={run.group_size}): "
                f"a group's explanations stand beside its samples, never outnumber them; not "
                f"{self.config.explanations_per_group}"
            )
        run.check_template(self, "explanation_template", own=("last_step",))

    def groups_to_explain(self, correct: list[bool], group_size: int) -> list[int]:
        """The groups with no correct row (every group with ``every_group``)."""
        if self.config.every_group:
            return list(range(len(correct) // group_size))
        return failed_groups(correct, group_size)

    def _explain(self, ctx, prompts, columns, correct, per_group):
        answers, size = columns.get(self.config.answer_column), ctx.group_size
        # A group without an answer has none to explain toward: it stays GRPO's (a missing column is explain's error).
        groups = [g for g in self.groups_to_explain(correct, size) if answers is None or answers[g * size] is not None]
        ctx.log("explained_groups", len(groups) / max(1, len(correct) // ctx.group_size))
        ctx.acted(len(groups), of=len(correct) // size, hint="each group had a correct completion")
        return explain(ctx, prompts, columns, groups, self.config, where=f"{self.name}.explanation_template",
                       per_group=per_group)

    # -- insert: an explanation takes the last row of its group --------------------------------------------------

    @stackrl.hookimpl
    def generate_rollout(self, prompts, ctx):
        if self.config.mode != "insert" or not ctx.training:
            return None
        samples = ctx.generate(prompts)
        if self.config.answer_column not in ctx.rollout_columns:
            raise stackrl.PluginError(f"{self.name}.answer_column: the dataset has no column "
                                      f"'{self.config.answer_column}'")
        answers = ctx.rollout_columns[self.config.answer_column]
        correct = [reaches(s.text, a) for s, a in zip(samples, answers)]
        explained = self._explain(ctx, prompts, ctx.rollout_columns, correct, per_group=1)
        replacements = {group: explanation.completion_ids for group, (explanation,) in explained.items()}
        return into_last_rows(samples, replacements, ctx.group_size, INSERTED)

    # -- loss: ExP-GRPO's likelihood term ------------------------------------------------------------------------

    @stackrl.hookimpl
    def reshape_advantages(self, ctx):
        # The advantages stay GRPO's; this stage sees the whole batch, with its rewards, on every process, which
        # is where explanations are sampled, and the loss stage finds them in the column.
        rollout = ctx.rollout
        if self.config.mode == "insert":
            if ctx.training and INSERTED not in rollout.columns:
                raise stackrl.PluginError(
                    f"{self.name}.mode: 'insert' needs expo to generate the rollout, but another plugin does "
                    "(exclusive.generate_rollout); use mode 'loss' in that stack"
                )
            return None
        explained = {}
        if ctx.training:
            correct = rollout.passing(
                self.config.correct_reward, self.config.correct_threshold, key=f"{self.name}.correct_reward",
                step=ctx.step,
            ).tolist()
            explained = self._explain(ctx, rollout.prompts, rollout.columns, correct,
                                      per_group=self.config.explanations_per_group)
        column = [[] for _ in range(len(rollout))]
        for group, generations in explained.items():
            column[group * rollout.group_size] = [g.completion_ids for g in generations]
        rollout.columns[EXPLANATIONS] = column
        return None

    @stackrl.hookimpl
    def loss_term(self, ctx):
        if self.config.mode != "loss":
            return None
        rows = [(i, ids) for i, kept in enumerate(ctx.rollout.columns[EXPLANATIONS]) for ids in kept]
        if not rows:
            return None
        # Scored as TRL's loss reads the policy: the logits over the sampling temperature.
        scores = ctx.score([ctx.rollout.prompt_ids[i] for i, _ in rows], [ids for _, ids in rows],
                           grad=ctx.training, temperature=ctx.sampling_temperature)
        return explanation_nll(scores.logprobs, scores.mask)
