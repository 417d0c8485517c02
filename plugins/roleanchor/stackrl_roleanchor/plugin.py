"""Role Anchor: end-to-end RL of a decomposer -> solver pipeline, with the decomposer held to its role by keeping how
its role prompt shifts its next-token predictions (against a neutral prompt) where the frozen pre-RL model had it."""

from __future__ import annotations

import string

import torch

import stackrl
from stackrl.rewards import exact_match
from stackrl.tasks.decomposition import DECOMPOSE_MARKER, plants_answer, solve_prompt
from stackrl_roleanchor.anchor import anchor_distance
from stackrl_roleanchor.config import RoleanchorConfig

SNAPSHOT = "roleanchor_initial"  # the policy as it was at step 0, when `reference: initial`


def neutral_prompts(rollout, template: str) -> list[str | None]:
    """Each row's neutral prompt: ``template`` over the row's columns and ``{prompt}``; ``None`` where the row lacks
    a field it names or has no value there (a row another plugin added)."""
    names = {field for _, field, _, _ in string.Formatter().parse(template) if field}
    prompts = []
    for row, prompt in enumerate(rollout.prompts):
        fields = {name: values[row] for name, values in rollout.columns.items()}
        fields["prompt"] = prompt
        if any(fields.get(name) is None for name in names):
            prompts.append(None)
            continue
        try:
            prompts.append(template.format(**fields))
        except (KeyError, IndexError, AttributeError):
            prompts.append(None)
    return prompts


def role_anchor(scorer, rollout, config: RoleanchorConfig, reference: str, *, grad: bool):
    """The per-token anchor loss ``(N, T)`` of ``rollout``'s completions and the rows it covers ``(N,)``.

    ``scorer`` is anything with ``score`` (a hook's ``ctx``); ``reference`` the model name it scores the frozen
    reference with. The role context is the prompt each row was sampled from; the neutral one
    ``config.neutral_template``. Rows whose neutral prompt cannot be made are left out (zero).
    """
    neutral = neutral_prompts(rollout, config.neutral_template)
    rows = [i for i, text in enumerate(neutral) if text is not None]
    covered = torch.zeros(len(rollout), dtype=torch.bool)
    covered[rows] = True
    width = max((len(ids) for ids in rollout.completion_ids), default=0)
    if not rows:
        return torch.zeros(len(rollout), width), covered
    role_ctx = [rollout.prompt_ids[i] for i in rows]
    neutral_ctx = [neutral[i] for i in rows]
    completions = [rollout.completion_ids[i] for i in rows]

    def scores(contexts, model, keep):
        return scorer.score(contexts, completions, model=model, full_vocab=True, grad=keep)

    role = scores(role_ctx, "policy", grad)
    free = scores(neutral_ctx, "policy", grad)
    with torch.no_grad():
        ref_role = scores(role_ctx, reference, False)
        ref_free = scores(neutral_ctx, reference, False)
    device = role.vocab_logprobs.device
    mask = role.mask.to(device).float()
    loss = anchor_distance(role.vocab_logprobs, free.vocab_logprobs.to(device), ref_role.vocab_logprobs.to(device),
                           ref_free.vocab_logprobs.to(device), mask, config.top_k)
    full = torch.zeros(len(rollout), loss.size(1), device=device, dtype=loss.dtype)
    full = full.index_put((torch.tensor(rows, device=device),), loss)
    return full, covered


def anchor_loss(scorer, rollout, config: RoleanchorConfig, reference: str, *, grad: bool):
    """The role-anchor loss term: :func:`role_anchor`'s per-token loss, averaged over the completion tokens of the
    rows it covers, and how many rows it covered; ``(None, 0)`` where it covers none."""
    loss, covered = role_anchor(scorer, rollout, config, reference, grad=grad)
    if not covered.any():
        return None, 0
    tokens = sum(len(ids) for ids, kept in zip(rollout.completion_ids, covered.tolist()) if kept)
    return loss.sum() / max(1, tokens), int(covered.sum())


class Roleanchor(stackrl.Plugin):
    """Role Anchor (Cao, Srinivasan, Bakker, arXiv 2607.21627) on the built-in decomposer pipeline.

    reward: the pipeline's outcome (the solver answers each decomposition; 1 where its answer is right).
    loss_term: the mean over the micro-batch's completion tokens of the squared gap between the policy's and the
    frozen reference's centred role utility (role prompt against neutral prompt), weighted by `losses.roleanchor`.
    post_step logs the share of the batch's decompositions that plant a result (the drift accuracy does not show).
    """

    Config = RoleanchorConfig
    activity = "completions were held to their role (their neutral prompt could be made)"

    def __init__(self, config=None):
        super().__init__(config)
        self.snapshot_taken = False

    def _reference(self) -> str:
        return SNAPSHOT if self.config.reference == "initial" else "reference"

    @stackrl.hookimpl
    def train_begin(self, ctx):
        # On resume the checkpointed snapshot is back already: taking it again would anchor to the resumed policy.
        if self.config.reference == "initial" and not self.snapshot_taken:
            ctx.update_snapshot(SNAPSHOT, checkpoint=True)
            self.snapshot_taken = True

    @stackrl.hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        answers = rollout.columns.get(rollout.answer_column, [None] * len(rollout))
        rows = [i for i, answer in enumerate(answers) if answer is not None]
        ctx.acted(len(rows), of=len(rollout), hint="no row has an answer (data.answer_column)")
        replies = ctx.generate([solve_prompt(rollout.completions[i]) for i in rows],
                               model="policy" if self.config.solver == "policy" else "reference",
                               do_sample=False, max_new_tokens=self.config.solver_tokens)
        scores: list[float | None] = [None] * len(rollout)
        for i, reply in zip(rows, replies):
            scores[i] = exact_match(reply.text, str(answers[i]))
        return scores

    @stackrl.hookimpl
    def loss_term(self, ctx):
        loss, covered = anchor_loss(ctx, ctx.rollout, self.config, self._reference(), grad=ctx.training)
        ctx.acted(covered, of=len(ctx.rollout), hint="no row has the fields roleanchor.neutral_template names")
        return loss

    @stackrl.hookimpl
    def post_step(self, ctx):
        # The share of the batch's decompositions (rows sampled from a decompose prompt) that plant a result.
        rollout = ctx.rollout
        if rollout is None:
            return
        questions = rollout.columns.get("question", [None] * len(rollout))
        planted = [plants_answer(q, c) for q, c, p in zip(questions, rollout.completions, rollout.prompts)
                   if isinstance(q, str) and isinstance(p, str) and p.rstrip().endswith(DECOMPOSE_MARKER)]
        if planted:
            ctx.log("planted", sum(planted) / len(planted))

    @stackrl.hookimpl
    def state_dict(self):
        return {"snapshot_taken": self.snapshot_taken}

    @stackrl.hookimpl
    def load_state_dict(self, state):
        self.snapshot_taken = bool(state["snapshot_taken"])
