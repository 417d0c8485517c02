"""SPEAR: curriculum-based self-imitation for agentic LLMs.

Paper: Qin et al., "Learn the Ropes, Then Trust the Wins: Self-imitation with Progressive Exploration for Agentic
Reinforcement Learning" (SPEAR), arXiv 2509.22601. Code followed: TencentYoutuResearch/SPEAR (verl-agent:
TrajectoryBufferBatch in ray_trainer_hybrid.py; the tool-call reward in the reward scorers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

import stackrl
from stackrl.blocks.experience import Experience, ExperienceSettings
from stackrl.plugin import training_only
from stackrl_spear.buffer import ReplayBuffer
from stackrl_spear.curriculum import falling_schedule, rising, tool_call_reward, tool_calls
from stackrl_spear.imitation import clipped_surrogate, padded

# The rollout column marking the rows replayed from the buffer, and the one holding their recalibrated advantage.
REPLAYED = "spear_replayed"
ADVANTAGE = "spear_advantage"


@dataclass
class SpearConfig:
    # The intrinsic tool-call reward (component `spear`): `per_call` for each match of `tool_pattern` in the
    # completion, at most `reward_cap` (the authors': 0.1 per tool-call turn, at most 1.0); its weight falls on a
    # cosine from 1 at step 0 to 0 at `tool_steps` (the authors' max_toolcall_steps, 200 in their recipes).
    tool_pattern: str = r"<calc>.*?</calc>"
    per_call: float = 0.1
    reward_cap: float = 1.0
    tool_steps: int = 200
    # Self-imitation: `imitation_coef` times the clipped surrogate on replayed rows, its share rising on a cosine
    # from 0 at step 0 to 1 at `imitation_steps` (the authors' replay_loss_coef 1, max_replay_loss_steps 200; 0:
    # full from the start). The ratio is clipped to [1 - clip_low, 1 + clip_high] (Dr.BoT's 0.2, 0.28).
    imitation_coef: float = 1.0
    imitation_steps: int = 200
    clip_low: float = 0.2
    clip_high: float = 0.28
    # The buffer: a row of positive advantage enters; a record leaves `tolerate_steps` steps after it was sampled
    # (the authors' trajectory_tolerate_steps, 10 in their README); the baseline is the median of the newest
    # `baseline_groups` group-mean rewards (their baseline_buffer_size). `replay_rows` rows of a group whose prompt
    # has a record of positive recalibrated advantage are replaced by the best ones.
    tolerate_steps: int = 10
    baseline_groups: int = 10240
    replay_rows: int = 1
    experience: ExperienceSettings = field(
        default_factory=lambda: ExperienceSettings(capacity=2048, eviction="lowest_utility"))

    def __post_init__(self):
        try:
            re.compile(self.tool_pattern)
        except re.error as error:
            raise stackrl.ConfigError(f"spear.tool_pattern: not a regular expression: {error}") from None
        for key in ("per_call", "imitation_coef", "clip_high"):
            if getattr(self, key) < 0:
                raise stackrl.ConfigError(f"spear.{key}: must be non-negative, not {getattr(self, key)}")
        if self.reward_cap <= 0:
            raise stackrl.ConfigError(f"spear.reward_cap: must be positive, not {self.reward_cap}")
        if self.tool_steps < 1:
            raise stackrl.ConfigError(f"spear.tool_steps: must be at least 1, not {self.tool_steps}")
        for key in ("imitation_steps", "tolerate_steps", "replay_rows"):
            if getattr(self, key) < 0:
                raise stackrl.ConfigError(f"spear.{key}: must be 0 or more, not {getattr(self, key)}")
        if not 0.0 <= self.clip_low < 1.0:
            raise stackrl.ConfigError(f"spear.clip_low: must lie in [0, 1), not {self.clip_low}")
        if self.baseline_groups < 1:
            raise stackrl.ConfigError(f"spear.baseline_groups: must be at least 1, not {self.baseline_groups}")


class Spear(stackrl.Plugin):
    """Stores the rows of positive advantage with their behaviour log-probs; replays a prompt's best stored row
    into its group's last row, out of TRL's policy loss, and trains it with a clipped surrogate against its
    behaviour policy and its advantage recalibrated against the buffer's median baseline, on a rising coefficient;
    rewards tool calls with a weight that falls. The buffer is plugin state."""

    Config = SpearConfig
    activity = "rows entered the replay buffer or were replayed from it"

    def __init__(self, config=None):
        super().__init__(config)
        c = self.config
        self.pattern = re.compile(c.tool_pattern, re.DOTALL)
        self.buffer = ReplayBuffer(c.experience, "spear", c.tolerate_steps, c.baseline_groups)

    def check_run(self, run):
        if run.group_size is not None and self.config.replay_rows >= run.group_size:
            raise stackrl.ConfigError(f"spear.replay_rows: must leave a sampled row in each group of "
                                      f"{run.group_size}, not {self.config.replay_rows}")

    def reward_weight(self):
        return falling_schedule(self.config.tool_steps)

    def imitation_weight(self, step: int) -> float:
        return self.config.imitation_coef * rising(step, self.config.imitation_steps)

    # -- sample: the prompt's best stored rows replace the group's last rows ------------------------------------
    @stackrl.hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        fresh = ctx.generate(prompts)
        size, n = ctx.group_size, len(prompts)
        self.buffer.expire(ctx.step)
        completions = [list(g.completion_ids) for g in fresh]
        behaviour, replayed, advantage = [None] * n, [False] * n, [0.0] * n
        for start in range(0, n, size):
            picks = self.buffer.best(fresh[start].prompt_ids, self.config.replay_rows)
            for j, (record, adv) in enumerate(picks):
                row = start + size - 1 - j
                completions[row] = list(record.completion_ids)
                behaviour[row], replayed[row], advantage[row] = list(record.behaviour_logprobs), True, adv
        return stackrl.Samples(completion_ids=completions, prompt_ids=[list(g.prompt_ids) for g in fresh],
                               behaviour_logprobs=behaviour if any(replayed) else None,
                               columns={REPLAYED: replayed, ADVANTAGE: advantage})

    # -- reward: the tool-call reward, read from the completion text --------------------------------------------
    @stackrl.hookimpl
    def reward(self, ctx):
        c = self.config
        calls = [tool_calls(text, self.pattern) for text in ctx.rollout.completions]
        ctx.log("tool_calls", sum(calls) / max(1, len(calls)))
        return [tool_call_reward(k, c.per_call, c.reward_cap) for k in calls]

    # -- advantage: replayed rows out of TRL's loss; this step's rows of positive advantage into the buffer -----
    @stackrl.hookimpl
    def reshape_advantages(self, advantages, ctx):
        if not ctx.training:
            return None
        rollout, size = ctx.rollout, ctx.group_size
        n = len(rollout)
        replayed = rollout.columns.get(REPLAYED, [False] * n)
        rows_replayed = [i for i in range(n) if replayed[i]]
        if rows_replayed:
            rollout.exclude_from_loss(rows_replayed)
            if rollout.importance_weights is not None:
                weights = rollout.importance_weights[rows_replayed]
                if weights.dim() == 2:
                    mask = rollout.completion_mask()[rows_replayed].to(weights.dtype)
                    weights = (weights * mask).sum(1) / mask.sum(1).clamp(min=1)
                ctx.log("importance_weight", float(weights.mean()))
        per_row = advantages
        if advantages.dim() == 2:
            mask = rollout.completion_mask().to(advantages.dtype)
            per_row = (advantages * mask).sum(1) / mask.sum(1).clamp(min=1)
        total = ctx.total_reward
        stored = [i for i in range(n) if not replayed[i] and float(per_row[i]) > 0]
        if stored:
            scores = ctx.score([rollout.prompt_ids[i] for i in stored], [rollout.completion_ids[i] for i in stored],
                               temperature=ctx.sampling_temperature)
            for j, row in enumerate(stored):
                logps = scores.logprobs[j, : len(rollout.completion_ids[row])].tolist()
                self.buffer.store(Experience.of_row(rollout, row, ctx.step, utility=float(total[row]),
                                                    behaviour_logprobs=logps))
        self.buffer.observe(torch.nan_to_num(total).view(-1, size).mean(1).tolist())
        self.buffer.expire(ctx.step)
        ctx.log("buffer", len(self.buffer))
        if self.buffer.baseline() is not None:
            ctx.log("baseline", self.buffer.baseline())
        ctx.log("replayed", len(rows_replayed) / max(1, n))
        ctx.acted(len(stored) + len(rows_replayed), of=n,
                  hint="no row had a positive advantage (every group agreed) and none was replayed")
        return None

    # -- distill: the self-imitation term on the micro-batch's replayed rows ------------------------------------
    @stackrl.hookimpl
    def loss_term(self, ctx):
        replayed = ctx.rollout.columns.get(REPLAYED)
        if not replayed or not any(replayed):
            return None
        rows = [i for i, r in enumerate(replayed) if r]
        logps = ctx.policy_logps[rows]
        behaviour = padded([ctx.rollout.behaviour_logprobs[i] for i in rows], logps.shape[1], logps)
        advantages = torch.tensor([ctx.rollout.columns[ADVANTAGE][i] for i in rows], device=logps.device)
        loss = clipped_surrogate(logps, behaviour, advantages, ctx.completion_mask[rows],
                                 self.config.clip_low, self.config.clip_high)
        weight = self.imitation_weight(ctx.step)
        ctx.log("imitation_coef", weight)
        ctx.log("imitation", float(loss.detach()))
        return weight * loss

    @stackrl.hookimpl
    def state_dict(self):
        return {"buffer": self.buffer.state_dict()}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.buffer.load_state_dict(state["buffer"])
