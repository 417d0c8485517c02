"""CoMAS with one policy playing every agent: some groups solve, the others critique another agent's solution; a
scorer reads each solution with a critique of it and scores it; the solution earns the score, the critique the rest.

A critique group's prompt is its question with one on-policy solution in the built-in task's judge format
(``stackrl.tasks.judge_prompt``); its ``group_size`` rows are critiques of that solution. A solve group's rows are
solutions; in the reward stage each gets one sampled critique of its own (not trained). The scorer is the policy in
the judge role, shown the question, the solution and the critique's check lines, giving the verdict
(:mod:`stackrl_comas.rewards`). No answer is read: the rewards come from the discussion alone.
"""

from __future__ import annotations

from stackrl import ConfigError, Plugin, Samples, hookimpl
from stackrl.blocks.judges import Judge, JudgeSettings, Scale
from stackrl.blocks.roles import assign_roles, first_turns, rows_of_groups, text_prompt
from stackrl.rewards import ROLE_COLUMN, SOLVE, VERIFY, extract_answer
from stackrl.tasks import judge_prompt
from stackrl_comas.config import ComasConfig
from stackrl_comas.rewards import VERDICT_MARK, critique_reward, scorer_prompt, solution_reward

SOLUTION_COLUMN = "comas_solution"  # column: the solution a critique row critiques (None on solve rows)


class Comas(Plugin):
    Config = ComasConfig
    activity = "solutions and critiques got a well-formed score"

    def __init__(self, config=None):
        super().__init__(config)
        c = self.config
        self.shares = {SOLVE: 1 - c.critique_share, VERIFY: c.critique_share}
        self.scorer = Judge(JudgeSettings(judge_template="{attempt}", scale=Scale.correct_wrong, mode=c.scorer,
                                          verdict_prefix=VERDICT_MARK, max_new_tokens=c.scorer_max_tokens,
                                          temperature=c.scorer_temperature), self.name)

    def check_run(self, run):
        if run.chat:
            raise ConfigError(
                "comas: data.chat is true, but critiques and scores extend the question as plain text in the built-in "
                "task's judge format (docs/roles.md); set data.chat=false"
            )

    @hookimpl
    def generate_rollout(self, prompts, ctx):
        if not ctx.training:  # held-out evaluation measures plain solving
            return None
        size = ctx.group_size
        group_roles = assign_roles(len(prompts) // size, self.shares, key=f"{self.name}.critique_share")
        solutions = {g: tries[0].text for g, tries in first_turns(prompts, group_roles, {VERIFY}, ctx).items()}
        rows = [judge_prompt(text_prompt(p, role=VERIFY), solutions[i // size]) if i // size in solutions else p
                for i, p in enumerate(prompts)]
        generations = ctx.generate(rows)
        return Samples(
            completion_ids=[g.completion_ids for g in generations],
            prompt_ids=[g.prompt_ids for g in generations],
            columns={ROLE_COLUMN: rows_of_groups(group_roles, size),
                     SOLUTION_COLUMN: rows_of_groups([solutions.get(g) for g in range(len(group_roles))], size)},
        )

    @hookimpl
    def reward(self, ctx):
        rollout, n = ctx.rollout, len(rollout)
        roles = rollout.columns.get(ROLE_COLUMN, [SOLVE] * n)  # no roles in evaluation: every row solves
        critiqued = rollout.columns.get(SOLUTION_COLUMN, [None] * n)
        questions = [text_prompt(p, role=VERIFY) for p in rollout.prompts]
        # The solution each row is about (a critique row's: the one it critiqued), and a critique of it (a solve
        # row's: one sampled now from the policy in the judge role, not trained).
        solutions = [critiqued[i] if roles[i] == VERIFY else rollout.completions[i] for i in range(n)]
        solving = [i for i in range(n) if roles[i] != VERIFY]
        sampled = ctx.generate([judge_prompt(questions[i], solutions[i]) for i in solving]) if solving else []
        critiques = list(rollout.completions)
        for i, generation in zip(solving, sampled):
            critiques[i] = generation.text
        scores = self.scorer.judgements(ctx, [scorer_prompt(q, s, c) for q, s, c in zip(questions, solutions, critiques)])
        c = self.config
        rewards = [critique_reward(s, c.malformed) if roles[i] == VERIFY else solution_reward(s, c.malformed)
                   for i, s in enumerate(scores)]
        ctx.acted(sum(s is not None for s in scores), of=n, hint=f"the scorer gave no verdict; see {self.name}.scorer_max_tokens")
        # Pseudo-labels: the answer of the solution a row is about, where the scorer accepted that solution.
        ctx.declare_pseudo_labels([extract_answer(t) if s is not None and s >= 0.5 else None
                                   for t, s in zip(solutions, scores)])
        self._log(ctx, roles, scores)
        return rewards

    def _log(self, ctx, roles, scores) -> None:
        ctx.log("score_malformed", sum(s is None for s in scores) / max(1, len(scores)))
        for role, name in ((SOLVE, "solution_score"), (VERIFY, "critique_score")):
            mine = [s for r, s in zip(roles, scores) if (r == VERIFY) == (role == VERIFY) and s is not None]
            if mine:
                ctx.log(name, sum(mine) / len(mine))  # the normalised score of the solutions, of those critiqued

