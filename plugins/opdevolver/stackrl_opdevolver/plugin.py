"""OPD-Evolver on GRPO, with one memory level: past trials of similar prompts.

Fast loop (sample stage): each group's prompt retrieves its candidate records; some rows read one in their prompt.
Attribution (advantage stage): each candidate's utility moves toward the gap between the outcomes of the rows that
read it and the group's rows that did not; correct rows are written as new records, and the lowest-utility record
is evicted first. Slow loop (loss term): the plain rows are distilled from the policy shown the memory that
outcomes showed helped plus the hindsight (the worked solution), the student seeing neither.

Paper: OPD-Evolver: Cultivating Holistic Agent Evolver via On-Policy Distillation (Zhang, Xu, Yue, Su, Zhou, Hu,
Yan; arXiv 2606.17628). Code: none public (README).
"""

from __future__ import annotations

import hashlib

import torch

import stackrl
from stackrl.blocks.experience import Experience, ExperienceLibrary, prompt_text
from stackrl.blocks.teacher import SelfTeacherPlugin, generalized_jsd, privileged_rows, student_and_teacher, \
    teacher_prompts
from stackrl.plugin import training_only
from stackrl_opdevolver.config import OpdevolverConfig
from stackrl_opdevolver.memory import attribution_gap, candidates, memory_text, reading_plan, updated_utility

# The rollout column holding, for a plain row, the memory its teacher sees ("" for none); None on a reading row.
MEMORY = "opdevolver.memory"


def record_key(prompt_ids, completion_ids) -> str:
    """A trial's key: its plain prompt's and its completion's tokens, so a trial written twice is kept once."""
    return hashlib.sha1(repr((list(prompt_ids), list(completion_ids))).encode()).hexdigest()[:16]


