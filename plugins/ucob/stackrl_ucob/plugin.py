"""UCOB (arXiv 2606.29502; catalogue 000:227) on a one-turn task: two views of each prompt, the better one teaches.

Each group is split into a plain view (the prompt) and a skill view (a retrieved skill, then the prompt), sampled by
the same policy and both trained by GRPO. The view with the higher mean return teaches the other by self-distillation
on its best completions; the skill's utility moves with the skill view's return gap over the plain view, and
retrieval ranks records by similarity and utility. Code followed: github.com/TU2021/UCOB at d38292c.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, Optional

import torch

import stackrl
from stackrl.blocks.experience import Experience, ExperienceSettings, prompt_text
from stackrl.blocks.teacher import TeacherSettings, teacher_prompts
from stackrl.plugin import template_fields, training_only

from stackrl_ucob.distillation import gated_topk_kl
from stackrl_ucob.skills import SkillMemory, relative_score
from stackrl_ucob.views import PLAIN, SKILL, compare_views

VIEW = "ucob_view"  # per row: "skill" or "plain"
SKILL_KEY = "ucob_skill"  # per row: the key of the skill its group retrieved (None: the group had none)
OTHER_VIEW = "ucob_other_view"  # per row: the other view's context, where its group has two views
WEIGHT = "ucob_weight"  # per row, from the advantage stage: its distillation weight (0: not distilled)


@dataclass
class UcobConfig(TeacherSettings):
    # Inherited (stackrl.blocks.teacher.TeacherSettings): teacher, the weights that score the winning view (policy:
    # the live policy, as the authors' on-policy teacher), and temperature (null: the run's sampling temperature).
    section: ClassVar[str] = "ucob"
    # The skill view's prompt: {skill} (the retrieved record's completion) before {prompt}. The default is the
    # built-in model's reference layout (stackrl.tasks.arithmetic.REFERENCE_TEMPLATE); a GPU recipe words it.
    template: str = "{skill}\n\n{prompt}"
    # Retrieval (authors' defaults): among the top_m records most similar to the prompt whose similarity reaches
    # relevance_threshold, the one of highest alpha * similarity + (1 - alpha) * (utility + ucb bonus).
    relevance_threshold: float = 0.4
    top_m: int = 10
    alpha: float = 0.1
    ucb_scale: float = 0.1
    # Utility: after each use, utility <- (1 - beta) utility + beta (0.5 + 0.5 (skill mean - plain mean)).
    beta: float = 0.2
    initial_utility: float = 0.0
    # Writing: each group's best row whose return reaches write_min joins the library as a skill (ours).
    write_min: float = 1.0
    # The comparison (authors' cbsd defaults): a gap within margin teaches nothing; a row's weight is
    # min(gap / tau, weight_max); at most max_pairs rows of the teacher view per group.
    margin: float = 0.05
    tau: float = 0.2
    weight_max: float = 2.0
    max_pairs: int = 2
    # The loss: forward KL from the teacher's top_k tokens (null: the full vocabulary), gated per token by
    # sigmoid(gate_beta * (log p_teacher - log p_student)) of the sampled token (null: no gate).
    top_k: Optional[int] = 32
    gate_beta: Optional[float] = 5.0
    experience: ExperienceSettings = field(
        default_factory=lambda: ExperienceSettings(capacity=256, per_prompt=1, eviction="lowest_utility"))

    def check(self):
        missing = {"prompt", "skill"} - set(template_fields(self.template))
        if missing:
            self.refuse("template", f"must contain {' and '.join('{' + m + '}' for m in sorted(missing))}")
        if not 0.0 <= self.alpha <= 1.0:
            self.refuse("alpha", f"must lie in [0, 1], not {self.alpha}")
        if not 0.0 < self.beta <= 1.0:
            self.refuse("beta", f"must lie in (0, 1], not {self.beta}")
        if not math.isfinite(self.initial_utility):
            self.refuse("initial_utility", f"must be a finite number, not {self.initial_utility}")
        for key in ("ucb_scale", "margin"):
            if getattr(self, key) < 0:
                self.refuse(key, f"must be non-negative, not {getattr(self, key)}")
        for key in ("tau", "weight_max"):
            if getattr(self, key) <= 0:
                self.refuse(key, f"must be positive, not {getattr(self, key)}")
        for key in ("top_m", "max_pairs"):
            if getattr(self, key) < 1:
                self.refuse(key, f"must be at least 1, not {getattr(self, key)}")
        if self.gate_beta is not None and self.gate_beta <= 0:
            self.refuse("gate_beta", f"must be positive (or null: no gate), not {self.gate_beta}")
        self.experience.check("ucob")


class Ucob(stackrl.Plugin):
    """Splits each group into a skill view and a plain view, lets the better view teach the other, and keeps the
    skill memory (records, utilities, use counts) as state."""

    Config = UcobConfig
    activity = "groups had a retrieved skill and were split into a skill view and a plain view"

    def __init__(self, config=None):
        super().__init__(config)
        self.memory = SkillMemory(self.config.experience, "ucob")

    def check_run(self, run):
        if self.config.teacher == "reference":
            run.need_reference("ucob.teacher", "the frozen teacher of the winning view is")

    # -- sample: the two views ------------------------------------------------------------------------------------
    @stackrl.hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        config, size = self.config, ctx.group_size
        plain_rows = max(1, size // 2)  # the authors' split: the first half of a group plain, the rest skilled
        contexts, views, keys, others = list(prompts), [PLAIN] * len(prompts), [None] * len(prompts), [None] * len(prompts)
        groups = len(prompts) // size
        skilled = 0
        for g in range(groups):
            prompt = prompts[g * size]
            found = self.memory.retrieve(prompt_text(prompt), threshold=config.relevance_threshold, top_m=config.top_m,
                                         alpha=config.alpha, ucb_scale=config.ucb_scale)
            if found is None or plain_rows >= size:
                continue
            skilled += 1
            record = found[0]
            skill_view = teacher_prompts([prompt], {"skill": [record.completion]}, config.template,
                                         where="ucob.template")[0]
            for i in range(g * size, (g + 1) * size):
                keys[i] = record.key
                if i - g * size >= plain_rows:
                    contexts[i], views[i], others[i] = skill_view, SKILL, prompt
                else:
                    others[i] = skill_view
        samples = ctx.generate(contexts)
        ctx.acted(skilled, of=groups, hint="no record in ucob's library was similar enough to a prompt "
                                           "(ucob.relevance_threshold; the library fills from rows reaching ucob.write_min)")
        ctx.log("library", len(self.memory))
        return stackrl.Samples(completion_ids=[list(s.completion_ids) for s in samples],
                               prompt_ids=[list(s.prompt_ids) for s in samples],
                               columns={VIEW: views, SKILL_KEY: keys, OTHER_VIEW: others})

    # -- advantage: the comparison, the utility update and the skills written -------------------------------------
    @stackrl.hookimpl
    def reshape_advantages(self, advantages, ctx):
        rollout = ctx.rollout
        if VIEW not in rollout.columns or not ctx.training:
            return None
        config, size = self.config, rollout.group_size
        returns = [float(r) for r in ctx.total_reward]
        views, keys = rollout.columns[VIEW], rollout.columns[SKILL_KEY]
        weights, groups = compare_views(returns, views, size, margin=config.margin, tau=config.tau,
                                        weight_max=config.weight_max, max_pairs=config.max_pairs)
        rollout.columns[WEIGHT] = weights
        for g, group in enumerate(groups):
            key = keys[g * size]
            if key is not None and group.skill_mean is not None and group.plain_mean is not None:
                self.memory.credit(key, relative_score(group.skill_mean, group.plain_mean), config.beta)
        self.write(rollout, returns, ctx.step)
        compared = [group for group in groups if group.skill_mean is not None and group.plain_mean is not None]
        ctx.log("skill_teaches", sum(group.teacher == SKILL for group in groups) / max(1, len(groups)))
        ctx.log("plain_teaches", sum(group.teacher == PLAIN for group in groups) / max(1, len(groups)))
        ctx.log("distilled_rows", sum(w > 0 for w in weights) / max(1, len(weights)))
        if compared:
            ctx.log("skill_gap", sum(g.skill_mean - g.plain_mean for g in compared) / len(compared))
        if len(self.memory):
            ctx.log("utility", sum(r.utility for r in self.memory.library) / len(self.memory))
        return None

    def write(self, rollout, returns: list[float], step: int) -> None:
        """Each group's best row reaching ``write_min`` becomes a skill of its prompt (the plain view's tokens)."""
        size = rollout.group_size
        for start in range(0, len(returns), size):
            best = max(range(start, start + size), key=lambda i: returns[i])
            if returns[best] < self.config.write_min:
                continue
            record = Experience.of_row(rollout, best, step, utility=self.config.initial_utility, tags=["ucob"])
            record.prompt_ids = list(rollout.prompt_ids[start])  # a group's first row is plain: its own prompt
            record.prompt = prompt_text(rollout.prompts[start])
            self.memory.add(record)

    # -- loss: the winning view teaches the other -----------------------------------------------------------------
    @stackrl.hookimpl
    def loss_term(self, ctx):
        weights = ctx.rollout.columns.get(WEIGHT)
        if weights is None:
            return None
        rows = [i for i, w in enumerate(weights) if w > 0]
        if not rows:
            return None
        rollout = ctx.rollout.select(rows)
        config = self.config
        temperature = ctx.sampling_temperature if config.temperature is None else config.temperature
        positions = [range(len(ids)) for ids in rollout.completion_ids]
        teacher = ctx.score(rollout.prompt_ids, rollout.completion_ids, model=config.teacher, positions=positions,
                            temperature=temperature, topk=config.top_k, full_vocab=config.top_k is None)
        student = ctx.score(rollout.columns[OTHER_VIEW], rollout.completion_ids, grad=ctx.training,
                            positions=positions, temperature=temperature, full_vocab=True)
        per_position = torch.cat([torch.full((len(ids),), float(weights[i]))
                                  for i, ids in zip(rows, rollout.completion_ids)]).to(student.logprobs.device)
        teacher_dist = teacher.vocab_logprobs if config.top_k is None else teacher.topk_logprobs
        return gated_topk_kl(student.vocab_logprobs, teacher_dist, None if config.top_k is None else teacher.topk_ids,
                             student.logprobs[student.mask.bool()], teacher.logprobs[teacher.mask.bool()],
                             per_position, gate_beta=config.gate_beta)

    # -- state ------------------------------------------------------------------------------------------------------
    @stackrl.hookimpl
    def state_dict(self):
        return {"memory": self.memory.state_dict()}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.memory = SkillMemory(self.config.experience, "ucob")
        self.memory.load_state_dict(state["memory"])
