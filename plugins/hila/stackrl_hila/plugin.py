"""HILA: a cost-aware reward on solving or deferring to an expert (inner loop), and supervised phases on the expert's
solutions of the deferred problems (outer loop).

Each row of a training rollout is an attempt at the question, sampled from the policy, then the policy's decision
about it, sampled from the decision prompt (the judge format on the built-in task); only the decision is the
completion GRPO trains (the attempt sits in its prompt), so the inner loop learns when to defer, as the authors'
GRPO trains the action alone. The reward is :func:`stackrl_hila.decisions.cost_aware_reward`. After every step the
deferred problems (and, with ``learn_from: deferred_and_failed``, the failed ones) are paired with the expert's
solution; every ``every`` steps the policy is fine-tuned on the pairs collected since the last phase
(``ctx.supervised_phase``), and RL resumes with a fresh optimizer.
"""

from __future__ import annotations

import stackrl
from stackrl.blocks.roles import text_prompt
from stackrl.blocks.supervised import SupervisedPairs
from stackrl.plugin import training_only
from stackrl.rewards import ROLE_COLUMN, VERIFY, reference_answers
from stackrl.tasks import parse_verdict
from stackrl_hila.config import HilaConfig
from stackrl_hila.decisions import cost_aware_reward, deferred, learns_from

ATTEMPT_COLUMN = "hila_attempt"  # each row's attempt, decided on by its completion
PHASE = "hila"  # the supervised phase's name in the logs: phase/hila/...


class Hila(stackrl.Plugin):
    """Cost-aware deferral to an expert, learned by GRPO; the expert's solutions of deferred problems fine-tuned on."""

    Config = HilaConfig
    activity = "decisions gave a verdict: the attempt kept or the problem deferred to the expert"

    def __init__(self, config=None):
        super().__init__(config)
        # (question, expert solution ids + eos) since the last phase, the expert asked once per question
        self.buffer = SupervisedPairs(PHASE, once_per_context=True)

    def check_run(self, run):
        run.need_column("hila.solution_column", self.config.solution_column, "the expert's solutions")
        run.check_template(self, "decision_template", own=("attempt",))
        if run.chat:
            raise stackrl.ConfigError("hila.decision_template: the decision prompt extends the question's text; "
                                      "set data.chat: false")
        return [run.past_end("hila.every", self.config.every,
                             "the first supervised phase on the expert's solutions comes")]

    @stackrl.hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        config = self.config
        questions = [text_prompt(p, role="hila decision") for p in prompts]
        attempts = ctx.generate(questions, **_length(config.max_attempt_tokens))
        columns = {k: v for k, v in ctx.rollout_columns.items() if k not in ("prompt", "attempt")}
        decision_prompts = [config.decision_template.format(prompt=q, attempt=a.text,
                                                            **{k: v[i] for k, v in columns.items()})
                            for i, (q, a) in enumerate(zip(questions, attempts))]
        decisions = ctx.generate(decision_prompts, **_length(config.max_decision_tokens))
        return stackrl.Samples(
            completion_ids=[d.completion_ids for d in decisions], prompt_ids=[d.prompt_ids for d in decisions],
            columns={ROLE_COLUMN: [VERIFY] * len(prompts), ATTEMPT_COLUMN: [a.text for a in attempts]},
        )

    def _judged(self, rollout) -> list[tuple[bool, bool, bool] | None]:
        """Each row's (defers, attempt right, expert right); ``None`` for a row without an answer."""
        config = self.config
        answers = reference_answers(rollout.columns, config.answer_column, plugin=self.name,
                                    purpose="score the attempts and the expert's solutions")
        solutions = rollout.columns.get(config.solution_column, [None] * len(rollout))
        return [None if answer is None else
                (deferred(reply), config.is_correct(attempt, answer),
                 solution is not None and config.is_correct(solution, answer))
                for reply, attempt, answer, solution in zip(rollout.completions, rollout.columns[ATTEMPT_COLUMN],
                                                            answers, solutions)]

    @stackrl.hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        if ATTEMPT_COLUMN not in rollout.columns:  # evaluation, or another plugin generated: nothing to decide on
            ctx.acted(0, of=len(rollout), hint="another plugin generated the rollout: hila needs "
                      "exclusive.generate_rollout: hila")
            return [None] * len(rollout)
        judged = self._judged(rollout)
        scored = [(i, j) for i, j in enumerate(judged) if j is not None]
        verdicts = sum(parse_verdict(rollout.completions[i]) is not None for i, _ in scored)
        ctx.acted(verdicts, of=len(scored), hint="no decision reply held a verdict: hila.decision_template may be a "
                  "format the model was not taught (stackrl/arith-skills knows the judge format)")
        if scored:
            defers = [d for _, (d, _, _) in scored]
            wrong = [not right for _, (_, right, _) in scored]
            ctx.log("deferred", sum(defers) / len(scored))
            ctx.log("attempts_right", 1 - sum(wrong) / len(scored))
            ctx.log("no_verdict", 1 - verdicts / len(scored))
            if sum(defers):  # the share of deferrals whose own attempt was wrong
                ctx.log("deferred_wrong", sum(d and w for d, w in zip(defers, wrong)) / sum(defers))
            if sum(wrong):  # the share of wrong attempts deferred
                ctx.log("wrong_deferred", sum(d and w for d, w in zip(defers, wrong)) / sum(wrong))
        return [None if j is None else cost_aware_reward(*j, self.config.cost) for j in judged]

    @stackrl.hookimpl
    def post_step(self, ctx):
        self._collect(ctx)
        self.buffer.phase_due(ctx, self.config, nothing="nothing_deferred")

    def _collect(self, ctx) -> None:
        """Pair each problem the rollout deferred (or failed, by ``learn_from``) with the expert's solution, once."""
        rollout = ctx.rollout
        if rollout is None or ATTEMPT_COLUMN not in rollout.columns:
            return
        solutions = rollout.columns[self.config.solution_column]
        eos = [] if ctx.tokenizer.eos_token_id is None else [ctx.tokenizer.eos_token_id]
        added = 0
        for i, judged in enumerate(self._judged(rollout)):
            if judged is None or solutions[i] is None:
                continue
            defers, attempt_right, _ = judged
            if learns_from(defers, attempt_right, self.config.learn_from):
                target = ctx.tokenizer(solutions[i], add_special_tokens=False)["input_ids"] + eos
                added += self.buffer.add(rollout.prompts[i], target)
        ctx.log("new_pairs", added)

    @stackrl.hookimpl
    def state_dict(self):
        return self.buffer.state_dict()

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.buffer.load_state_dict(state)


def _length(tokens: int | None) -> dict:
    """The sampling override for a turn's length: none (the run's) for ``None``."""
    return {} if tokens is None else {"max_new_tokens": tokens}
