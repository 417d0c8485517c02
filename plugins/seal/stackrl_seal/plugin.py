"""SEAL: each completion is a self-edit; the policy's copy fine-tuned on it is evaluated downstream, and the gain over
the live policy is the self-edit's reward. With ``rest_em_every``, the authors' ReST-EM outer loop fine-tunes the
live policy on the self-edits that helped."""

from __future__ import annotations

import stackrl
from stackrl.rewards import reference_answers
from stackrl_seal.config import SealConfig
from stackrl_seal.rewards import kept_edits, self_edit_rewards


class Seal(stackrl.Plugin):
    """Self-edits rewarded by the downstream performance of the model they update.

    For each completion of the rollout (the self-edit of its prompt), ``ctx.scratch_update`` copies the live policy
    and takes ``steps`` gradient steps of the NLL of the completion given its prompt on the copy (the inner loop;
    the live weights untouched); the copy then answers the row's question, greedily (``evaluation: accuracy``) or
    by the likelihood of the reference text (``likelihood``). The reward is that score less the live policy's on
    the same question. Identical self-edits of a prompt are applied once.
    """

    Config = SealConfig
    activity = "completions were applied as self-edits to a scratch copy and scored by its downstream performance"
    SNAPSHOT = "seal"

    def __init__(self, config=None):
        super().__init__(config)
        self.kept_prompts: list[list[int]] = []  # the ReST-EM buffer: kept self-edits since the last phase
        self.kept_completions: list[list[int]] = []

    def check_run(self, run):
        config = self.config
        if config.question_column is not None:
            run.need_column("seal.question_column", config.question_column, "the downstream question is read from it")
        if config.evaluation == "accuracy":
            run.need_column("seal.answer_column", config.answer_column, "the updated copy's answer is judged by it")
        else:
            run.need_column("seal.target_column", config.target_column, "the downstream likelihood is measured on it")
        if config.rest_em_every:
            return [run.past_end("seal.rest_em_every", config.rest_em_every, "the ReST-EM phase acts")]
        return None

    def references(self, rollout) -> list:
        """Each row's reference: the answer its copy's greedy answer is judged by, or the text whose likelihood is
        measured (``None``: the row is not scored)."""
        config = self.config
        if config.evaluation == "accuracy":
            return reference_answers(rollout.columns, config.answer_column, plugin="seal",
                                     purpose="judge the updated copy's answers by")
        if config.target_column not in rollout.columns:
            raise stackrl.PluginError(f"seal.target_column: the batch has no column '{config.target_column}'")
        return rollout.columns[config.target_column]

    def downstream(self, ctx, model: str, questions: list, references: list) -> list[float]:
        """The downstream score of ``model`` (the live policy or the updated copy) on each question: 1.0 or 0.0 for
        its greedy answer, or the mean log-prob of the reference text after the question."""
        config = self.config
        if not questions:
            return []
        if config.evaluation == "accuracy":
            length = {} if config.max_new_tokens is None else {"max_new_tokens": config.max_new_tokens}
            answers = ctx.generate(questions, model=model, do_sample=False, **length)
            return [float(config.is_correct(a.text, r)) for a, r in zip(answers, references)]
        targets = [ctx.tokenizer(r, add_special_tokens=False)["input_ids"] for r in references]
        scores = ctx.score(questions, targets, model=model)
        return ((scores.logprobs * scores.mask).sum(1) / scores.mask.sum(1).clamp(min=1)).tolist()

    @stackrl.hookimpl
    def reward(self, ctx):
        config, rollout = self.config, ctx.rollout
        n, size = len(rollout), rollout.group_size
        references = self.references(rollout)
        questions = rollout.columns[config.question_column] if config.question_column else rollout.prompts
        scored = [i for i in range(n) if references[i] is not None]
        firsts = sorted({i - i % size for i in scored})
        baseline = dict(zip(firsts, self.downstream(ctx, "policy", [questions[i] for i in firsts],
                                                    [references[i] for i in firsts])))
        adapted, applied, losses = {}, {}, []
        for i in scored:
            edit = (tuple(rollout.prompt_ids[i]), tuple(rollout.completion_ids[i]))
            if not edit[1]:  # an empty self-edit changes nothing
                adapted[i] = baseline[i - i % size]
            elif edit in applied:
                adapted[i] = applied[edit]
            else:
                losses += ctx.scratch_update(self.SNAPSHOT, [rollout.prompt_ids[i]], [rollout.completion_ids[i]],
                                             objective="likelihood", learning_rate=config.learning_rate,
                                             steps=config.steps)[:1]
                adapted[i] = applied[edit] = self.downstream(ctx, self.SNAPSHOT, [questions[i]], [references[i]])[0]
        base = [baseline[i - i % size] for i in scored]
        after = [adapted[i] for i in scored]
        rewards = dict(zip(scored, self_edit_rewards(base, after, config.reward)))
        gains = [adapted[i] - baseline[i - i % size] if i in adapted else None for i in range(n)]
        if scored:
            ctx.log("baseline", sum(base) / len(base))
            ctx.log("adapted", sum(after) / len(after))
            ctx.log("improved", sum(a > b for a, b in zip(after, base)) / len(base))
            ctx.log("applied", len(applied))
        if losses:
            ctx.log("inner_loss", sum(losses) / len(losses))
        ctx.acted(len(scored), of=n, hint=f"no row had a reference for seal.evaluation={config.evaluation!r}")
        if config.rest_em_every and ctx.training:
            for i in kept_edits(gains, size, config.keep_per_prompt):
                self.kept_prompts.append(list(rollout.prompt_ids[i]))
                self.kept_completions.append(list(rollout.completion_ids[i]))
            ctx.log("kept", len(self.kept_prompts))
        return [rewards.get(i) for i in range(n)]

    @stackrl.hookimpl
    def post_step(self, ctx):
        every = self.config.rest_em_every
        if not every or ctx.step % every or not self.kept_prompts:
            return  # no self-edit helped since the last phase: the policy and its optimizer stay as they are
        ctx.supervised_phase(self.SNAPSHOT, self.kept_prompts, self.kept_completions,
                             learning_rate=self.config.rest_em_learning_rate, epochs=self.config.rest_em_epochs)
        self.kept_prompts, self.kept_completions = [], []

    @stackrl.hookimpl
    def state_dict(self):
        return {"kept_prompts": [list(p) for p in self.kept_prompts],
                "kept_completions": [list(c) for c in self.kept_completions]}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.kept_prompts = [list(p) for p in state["kept_prompts"]]
        self.kept_completions = [list(c) for c in state["kept_completions"]]
