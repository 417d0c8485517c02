"""InT: interventions on the policy's failed rollouts, proposed where each first goes wrong, then fine-tuned on.

After every RL step, each failed rollout gets an intervention: the policy (or the reference rule) says which step
first goes wrong and writes that step right (:mod:`stackrl_intrl.interventions`). The intervention is kept when a
continuation of the policy from the prefix up to the error, followed by the intervention, reaches the reference
answer. Every ``every`` steps the policy is fine-tuned on the kept (question, prefix + intervention) pairs, the
suffix after the intervention never trained, and RL resumes with a fresh optimizer and schedule, as after the
authors' SFT stage.
"""

from __future__ import annotations

import stackrl
from stackrl.blocks.roles import text_prompt
from stackrl.blocks.supervised import SupervisedPairs
from stackrl.rewards import ROLE_COLUMN, SOLUTION_ROLES, reference_answers
from stackrl_intrl.config import IntrlConfig
from stackrl_intrl.interventions import READERS, from_reference, steps_of, target

PHASE = "int"  # the supervised phase's name in the logs: phase/int/...


class Intrl(stackrl.Plugin):
    """Self-proposed single-step interventions on failed rollouts, kept when they lead to the answer, fine-tuned on."""

    Config = IntrlConfig
    activity = "failed rollouts got a kept intervention"

    def __init__(self, config=None):
        super().__init__(config)
        self.buffer = SupervisedPairs(PHASE)  # (prompt ids, prefix + intervention ids) since the last phase

    def check_run(self, run):
        if self.config.proposer == "reference":
            run.need_column("intrl.solution_column", self.config.solution_column, "the reference the rule compares with")
        else:
            run.check_template(self, "proposal_template", own=("attempt",))
            if run.chat:
                raise stackrl.ConfigError("intrl.proposer: the policy's proposal prompt extends the question's text; "
                                          "set data.chat: false or intrl.proposer: reference")
        return [run.past_end("intrl.every", self.config.every, "the first fine-tuning on interventions comes")]

    @stackrl.hookimpl
    def post_step(self, ctx):
        self._collect(ctx)
        self.buffer.phase_due(ctx, self.config, nothing="no_interventions")

    def _collect(self, ctx) -> None:
        """Propose an intervention for each failed rollout, keep those the filter passes, add their SFT pairs."""
        config, rollout = self.config, ctx.rollout
        answers = reference_answers(rollout.columns, config.answer_column, plugin=self.name,
                                    purpose="tell the failed rollouts and the continuations that recover")
        roles = rollout.columns.get(ROLE_COLUMN)
        failed = [i for i, (text, answer) in enumerate(zip(rollout.completions, answers))
                  if answer is not None and (roles is None or roles[i] in SOLUTION_ROLES)
                  and not config.is_correct(text, answer)]
        proposed = self._propose(ctx, failed)
        kept = self._filter(ctx, proposed, answers)
        for prompt, target in kept:
            self.buffer.add(prompt, target)
        ctx.log("failed", len(failed))
        ctx.log("proposed", len(proposed))
        ctx.log("kept", len(kept))
        ctx.acted(len(kept), of=len(failed), hint=f"intrl.proposer {config.proposer!r} proposed {len(proposed)} "
                  f"interventions, none of which a continuation carried to the answer (intrl.continuations)")

    def _propose(self, ctx, failed: list[int]) -> dict[int, str]:
        """Each failed row's SFT target (prefix up to the error + intervention), for the rows that get one."""
        config, rollout = self.config, ctx.rollout
        sep = config.step_separator
        steps = {i: steps_of(rollout.completions[i], sep) for i in failed}
        if config.proposer == "reference":
            solutions = rollout.columns[config.solution_column]
            found = {i: from_reference(steps[i], solutions[i], sep) for i in failed}
        else:
            columns = {k: v for k, v in rollout.columns.items() if k not in ("prompt", "attempt")}
            prompts = [config.proposal_template.format(
                prompt=text_prompt(rollout.prompts[i], role="intrl proposal"), attempt=rollout.completions[i],
                **{k: v[i] for k, v in columns.items()}) for i in failed]
            replies = ctx.generate(prompts, max_new_tokens=config.max_proposal_tokens)
            read = READERS[config.reply_format]
            found = {i: read(reply.text, steps[i]) for i, reply in zip(failed, replies)}
        # An intervention that writes the step it replaces again corrects nothing.
        return {i: target(steps[i], found[i], sep) for i in failed
                if found[i] is not None and found[i][1].strip() != steps[i][found[i][0]].strip()}

    def _filter(self, ctx, proposed: dict[int, str], answers: list) -> list[tuple[list[int], list[int]]]:
        """The (prompt ids, target ids) of the proposals a continuation carries to the answer (all, without the filter)."""
        config, rollout = self.config, ctx.rollout
        pairs = {i: (list(rollout.prompt_ids[i]), ctx.tokenizer(text, add_special_tokens=False)["input_ids"])
                 for i, text in proposed.items()}
        if not config.continuations:
            return list(pairs.values())
        rows = [i for i in proposed for _ in range(config.continuations)]
        continued = ctx.generate([pairs[i][0] + pairs[i][1] for i in rows],
                                 max_new_tokens=config.max_continuation_tokens)
        recovered = {i for i, c in zip(rows, continued) if config.is_correct(proposed[i] + c.text, answers[i])}
        return [pairs[i] for i in proposed if i in recovered]

    @stackrl.hookimpl
    def state_dict(self):
        return self.buffer.state_dict()

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.buffer.load_state_dict(state)
