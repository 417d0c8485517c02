"""CoMAS with one policy playing every agent: some groups solve, the others critique another agent's solution; a
scorer reads each solution with a critique of it and scores it; the solution earns the score, the critique the rest.

A critique group's prompt is its question with one on-policy solution in the built-in task's judge format
(``stackrl.tasks.judge_prompt``); its ``group_size`` rows are critiques of that solution. A solve group's rows are
solutions; in the reward stage each gets one sampled critique of its own (not trained). The scorer is the policy in
the judge role, shown the question, the solution and the critique's check lines, giving the verdict
(:mod:`stackrl_comas.rewards`). No answer is read: the rewards come from the discussion alone.
"""

from __future__ import annotations

from stackrl import Plugin, Samples, hookimpl
from stackrl.blocks.judges import Judge, JudgeSettings, Scale
from stackrl.blocks.roles import assign_roles, judged_attempt_rows, rows_of_groups, text_prompt
from stackrl.rewards import ROLE_COLUMN, SOLUTION_ROLES, SOLVE, VERIFY, extract_answer
from stackrl.tasks import judge_prompt
from stackrl_comas.config import ComasConfig
from stackrl_comas.rewards import VERDICT_MARK, critique_reward, scorer_prompt, solution_reward

SOLUTION_COLUMN = "comas_solution"  # column: the solution a critique row critiques (None on solve rows)
SOLUTION, CRITIQUE = "solution", "critique"  # what a row is to the scorer


class Comas(Plugin):
    Config = ComasConfig
    activity = "solutions and critiques got a well-formed score"

    def __init__(self, config=None):
        super().__init__(config)
        c = self.config
        self.shares = {SOLVE: 1 - c.critique_share, VERIFY: c.critique_share}
        self.scorer = Judge(JudgeSettings(judge_template="{attempt}", scale=Scale.correct_wrong, mode=c.scorer,
                                          verdict_prefix=VERDICT_MARK, max_new_tokens=c.scorer_max_tokens,
                                          temperature=c.scorer_temperature), "comas")

    def check_run(self, run):
        run.need_plain_text("comas", "critiques and scores extend the question as plain text in the built-in task's "
                            "judge format (docs/roles.md)")

    @hookimpl
    def generate_rollout(self, prompts, ctx):
        if not ctx.training:  # held-out evaluation measures plain solving
            return None
        size = ctx.group_size
        group_roles = assign_roles(len(prompts) // size, self.shares, key=f"{self.name}.critique_share")
        solutions, generations = judged_attempt_rows(prompts, group_roles, VERIFY, ctx)  # another agent's solution
        return Samples(
            completion_ids=[g.completion_ids for g in generations],
            prompt_ids=[g.prompt_ids for g in generations],
            columns={ROLE_COLUMN: rows_of_groups(group_roles, size),
                     SOLUTION_COLUMN: rows_of_groups([solutions.get(g) for g in range(len(group_roles))], size)},
        )

    @hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        n = len(rollout)
        roles = rollout.columns.get(ROLE_COLUMN, [SOLVE] * n)  # no roles in evaluation: every row solves
        critiqued = rollout.columns.get(SOLUTION_COLUMN, [None] * n)
        # A row is a critique of ours (its solution in the column), a solution (a role that answers the question),
        # or neither (another plugin's role: left unscored).
        kind = [CRITIQUE if critiqued[i] is not None else SOLUTION if roles[i] in SOLUTION_ROLES else None
                for i in range(n)]
        rows = [i for i in range(n) if kind[i] is not None]
        questions = {i: text_prompt(rollout.prompts[i], role=roles[i]) for i in rows}
        # The solution each row is about (a critique row's: the one it critiqued), and a critique of it (a solution
        # row's: one sampled now from the policy in the judge role, not trained).
        solutions = {i: critiqued[i] if kind[i] == CRITIQUE else rollout.completions[i] for i in rows}
        critiques = {i: rollout.completions[i] for i in rows if kind[i] == CRITIQUE}
        solving = [i for i in rows if kind[i] == SOLUTION]
        if solving:
            sampled = ctx.generate([judge_prompt(questions[i], solutions[i]) for i in solving])
            critiques.update({i: generation.text for i, generation in zip(solving, sampled)})
        judged = self.scorer.judgements(ctx, [scorer_prompt(questions[i], solutions[i], critiques[i]) for i in rows]) if rows else []
        scores = dict(zip(rows, judged))
        c = self.config
        rewards = [None if kind[i] is None else
                   critique_reward(scores[i], c.malformed) if kind[i] == CRITIQUE else solution_reward(scores[i], c.malformed)
                   for i in range(n)]
        formed = sum(s is not None for s in judged)
        ctx.acted(formed, of=n, hint=f"the scorer gave no verdict; see {self.name}.scorer_max_tokens")
        # Pseudo-labels: the answer of the solution a row is about, where the scorer accepted that solution.
        ctx.declare_pseudo_labels([extract_answer(solutions[i]) if scores.get(i) is not None and scores[i] >= 0.5 else None
                                   for i in range(n)])
        self._log(ctx, kind, scores)
        return rewards

    def _log(self, ctx, kind, scores) -> None:
        ctx.log("score_malformed", sum(s is None for s in scores.values()) / max(1, len(scores)))
        for which, name in ((SOLUTION, "solution_score"), (CRITIQUE, "critique_score")):
            mine = [s for i, s in scores.items() if kind[i] == which and s is not None]
            if mine:  # the mean normalised score of the solutions: on solve rows, and on critique rows
                ctx.log(name, sum(mine) / len(mine))
