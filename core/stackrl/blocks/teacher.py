"""The privileged-context self-teacher shared by the self-distillation methods (OPSD, TRACE, ...).

The teacher is the policy's own weights (live, frozen reference, LoRA-disabled base, or a snapshot such as an
EMA) shown more than the student was: the dataset's privileged text (a reference solution, a hint, a label)
put into the prompt by a template. It scores the completions the student just sampled, in one no-grad forward,
and returns vocabulary log-probs only at the positions a loss needs, so span-restricted losses never hold
``batch x length x vocabulary``. The divergences below work on those packed ``(P, V)`` rows.

- :func:`teacher_prompts` builds the teacher's prompt for each row from the template (:data:`WORKED_SOLUTION_TEMPLATE`
  is a generic one for data sets with a worked solution);
- :func:`privileged_rows` and :func:`privileged`: the rows that have the privileged context at all (a row without an
  answer has none, and stays plain GRPO);
- :func:`score_teacher` and :func:`score_student` score a loss context's completions at chosen positions;
- :func:`student_and_teacher`: both distributions at every completion token, packed, for a divergence;
  :func:`privileged_student_and_teacher`: the same for a loss term's rows that have the teacher's context;
- :func:`forward_kl`, :func:`reverse_kl`, :func:`generalized_jsd`, :func:`restrict_to_teacher_topk`: per-position
  divergences between packed log-prob rows (:func:`forward_kl_clip_scale`: the factor a clipped forward KL applies);
- :func:`geometric_interpolation`: a target between two distributions, by mixing their logits;
- :func:`relative_positions`, :func:`position_weights`, :func:`returns_to_go`: per-token weights over packed rows;
- :func:`check_teacher_settings`: the config check of the keys these plugins share (teacher, temperature, top_k);
  :class:`TeacherSettings`: those keys as a config piece the plugins' configs inherit, checked when built;
- :class:`SelfTeacherPlugin`: the base of such a plugin, whose ``check_run`` checks its templates and teacher.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Optional

import torch

from stackrl.errors import ConfigError, StackrlError
from stackrl.plugin import Plugin, template_fields

if TYPE_CHECKING:
    from stackrl.context import LossContext, Rollout
    from stackrl.policy import Scores


# -- teacher prompts -------------------------------------------------------------------------------------------------

# A generic privileged prompt for a data set with a worked solution: the problem, the solution, then a request for
# the model's own reasoning toward the same answer (the default of methods whose paper gives no wording).
WORKED_SOLUTION_TEMPLATE = (
    "{prompt}\n\nA worked solution to this problem:\n{solution}\n\n"
    "With that solution in mind, solve the problem above yourself, step by step, and put your final answer "
    "within \\boxed{{}}.\n"
)


def teacher_prompts(prompts: list, columns: dict[str, list], template: str, *, where: str = "teacher") -> list:
    """Each row's teacher prompt: ``template`` formatted with ``prompt`` and the row's columns.

    A text prompt becomes the formatted text. A chat prompt (a list of messages) keeps its messages, with the
    last user message's content formatted in place, so the teacher goes through the chat template as the student
    did. ``where`` names the caller in errors (a plugin and its config key).
    """
    missing = [name for name in template_fields(template) if name != "prompt" and name not in columns]
    if missing:
        raise StackrlError(
            f"{where}: the template uses {', '.join(f'{{{m}}}' for m in missing)}, which the rollout has no column "
            f"for; columns: {', '.join(sorted(columns)) or 'none'}"
        )
    out = []
    for i, prompt in enumerate(prompts):
        row = {name: values[i] for name, values in columns.items()}
        if isinstance(prompt, str):
            out.append(template.format(**row, prompt=prompt))
            continue
        messages = [dict(m) for m in prompt]
        last_user = max((j for j, m in enumerate(messages) if m.get("role") == "user"), default=None)
        if last_user is None:
            raise StackrlError(f"{where}: row {i} is a chat prompt without a user message to put the template in")
        messages[last_user]["content"] = template.format(**row, prompt=messages[last_user]["content"])
        out.append(messages)
    return out


# -- which rows have privileged context ------------------------------------------------------------------------------


def privileged_rows(rollout: Rollout, *templates: str, columns=()) -> list[int]:
    """The rows of ``rollout`` that have privileged context: a reference answer, and a value for every column the
    ``templates`` (and ``columns``) use.

    Rows without an answer are legitimate: a plugin adds them to the pool label-free (self-instruction), or trains
    on self-supervised tasks (MR-RLVR's first stage). Such a row has no privileged signal, so the methods on this
    block and on :mod:`stackrl.blocks.tokensignals` leave it as plain GRPO: no teacher context, no token signal, no
    distillation term. A rollout without the answer column at all (a ``data.label_free`` run) has no answer to
    check; its columns alone decide. A field that is no column (``{prompt}``, a derived field) is left to the
    template.
    """
    used = [name for template in templates for name in template_fields(template)]
    needed = [c for c in dict.fromkeys([rollout.answer_column, *used, *columns]) if c in rollout.columns]
    return [i for i in range(len(rollout)) if all(rollout.columns[c][i] is not None for c in needed)]


def privileged(rollout: Rollout, template: str) -> Rollout | None:
    """The rows of ``rollout`` that have the privileged context ``template`` builds (:func:`privileged_rows`):
    ``rollout`` itself when all do, ``None`` when none does (a loss term then has nothing to distil)."""
    rows = privileged_rows(rollout, template)
    if not rows:
        return None
    return rollout if len(rows) == len(rollout) else rollout.select(rows)


def distilled(ctx, template: str) -> Rollout | None:
    """:func:`privileged` of a loss term's micro-batch, ``ctx.rollout``, its rows reported as the plugin's activity:
    ``ctx.acted(rows with the context, of=the micro-batch's rows)``."""
    rollout = privileged(ctx.rollout, template)
    ctx.acted(0 if rollout is None else len(rollout), of=len(ctx.rollout),
              hint="no row had the teacher's context (a row without an answer has none)")
    return rollout


# -- the config keys the self-teacher plugins share ------------------------------------------------------------------

# The teachers every self-teacher plugin offers: the live policy and the frozen reference. Some add their own
# (an EMA, a snapshot), and some take any model ``ctx.score`` knows, checked when it is first scored.
TEACHERS = ("policy", "reference")


def check_teacher_settings(section: str, config, teachers: tuple[str, ...] | None = TEACHERS) -> None:
    """Refuse a shared self-teacher setting no run could use, naming ``<section>.<key>``.

    ``teacher`` must be one of ``teachers`` (``None``: any name, left to ``ctx.score``); ``temperature``, where
    set (null: the run's sampling temperature), positive; ``top_k``, where the plugin has it and it is set (null:
    the full vocabulary), at least 1.
    """
    if teachers is not None and config.teacher not in teachers:
        raise ConfigError(f"{section}.teacher: must be one of {', '.join(teachers)}, not '{config.teacher}'")
    if config.temperature is not None and config.temperature <= 0:
        raise ConfigError(f"{section}.temperature: must be positive, not {config.temperature}")
    top_k = getattr(config, "top_k", None)
    if top_k is not None and top_k < 1:
        raise ConfigError(f"{section}.top_k: must be at least 1 (or null for the full vocabulary), not {top_k}")


def check_teacher_run(run, plugin, *templates: str) -> None:
    """A self-teacher plugin's ``check_run``: each of its ``templates`` settings against the data's columns
    (:meth:`stackrl.RunFacts.check_template`), and a frozen teacher against a run that has a reference model."""
    for key in templates:
        run.check_template(plugin, key)
    if plugin.config.teacher == "reference":
        run.need_reference(f"{plugin.name}.teacher", "the frozen teacher is")


@dataclass
class TeacherSettings:
    """The config keys a self-teacher plugin shares, for its config to inherit: ``teacher``, the weights that score
    the privileged context, and ``temperature``, that of every distribution it scores (null: the run's sampling
    temperature, as TRL's loss divides its logits by it).

    A subclass names its ``section`` (in errors), the ``teachers`` it offers (``None``: any model ``ctx.score``
    knows) and its own keys that take one of a few values (``choices``); building it checks all of these, then
    runs :meth:`check`, where a subclass refuses its other settings with :meth:`refuse`.
    """

    section: ClassVar[str] = "teacher"
    teachers: ClassVar[Optional[tuple[str, ...]]] = TEACHERS
    choices: ClassVar[dict[str, tuple[str, ...]]] = {}
    teacher: str = "policy"
    temperature: Optional[float] = None

    def __post_init__(self):
        check_teacher_settings(self.section, self, self.teachers)
        for key, allowed in self.choices.items():
            value = getattr(self, key)
            if value not in allowed:
                self.refuse(key, f"must be one of {', '.join(allowed)}, not '{value}'")
        self.check()

    def check(self) -> None:
        """Refuse a subclass's own settings that no run could use (the host has already checked the types)."""

    def refuse(self, key: str, message: str):
        """Raise the config error that names ``<section>.<key>``."""
        raise ConfigError(f"{self.section}.{key}: {message}")


class SelfTeacherPlugin(Plugin):
    """The base of a plugin whose teacher is the policy shown privileged context: its ``check_run`` checks the
    config keys ``templates`` names against the data's columns, and a frozen teacher against the run
    (:func:`check_teacher_run`)."""

    templates: tuple[str, ...] = ("teacher_template",)

    def check_run(self, run):
        check_teacher_run(run, self, *self.templates)


# -- scoring a loss context's completions ---------------------------------------------------------------------------


def score_teacher(
    ctx: LossContext,
    template: str,
    *,
    model: str = "policy",
    positions=None,
    rollout: Rollout | None = None,
    extra_columns: dict[str, list] | None = None,
    where: str = "teacher",
    **options,
) -> Scores:
    """The teacher's log-probs of the completions, no gradient, given the prompts ``template`` builds.

    ``model`` is any model ``ctx.score`` knows (``"policy"``, ``"reference"``, a snapshot name);
    ``positions`` restricts the vocabulary outputs as in ``ctx.score``; ``rollout`` (default ``ctx.rollout``)
    picks the rows; ``extra_columns`` adds per-row fields to the template (e.g. an annotator's label);
    ``options`` go to ``ctx.score`` (``full_vocab``, ``topk``, ``temperature``).
    """
    rollout = ctx.rollout if rollout is None else rollout
    columns = {**rollout.columns, **(extra_columns or {})}
    contexts = teacher_prompts(rollout.prompts, columns, template, where=where)
    return ctx.score(contexts, rollout.completion_ids, model=model, positions=positions, **options)


def score_student(
    ctx: LossContext, positions, *, rollout: Rollout | None = None, grad: bool = True, **options
) -> Scores:
    """The policy's log-probs of the completions (of ``rollout``, default ``ctx.rollout``) given the prompts it
    was trained on, with gradient unless ``grad=False``."""
    rollout = ctx.rollout if rollout is None else rollout
    return ctx.score(rollout.prompt_ids, rollout.completion_ids, grad=grad, positions=positions, **options)


def student_and_teacher(
    ctx, rollout: Rollout, template: str, *, teacher: str, temperature: float | None, grad: bool,
    top_k: int | None = None, where: str = "teacher",
) -> tuple[torch.Tensor, torch.Tensor]:
    """The student's and the teacher's log-probs at every completion token of ``rollout``, packed ``(P, V)``.

    ``ctx`` is anything with ``score`` and ``sampling_temperature`` (a hook's context, a ``PolicyAccess``);
    ``teacher`` the model the teacher is scored with; ``temperature`` null means the sampling temperature, as TRL's
    loss divides its logits by it. The student keeps its gradient when ``grad``. With ``top_k`` both are restricted
    to the teacher's top-k tokens and renormalised there (:func:`restrict_to_teacher_topk`), ``(P, k)``.
    """
    everywhere = [range(len(ids)) for ids in rollout.completion_ids]
    temperature = ctx.sampling_temperature if temperature is None else temperature
    common = dict(positions=everywhere, temperature=temperature, rollout=rollout)
    teacher_scores = score_teacher(
        ctx, template, model=teacher, where=where, full_vocab=top_k is None, topk=top_k, **common
    )
    student = score_student(ctx, grad=grad, full_vocab=True, **common).vocab_logprobs
    if top_k is None:
        return student, teacher_scores.vocab_logprobs
    return restrict_to_teacher_topk(student, teacher_scores.topk_logprobs, teacher_scores.topk_ids)


def privileged_student_and_teacher(
    ctx, section: str, config, *, teacher: str | None = None
) -> tuple[Rollout, torch.Tensor, torch.Tensor] | None:
    """For a loss term: the rows of ``ctx.rollout`` with the teacher's context (:func:`distilled`: reported as the plugin's activity), and the
    student's and the teacher's log-probs at every completion token of them (:func:`student_and_teacher`, the
    student with its gradient while training); ``None`` when no row has the context.

    ``config`` is a self-teacher plugin's section: ``teacher_template``, ``teacher`` (unless ``teacher`` names the
    model), ``temperature`` and, where it has one, ``top_k``; errors name ``<section>.teacher_template``.
    """
    rollout = distilled(ctx, config.teacher_template)  # a row without an answer has no teacher
    if rollout is None:
        return None
    student, teacher_logps = student_and_teacher(
        ctx, rollout, config.teacher_template, teacher=config.teacher if teacher is None else teacher,
        temperature=config.temperature, grad=ctx.training, top_k=getattr(config, "top_k", None),
        where=f"{section}.teacher_template",
    )
    return rollout, student, teacher_logps


# -- divergences between packed (P, V) log-prob rows ----------------------------------------------------------------


def _kl_terms(p_logps: torch.Tensor, q_logps: torch.Tensor) -> torch.Tensor:
    """Per-vocabulary terms ``p (log p - log q)`` of KL(p || q); zero where ``p`` is zero."""
    p = p_logps.exp()
    return torch.where(p > 0, p * (p_logps - q_logps), torch.zeros_like(p))


def _clip_push(divergence: torch.Tensor, push: torch.Tensor, clip: float) -> torch.Tensor:
    """``divergence`` scaled, position by position, so that no vocabulary entry's logit is pushed harder than ``clip``.

    ``push`` is the divergence's gradient with respect to the student's logits (those the softmax reads), ``(P, V)``.
    Scaling a position by ``min(1, clip / max |push|)`` bounds every entry's push by ``clip`` and keeps the
    direction of the whole push: a token the teacher prefers and the student under-weights is still lifted.
    Clamping each vocabulary term instead zeroes the gradient of the large terms, which are those tokens, and what
    the other terms leave can push the other way.
    """
    return divergence * (clip / push.abs().amax(-1).clamp_min(clip))


def forward_kl_clip_scale(student_logps: torch.Tensor, teacher_logps: torch.Tensor, clip: float) -> torch.Tensor:
    """The factor ``min(1, clip / max_v |p_v - q_v|)`` by which ``forward_kl(clip=clip)`` scales each position's
    KL (1 where the clip is not active); no gradient."""
    with torch.no_grad():  # d KL(q || p) / d logit_v = p_v - q_v
        push = student_logps.exp() - teacher_logps.exp()
        return clip / push.abs().amax(-1).clamp_min(clip)


def forward_kl(student_logps: torch.Tensor, teacher_logps: torch.Tensor, clip: float | None = None) -> torch.Tensor:
    """KL(teacher || student) at each position (the last dim is the vocabulary): mode-covering.

    ``clip`` bounds how hard the divergence pushes any one logit of the student (see :func:`_clip_push`;
    :func:`forward_kl_clip_scale` is the factor it applies).
    """
    divergence = _kl_terms(teacher_logps, student_logps).sum(-1)
    if clip is None:
        return divergence
    return divergence * forward_kl_clip_scale(student_logps, teacher_logps, clip)


def reverse_kl(student_logps: torch.Tensor, teacher_logps: torch.Tensor, clip: float | None = None) -> torch.Tensor:
    """KL(student || teacher) at each position: mode-seeking. ``clip`` as for :func:`forward_kl`."""
    divergence = _kl_terms(student_logps, teacher_logps).sum(-1)
    if clip is None:
        return divergence
    with torch.no_grad():  # d KL(p || q) / d logit_v = p_v (log p_v - log q_v - KL(p || q)); zero where p_v is zero
        p = student_logps.exp()
        push = torch.where(p > 0, p * (student_logps - teacher_logps - divergence.unsqueeze(-1)), torch.zeros_like(p))
    return _clip_push(divergence, push, clip)


def generalized_jsd(student_logps: torch.Tensor, teacher_logps: torch.Tensor, beta: float = 0.5) -> torch.Tensor:
    """Generalized Jensen-Shannon divergence at each position, with mixture ``m = beta * teacher + (1 - beta) * student``.

    ``beta * KL(teacher || m) + (1 - beta) * KL(student || m)``; the ends are the KLs themselves, as in TRL's
    GKD convention: ``beta = 0`` is KL(teacher || student) (forward), ``beta = 1`` KL(student || teacher).
    """
    if not 0.0 <= beta <= 1.0:
        raise StackrlError(f"generalized_jsd: beta must lie in [0, 1], not {beta}")
    if beta == 0.0:
        return forward_kl(student_logps, teacher_logps)
    if beta == 1.0:
        return reverse_kl(student_logps, teacher_logps)
    mixture = torch.logaddexp(teacher_logps + torch.log(torch.tensor(beta)), student_logps + torch.log1p(torch.tensor(-beta)))
    return beta * _kl_terms(teacher_logps, mixture).sum(-1) + (1 - beta) * _kl_terms(student_logps, mixture).sum(-1)


def restrict_to_teacher_topk(
    student_logps: torch.Tensor, teacher_top_logps: torch.Tensor, teacher_top_ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Student and teacher restricted to the teacher's top-k tokens (``score(topk=k)``) and renormalised there.

    Takes the teacher's ``(P, k)`` top-k rather than its ``(P, V)`` distribution, so the teacher never needs
    the full vocabulary.
    """
    return (
        torch.log_softmax(student_logps.gather(-1, teacher_top_ids), dim=-1),
        torch.log_softmax(teacher_top_logps, dim=-1),
    )


def geometric_interpolation(first_logps: torch.Tensor, second_logps: torch.Tensor, weight: float) -> torch.Tensor:
    """Log-probs of ``p1^(1 - weight) p2^weight``, renormalised: the softmax of the logits mixed linearly.

    ``weight`` 0 is ``p1``, 1 is ``p2``; above 1 extrapolates past ``p2`` (away from ``p1``). Mixing log-probs or raw
    logits gives the same distribution (they differ by a constant per position), so either may be passed.
    """
    return torch.log_softmax((1.0 - weight) * first_logps + weight * second_logps, dim=-1)


# -- per-token weights over packed rows (row after row, as ``positions=every position`` packs them) ----------------


def relative_positions(lengths: list[int]) -> torch.Tensor:
    """``(t + 1) / T`` at token ``t`` of each row of length ``T``, packed ``(sum of lengths,)``: the last token is 1."""
    return torch.cat([torch.arange(1, n + 1, dtype=torch.float32) / n for n in lengths] or [torch.zeros(0)])


def position_weights(lengths: list[int], *, power: float = 1.0, floor: float = 0.0) -> torch.Tensor:
    """``floor + (1 - floor) * u ** power`` at relative position ``u`` (:func:`relative_positions`), scaled to
    mean 1 within each row, packed.

    ``power`` 1 grows linearly, above 1 keeps the weight on the last tokens, 0 is uniform; ``floor`` is the weight
    a row's first token approaches. The mean-1 scaling keeps each row's total weight at its length, as an
    unweighted token mean has it: the weights move a row's loss between its positions, not between rows.
    """
    if power < 0 or not 0.0 <= floor <= 1.0:
        raise StackrlError(f"position_weights: power must be >= 0 and floor in [0, 1], not {power} and {floor}")
    raw = floor + (1.0 - floor) * relative_positions(lengths) ** power
    rows = raw.split(list(lengths))
    return torch.cat([row / row.mean() for row in rows if len(row)] or [torch.zeros(0)])


def returns_to_go(values: torch.Tensor, lengths: list[int], *, include_current: bool = True) -> torch.Tensor:
    """Each position's sum of ``values`` over the rest of its row, packed like ``values`` ``(P,)``.

    ``include_current``: ``G_t = sum over t' >= t``; otherwise the strictly later positions only (``t' > t``,
    0 at a row's last token).
    """
    if values.size(0) != sum(lengths):
        raise StackrlError(f"returns_to_go: {values.size(0)} values for rows of {sum(lengths)} tokens in all")
    out = []
    for row in values.split(list(lengths)):
        total = row.flip(0).cumsum(0).flip(0)
        out.append(total if include_current else total - row)
    return torch.cat(out) if out else values.clone()
