"""SPC with one policy playing both roles: some groups corrupt a right solution (the sneaky generator), the others
judge a corruption or the right solution (the critic); each confrontation's winner gets +1, the loser -1.

A sneaky group's prompt is its question with the task's right solution in the corrupt format
(``stackrl.tasks.corrupt_prompt``); its rows are corruptions. In the reward stage each valid one is judged once by
the policy in the judge role (``stackrl.tasks.judge_prompt``; not trained), and the row wins when that verdict is not
"wrong". A critic group's prompt is the judge prompt of one corruption of its question drawn from the policy (or,
for a ``correct_share`` of the groups, of the right solution); its rows are checks, and win when their verdict is the
truth. Evaluation rollouts are plain solving.
"""

from __future__ import annotations

import random

from stackrl import Plugin, PluginError, Samples, hookimpl
from stackrl.blocks.roles import assign_roles, rows_of_groups, text_prompt
from stackrl.rewards import ROLE_COLUMN, VERIFY
from stackrl.tasks import corrupt_prompt, judge_prompt, parse_verdict, slip
from stackrl.tasks.arithmetic import read_problem
from stackrl_spc.config import SpcConfig
from stackrl_spc.game import critic_reward, sneaky_reward, valid_corruption

SNEAKY = "corrupt"  # the sneaky generator's role (not a solution role: the host's outcome rewards leave it alone)
JUDGED_COLUMN = "spc_judged"  # column: the attempt a critic row judges (None on sneaky rows)
WRONG_COLUMN = "spc_wrong"  # column: whether that attempt is a corruption (True) or the right solution (False)


def right_solution(question: str) -> str:
    """The task's right solution to ``question`` (the solver's correct solution the generator starts from)."""
    problem = read_problem(question)
    if problem is None:
        raise PluginError(f"spc: {question!r} is not a question of the built-in arithmetic task; the game corrupts "
                          "and checks its solutions (docs/roles.md)")
    return problem["solution"]


class Spc(Plugin):
    Config = SpcConfig
    activity = "rows scored by the sneaky-generator/critic game"

    def __init__(self, config=None):
        super().__init__(config)
        self.last_verdicts: list[bool | None] = []  # the last rollout's verdict per row (None: none read or asked)
        self.shares = {SNEAKY: self.config.sneaky_share, VERIFY: 1 - self.config.sneaky_share}

    def check_run(self, run):
        run.need_plain_text("spc", "the game's prompts extend the question as plain text in the built-in task's corrupt "
                            "and judge formats (docs/roles.md)")

    def _sampling(self) -> dict:
        c = self.config
        sampling = {"max_new_tokens": c.critic_max_tokens}
        sampling.update({"do_sample": False} if c.critic_temperature == 0
                        else {"do_sample": True, "temperature": c.critic_temperature})
        return sampling

    @hookimpl
    def generate_rollout(self, prompts, ctx):
        if not ctx.training:  # held-out evaluation measures plain solving
            return None
        c, size = self.config, ctx.group_size
        group_roles = assign_roles(len(prompts) // size, self.shares, key=f"{self.name}.sneaky_share")
        questions = [text_prompt(prompts[g * size], role=role) for g, role in enumerate(group_roles)]
        solutions = [right_solution(q) for q in questions]
        critics = [g for g, role in enumerate(group_roles) if role == VERIFY]
        on_right = set(critics[: round(c.correct_share * len(critics))])  # these judge the right solution
        playing = [g for g in critics if g not in on_right]
        drawn = ctx.generate([corrupt_prompt(questions[g], solutions[g]) for g in playing for _ in range(c.tries)]
                             ) if playing else []
        judged, slipped = {g: solutions[g] for g in on_right}, 0
        for k, g in enumerate(playing):
            tries = [d.text.strip() for d in drawn[k * c.tries : (k + 1) * c.tries]]
            judged[g] = next((t for t in tries if valid_corruption(questions[g], t)), None)
            if judged[g] is None:  # no valid corruption drawn: the task's rule corrupter stands in
                judged[g], slipped = slip(solutions[g], random.Random(questions[g])), slipped + 1
        if playing:
            ctx.log("critic_slipped", slipped / len(playing))
        rows = [corrupt_prompt(questions[g], solutions[g]) if role == SNEAKY else judge_prompt(questions[g], judged[g])
                for g, role in enumerate(group_roles) for _ in range(size)]
        generations = ctx.generate(rows)
        return Samples(
            completion_ids=[g.completion_ids for g in generations],
            prompt_ids=[g.prompt_ids for g in generations],
            columns={ROLE_COLUMN: rows_of_groups(group_roles, size),
                     JUDGED_COLUMN: rows_of_groups([judged.get(g) for g in range(len(group_roles))], size),
                     WRONG_COLUMN: rows_of_groups([None if g not in judged else g not in on_right
                                                   for g in range(len(group_roles))], size)},
        )

    @hookimpl
    def reward(self, ctx):
        rollout, c = ctx.rollout, self.config
        n = len(rollout)
        roles = rollout.columns.get(ROLE_COLUMN, [None] * n)  # no roles in evaluation: nothing of ours to score
        wrong = rollout.columns.get(WRONG_COLUMN, [None] * n)
        sneaky = [i for i in range(n) if roles[i] == SNEAKY]
        critic = [i for i in range(n) if roles[i] == VERIFY and wrong[i] is not None]
        questions = {i: text_prompt(rollout.prompts[i], role=roles[i]) for i in sneaky}  # the dataset's question
        valid = {i: valid_corruption(questions[i], rollout.completions[i].strip()) for i in sneaky}
        judging = [i for i in sneaky if valid[i]]
        replies = ctx.generate([judge_prompt(questions[i], rollout.completions[i].strip()) for i in judging],
                               **self._sampling()) if judging else []
        verdicts = {i: parse_verdict(r.text) for i, r in zip(judging, replies)}
        verdicts.update({i: parse_verdict(rollout.completions[i]) for i in critic})
        rewards = [None] * n
        for i in sneaky:
            rewards[i] = sneaky_reward(valid[i], verdicts.get(i), c.invalid_reward)
        for i in critic:
            rewards[i] = critic_reward(wrong[i], verdicts[i])
        scored = sum(r is not None for r in rewards)
        ctx.acted(scored, of=n, hint=None if scored else "no row of the game in this rollout (evaluation, or every "
                                                          "corruption invalid with spc.invalid_reward null)")
        self._log(ctx, valid, verdicts, critic, wrong)
        self.last_verdicts = [verdicts.get(i) for i in range(n)]  # for the mechanism benchmark: what decided each game
        return rewards

    def _log(self, ctx, valid, verdicts, critic, wrong) -> None:
        if valid:
            ctx.log("sneaky_valid", sum(valid.values()) / len(valid))
        fooled = [verdicts[i] is not False for i, ok in valid.items() if ok]
        if fooled:  # the share of valid corruptions the critic did not call wrong
            ctx.log("sneaky_fooled", sum(fooled) / len(fooled))
        for truth, name in ((True, "critic_caught"), (False, "critic_accepted_right")):
            mine = [critic_reward(wrong[i], verdicts[i]) > 0 for i in critic if wrong[i] is truth]
            if mine:
                ctx.log(name, sum(mine) / len(mine))
