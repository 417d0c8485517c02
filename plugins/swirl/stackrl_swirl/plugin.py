"""SWIRL on the built-in task's transitions: one policy is both the forward world model and the inverse dynamics
model (the two prompts of stackrl.tasks.transitions), trained by GRPO in alternating phases, each rewarded by the
other direction frozen at the phase's start."""

from __future__ import annotations

import random

from stackrl import ConfigError, Plugin, Samples, hookimpl
from stackrl.plugin import training_only
from stackrl.rewards import ROLE_COLUMN
from stackrl.tasks.transitions import transitions

from stackrl_swirl.config import SwirlConfig
from stackrl_swirl.rewards import FORWARD, INVERSE, generation_prompt, mean_logprob, opposite_query, phase_at

SNAPSHOT = "swirl"  # the frozen opposite model: the policy as it was when the current phase began
STATE, TARGET = "swirl_state", "swirl_target"  # rollout columns: each row's state and what its reward scores


class Swirl(Plugin):
    """Each generation batch is one phase's: every group gets one transition (state X, action Z, next state Y) of
    its question's solution; in the forward phase the policy writes Y' from (X, Z) and is rewarded by the frozen
    snapshot's mean log-probability of Z given (X, Y'); in the inverse phase it writes Z' from (X, Y), rewarded by
    the snapshot's mean log-probability of Y given (X, Z'). The snapshot is retaken at the start of every phase."""

    Config = SwirlConfig
    activity = "completions scored by the frozen opposite model"

    def check_run(self, run):
        run.need_column("swirl.solution_column", self.config.solution_column, "the transitions' actions")
        return None

    @hookimpl
    def train_begin(self, ctx):
        # A fresh run freezes the policy for its first phase; a run resumed mid-phase keeps the snapshot the host
        # restored from the checkpoint (the phase's frozen model), so it continues as an uninterrupted run would.
        if ctx.step % self.config.phase_steps == 0:
            ctx.update_snapshot(SNAPSHOT, checkpoint=True)

    @hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        phase = phase_at(ctx.step, self.config.phase_steps, self.config.first)
        solutions = ctx.rollout_columns[self.config.solution_column]
        asked, states, targets = [], [], []
        for start in range(0, len(prompts), ctx.group_size):
            prompt = prompts[start]
            if not isinstance(prompt, str):
                raise ConfigError("swirl: the transition prompts extend the task's text; chat prompts are refused")
            steps = transitions(prompt, solutions[start])
            # The same choice on every process: seeded by the step, the group and its question.
            state, action, following = random.Random(f"{ctx.step}:{start}:{prompt}").choice(steps)
            for _ in range(ctx.group_size):
                asked.append(generation_prompt(phase, state, action, following))
                states.append(state)
                targets.append(action if phase == FORWARD else following)
        generations = ctx.generate(asked)
        ctx.log("forward_phase", float(phase == FORWARD))
        return Samples(completion_ids=[g.completion_ids for g in generations],
                       prompt_ids=[g.prompt_ids for g in generations],
                       columns={ROLE_COLUMN: [phase] * len(asked), STATE: states, TARGET: targets})

    @hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        roles = rollout.columns.get(ROLE_COLUMN) or [None] * len(rollout)
        rows = [i for i, role in enumerate(roles) if role in (FORWARD, INVERSE)]
        ctx.acted(len(rows), of=len(rollout),
                  hint="no row was a transition: swirl's generate_rollout must be the run's (exclusive.generate_rollout)")
        if not rows:
            return [None] * len(rollout)
        contexts = [opposite_query(roles[i], rollout.columns[STATE][i], rollout.completions[i],
                                   rollout.columns[TARGET][i]) for i in rows]
        eos = ctx.tokenizer.eos_token_id
        targets = [ctx.tokenizer(rollout.columns[TARGET][i], add_special_tokens=False)["input_ids"] + [eos]
                   for i in rows]
        scores = ctx.score(contexts, targets, model=SNAPSHOT)
        values = mean_logprob(scores.logprobs, scores.mask, self.config.floor).tolist()
        result: list = [None] * len(rollout)
        for i, value in zip(rows, values):
            result[i] = value
        return result

    @hookimpl
    def post_step(self, ctx):
        # A new phase begins at the next step: freeze the policy as the opposite model it will be rewarded by.
        if ctx.step % self.config.phase_steps == 0:
            ctx.update_snapshot(SNAPSHOT, checkpoint=True)