class Opdevolver(SelfTeacherPlugin):
    """Memory read by part of each group, outcome-calibrated attribution of each record, and on-policy
    self-distillation of the plain rows from the teacher shown the helpful memory and the hindsight."""

    Config = OpdevolverConfig
    templates = ("teacher_template",)
    activity = "completions sampled without memory were distilled from the teacher shown memory and hindsight"

    def __init__(self, config=None):
        super().__init__(config)
        self.library = ExperienceLibrary(self.config.experience, "opdevolver")
        self._plan: list[str | None] | None = None  # the batch's rows: the record each read, None if plain
        self._groups: list[list[str]] = []  # each group's candidate keys
        # The last advantage stage's attributions: (the group's prompt text, the record, the gap), for diagnostics.
        self.attributions: list[tuple[str, Experience, float]] = []

    def needs_rewards(self) -> dict[str, str]:
        return {"outcome_reward": self.config.outcome_reward}

    def check_run(self, run):
        super().check_run(run)
        run.check_template(self, "reading_template")
        if self.config.reading_rows >= run.group_size:
            raise stackrl.ConfigError(
                f"opdevolver.reading_rows: {self.config.reading_rows} rows of a group of {run.group_size} leave no "
                "plain row to distil; give fewer")

    # -- fast loop: read ----------------------------------------------------------------------------------------------

    @stackrl.hookimpl
    @training_only
    def transform_prompts(self, prompts, ctx):
        size, config = ctx.group_size, self.config
        plan, self._groups, out = [], [], list(prompts)
        for start in range(0, len(prompts), size):
            found = candidates(self.library, prompts[start], config.candidates, config.min_utility)
            keys = [r.key for r in found]
            self._groups.append(keys)
            rows = reading_plan(size, config.reading_rows, keys)
            plan.extend(rows)
            for j, key in enumerate(rows):
                if key is not None:
                    memory = memory_text([self.library.get(key)], config.record_template)
                    columns = {name: [values[start + j]] for name, values in ctx.rollout_columns.items()}
                    out[start + j] = teacher_prompts([prompts[start + j]], {**columns, "memory": [memory]},
                                                     config.reading_template, where="opdevolver.reading_template")[0]
        self._plan = plan
        reading = sum(key is not None for key in plan)
        ctx.log("reading_rows", reading / max(1, len(prompts)))
        return out if reading else None

    # -- attribution, writing and maintenance; the teacher's memory ---------------------------------------------------

    @stackrl.hookimpl
    def reshape_advantages(self, advantages, ctx):
        plan, self._plan = self._plan, None
        rollout = ctx.rollout
        if not ctx.training or plan is None or len(plan) != len(rollout):
            return None
        config, size = self.config, rollout.group_size
        outcomes = torch.nan_to_num(rollout.rewards[config.outcome_reward].float(), nan=0.0).tolist()
        teacher_memory, self.attributions = [], []
        for g, keys in enumerate(self._groups):
            rows = range(g * size, (g + 1) * size)
            for key in dict.fromkeys(keys):
                gap = attribution_gap([outcomes[i] for i in rows], [plan[i] == key for i in rows])
                record = self.library.get(key)
                if gap is not None and record is not None:
                    self.attributions.append((prompt_text(rollout.prompts[g * size]), record, gap))
                    self.library.set_utility(key, updated_utility(record.utility, gap, config.utility_rate))
            helpful = sorted((r for r in map(self.library.get, keys) if r is not None and r.utility > 0),
                             key=lambda r: -r.utility)[:1]
            teacher_memory.append(memory_text(helpful, config.record_template))
        rollout.columns[MEMORY] = [teacher_memory[i // size] if plan[i] is None else None for i in range(len(rollout))]
        for i in range(len(rollout)):  # write: the trials that reached the outcome threshold
            plain_ids = rollout.prompt_ids[i // size * size]  # a group's first row is plain: the bare prompt
            key = record_key(plain_ids, rollout.completion_ids[i])
            if outcomes[i] >= config.write_threshold and key not in self.library:
                trial = Experience.of_row(rollout, i, ctx.step, key=key)
                trial.prompt_ids = list(plain_ids)  # a reading row's trial is filed under its bare prompt
                self.library.add(trial)
        ctx.log("library", len(self.library))
        ctx.log("teacher_memory", sum(bool(m) for m in teacher_memory) / max(1, len(teacher_memory)))
        if len(self.library):
            ctx.log("utility", sum(r.utility for r in self.library) / len(self.library))
        return None

    # -- slow loop: privileged hindsight distillation -----------------------------------------------------------------

    def distilled_rows(self, rollout) -> list[int]:
        """The plain rows with the teacher's context: a memory entry (possibly empty) and the hindsight columns."""
        memory = rollout.columns.get(MEMORY)
        if memory is None:
            return []
        return [i for i in privileged_rows(rollout, self.config.teacher_template) if memory[i] is not None]

    def divergence(self, ctx, rollout, rows: list[int]) -> torch.Tensor:
        """The generalized JSD between the student (the row's own prompt, no memory) and the teacher (memory plus
        hindsight) at every completion token of ``rows``, packed."""
        chosen = rollout.select(rows)
        chosen.columns["memory"] = chosen.columns[MEMORY]
        student, teacher = student_and_teacher(
            ctx, chosen, self.config.teacher_template, teacher=self.config.teacher,
            temperature=self.config.temperature, grad=ctx.training, where="opdevolver.teacher_template")
        return generalized_jsd(student, teacher, self.config.beta)

    @stackrl.hookimpl
    def loss_term(self, ctx):
        rows = self.distilled_rows(ctx.rollout)
        ctx.acted(len(rows), of=len(ctx.rollout), hint="no plain row had the teacher's hindsight column")
        if not rows:
            return None
        return self.divergence(ctx, ctx.rollout, rows).mean()

    # -- checkpoints --------------------------------------------------------------------------------------------------

    @stackrl.hookimpl
    def state_dict(self):
        return {"library": self.library.state_dict()}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.library.load_state_dict(state["library"])
