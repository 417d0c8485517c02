"""CSA (Capability Self-Assessment): the policy decides per query whether to attempt it or delegate it, and is
rewarded for attempting what it can solve and delegating what it cannot (the table in ``stackrl_csa.decisions``)."""

from __future__ import annotations

import stackrl
from stackrl.blocks.insertion import into_last_rows
from stackrl.blocks.teacher import teacher_prompts
from stackrl.plugin import training_only
from stackrl.rewards import reference_answers

from stackrl_csa.config import CsaConfig  # noqa: F401 (the package exports it)
from stackrl_csa.decisions import decision_accuracy, delegates, group_rewards, is_solvable

WRITTEN = "csa_written"  # the rollout column marking the rows holding the written delegation


class Csa(stackrl.Plugin):
    """Capability self-assessment by RL: the reward of each completion's decision, attempt or delegate.

    ``prompt_template`` may add an instruction on how to delegate; ``written_delegation`` puts a delegation in each
    training group's last row for a policy that never writes one; the reward judges attempts by their answer and
    delegations by the problem's solvability, the model's pass rate on it against ``threshold``.
    """

    Config = CsaConfig
    activity = "completions had their decision scored (an attempt with an answer, or a delegation of a problem of known pass rate)"

    def check_run(self, run):
        run.need_column(f"{self.name}.answer_column", self.config.answer_column,
                        "csa judges attempts and pass rates by the reference answers")
        run.check_template(self, "prompt_template")
        if self.config.solvability == "reference":
            run.need_reference(f"{self.name}.solvability", "the reference model's pass rate")

    # -- sample -----------------------------------------------------------------------------------------------------

    @stackrl.hookimpl
    def transform_prompts(self, prompts, ctx):
        if self.config.prompt_template == "{prompt}":
            return None
        return teacher_prompts(prompts, ctx.rollout_columns, self.config.prompt_template,
                               where=f"{self.name}.prompt_template")

    @stackrl.hookimpl
    @training_only
    def generate_rollout(self, prompts, ctx):
        if not self.config.written_delegation:
            return None
        samples = ctx.generate(prompts)
        ids = ctx.tokenizer(self.config.written_delegation, add_special_tokens=False)["input_ids"]
        written = [*ids, *ctx.eos_token_ids[:1]]
        size = ctx.group_size
        return into_last_rows(samples, {g: written for g in range(len(samples) // size)}, size, WRITTEN)

    # -- reward -----------------------------------------------------------------------------------------------------

    def probe(self, ctx, answers: list) -> list[list[bool]]:
        """Each group's extra attempts at its bare prompt, right or wrong (none for a group without an answer)."""
        rollout, size, config = ctx.rollout, ctx.rollout.group_size, self.config
        groups = [g for g in range(rollout.num_groups) if answers[g * size] is not None]
        outcomes: list[list[bool]] = [[] for _ in range(rollout.num_groups)]
        if not groups or config.probes == 0:
            return outcomes
        model = "policy" if config.solvability == "group" else "reference"
        prompts = [rollout.prompts[g * size] for g in groups for _ in range(config.probes)]
        generations = ctx.generate(prompts, model=model)
        for k, generation in enumerate(generations):
            g = groups[k // config.probes]
            if not delegates(generation.text, config.delegation):
                outcomes[g].append(config.is_correct(generation.text, answers[g * size]))
        return outcomes

    @stackrl.hookimpl
    def reward(self, ctx):
        rollout, config = ctx.rollout, self.config
        answers = reference_answers(rollout.columns, config.answer_column, plugin=self.name,
                                    purpose="tell right attempts and solvable problems by")
        delegated = [delegates(text, config.delegation) for text in rollout.completions]
        correct = [None if d or a is None else config.is_correct(text, a)
                   for text, d, a in zip(rollout.completions, delegated, answers)]
        rewards, rates = group_rewards(delegated, correct, self.probe(ctx, answers), rollout.group_size,
                                       config.table, config.threshold, count_group=config.solvability == "group")
        solvable = [is_solvable(rates[i // rollout.group_size], config.threshold) for i in range(len(rollout))]
        scored = sum(r is not None for r in rewards)
        ctx.acted(scored, of=len(rewards), hint="no row had a reference answer to judge an attempt or a pass rate by "
                                                "(csa.answer_column)")
        unscored = sum(d and r is None for d, r in zip(delegated, rewards))
        if unscored:
            ctx.warn("delegations_without_pass_rate", unscored)
        ctx.log("delegated", sum(delegated) / max(1, len(delegated)))
        known = [rate for rate in rates if rate is not None]
        if known:
            ctx.log("pass_rate", sum(known) / len(known))
            ctx.log("solvable", sum(rate >= config.threshold for rate in known) / len(known))
        own = [d for d, w in zip(delegated, rollout.columns.get(WRITTEN, [False] * len(rollout))) if not w]
        ctx.log("own_delegated", sum(own) / max(1, len(own)))
        accuracy = decision_accuracy(delegated, solvable)
        if accuracy is not None:
            ctx.log("decision_accuracy", accuracy)
        return rewards
