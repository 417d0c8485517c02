"""PMD level 1: the policy, shown its own earlier verified solution of the problem, teaches itself on its rollouts."""

from __future__ import annotations

import torch

from stackrl import Rollout, hookimpl
from stackrl.blocks.memory import PromptMemory
from stackrl.blocks.teacher import SelfTeacherPlugin, generalized_jsd, privileged, student_and_teacher
from stackrl.errors import ConfigError
from stackrl_pmd.config import MEMORY, PmdConfig


def memory_divergence(scorer, rollout: Rollout, config: PmdConfig, *, grad: bool) -> torch.Tensor:
    """The generalized JSD between the student (the bare prompt) and the teacher (the policy shown the row's
    memory through ``teacher_template``) at every completion token of ``rollout``, packed ``(P,)``.

    ``scorer`` is anything with ``score`` and ``sampling_temperature`` (a hook's ``ctx``); every row must have a
    memory. The student keeps its gradient when ``grad``.
    """
    student, teacher = student_and_teacher(
        scorer, rollout, config.teacher_template, teacher=config.teacher, temperature=config.temperature,
        grad=grad, top_k=config.top_k, where=f"{config.section}.teacher_template",
    )
    return generalized_jsd(student, teacher, config.beta)


class Pmd(SelfTeacherPlugin):
    """Procedural memory distillation with the experience memory (level 1).

    After every step the first verified completion of each group becomes its prompt's memory; in the advantage
    stage each row gets its prompt's memory from earlier steps as the column ``memory``; the loss term is the
    generalized JSD from the student (the bare prompt) to the policy shown that memory, on the rows that have one.
    The memory is plugin state, checkpointed; the trained model needs none at inference.
    """

    Config = PmdConfig
    activity = "completions were distilled on (their prompt had a remembered verified solution)"

    def __init__(self, config=None):
        super().__init__(config)
        self.memory = PromptMemory(latest=self.config.update == "latest")  # each prompt's verified solution

    def needs_rewards(self) -> dict[str, str]:
        return {"correct_reward": self.config.correct_reward}

    def check_run(self, run):
        if run.columns is not None and MEMORY in run.columns:
            raise ConfigError(f"{self.name}.teacher_template: the data has a column '{MEMORY}', the name of the "
                              "column pmd adds; rename the data's column")
        super().check_run(run)

    def passed(self, rollout, step: int) -> list[bool]:
        return rollout.passing(self.config.correct_reward, self.config.correct_threshold,
                               key=f"{self.name}.correct_reward", step=step).tolist()

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        rollout = ctx.rollout
        remembered = self.memory.recall(rollout.prompt_ids)
        if self.config.distill == "failed":
            remembered = [None if ok else text for text, ok in zip(remembered, self.passed(rollout, ctx.step))]
        rollout.columns[MEMORY] = remembered
        ctx.log("remembered_rows", sum(text is not None for text in remembered) / max(1, len(rollout)))
        return None

    @hookimpl
    def post_step(self, ctx):
        # The rollout of this step updates the memory that later steps' teachers see: co-evolution.
        if ctx.rollout is None:
            return
        rollout = ctx.rollout
        changed = self.memory.remember(rollout.prompt_ids, rollout.completions, self.passed(rollout, ctx.step),
                                       rollout.group_size)
        ctx.log("changed", changed)
        ctx.log("memory_size", len(self.memory))

    @hookimpl
    def loss_term(self, ctx):
        rollout = privileged(ctx.rollout, self.config.teacher_template)
        ctx.acted(0 if rollout is None else len(rollout), of=len(ctx.rollout),
                  hint="no prompt of the batch had a verified solution from an earlier step yet (pmd.correct_reward)")
        if rollout is None:
            return None
        # TRL's GKD "batchmean": the mean over the micro-batch's distilled tokens.
        return memory_divergence(ctx, rollout, self.config, grad=ctx.training).mean()

    @hookimpl
    def state_dict(self):
        return {"solutions": self.memory.state_dict()}

    @hookimpl
    def load_state_dict(self, state):
        self.memory.load_state_dict(state["solutions"])
