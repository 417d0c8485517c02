"""Several turns in one completion: generated segments with injected text between them, and per-segment credit.

A multi-turn method (answer, check the answer, answer again) trains one row on the whole exchange. The row's
completion is its generated segments and the text injected between them (an instruction), the injected tokens are
kept out of the loss (``Samples.loss_mask``), and each generated segment is recorded with its kind, turn and token
span in the column :data:`SEGMENTS_COLUMN`, from which the plugin rewards each segment and gives its tokens their
own advantage (:func:`segment_advantages`; :func:`rollout_segment_advantages` over a rollout). A method whose
turns are judged against the row's reference answer (:func:`judged_segments`, :func:`judged_turns` for answers and
verdicts) rewards a row by its final answer (:func:`final_answer_rewards`) and its verdicts by whether they say
what the answer they check is (:func:`verdicts_right`, :func:`verifier_figures`). Each turn is sampled from the
exact tokens before it (prompt, earlier segments, injected text), so the row trains every segment on the context it
was sampled from. A method that keeps a turn only when it passes a rule samples it with :func:`sample_accepted`
(sequential rejection sampling), and fine-tunes on chosen segments of the rows it keeps as :func:`segment_pairs`.

A method that credits turns also on single-turn rows takes a completion's lines as its steps: :func:`line_spans`
splits token ids after each token holding a line break (:class:`NewlineTokens`), and :func:`turn_spans` gives each
row's generated segments where the rollout has them, its lines otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch

from stackrl.blocks.kl import reference_kl
from stackrl.blocks.roles import broadcast_segments
from stackrl.context import Samples
from stackrl.errors import ConfigError, PluginError
from stackrl.hookspecs import hookimpl
from stackrl.plugin import Plugin
from stackrl.rewards import reference_answers
from stackrl.tasks import parse_verdict

SEGMENTS_COLUMN = "segments"  # column: each row's generated segments, a list of Segment
ANSWER, VERIFY = "answer", "verify"  # the kinds of the segments of verify_then_revise's trajectories


class Segment(NamedTuple):
    """One generated part of a multi-turn completion: tokens ``start:end`` of it (end exclusive)."""

    kind: str  # what the segment does: "answer", "verify", ...
    turn: int  # how many segments of this kind came before it in the row
    start: int
    end: int
    text: str  # decoded without special tokens, as ctx.generate's Generation.text


class Trajectory:
    """One row's turns so far: its prompt tokens, then generated segments and injected text."""

    def __init__(self, prompt_ids: Sequence[int]):
        self.prompt_ids = list(prompt_ids)
        self.completion_ids: list[int] = []
        self.loss_mask: list[int] = []
        self.segments: list[Segment] = []
        self._eos: int | None = None  # the end-of-sequence token the last segment ended with, if it is last

    def context(self) -> list[int]:
        """The tokens the next turn continues."""
        return self.prompt_ids + self.completion_ids

    def of_kind(self, kind: str) -> list[Segment]:
        return [s for s in self.segments if s.kind == kind]

    def add(self, kind: str, completion_ids: Sequence[int], text: str, eos_token_ids: Sequence[int]) -> Segment:
        """Append a generated segment. Its end-of-sequence token is held back: text injected after it follows the
        segment's text as a completion decodes (the roles formats have no eos inside), and the row's last segment
        gets it back in :meth:`packed`."""
        ids = list(completion_ids)
        self._eos = ids.pop() if ids and ids[-1] in eos_token_ids else None
        turn = len(self.of_kind(kind))
        segment = Segment(kind, turn, len(self.completion_ids), len(self.completion_ids) + len(ids), text)
        self.completion_ids += ids
        self.loss_mask += [1] * len(ids)
        self.segments.append(segment)
        return segment

    def inject(self, ids: Sequence[int]) -> None:
        """Append text the policy did not write (an instruction): attended to, never trained."""
        self._eos = None
        self.completion_ids += list(ids)
        self.loss_mask += [0] * len(ids)

    def copy(self) -> Trajectory:
        """An independent trajectory with the same turns so far, to continue another way."""
        twin = Trajectory(self.prompt_ids)
        twin.completion_ids, twin.loss_mask = list(self.completion_ids), list(self.loss_mask)
        twin.segments = list(self.segments)
        twin._eos = self._eos
        return twin

    def packed(self) -> tuple[list[int], list[int], list[Segment]]:
        """The row's completion ids, loss mask and segments, the last segment's end-of-sequence token restored."""
        ids, mask, segments = list(self.completion_ids), list(self.loss_mask), list(self.segments)
        if self._eos is not None:
            ids.append(self._eos)
            mask.append(1)
            segments[-1] = segments[-1]._replace(end=segments[-1].end + 1)
        return ids, mask, segments


def first_turn(prompts: Sequence, kind: str, ctx, **sampling) -> list[Trajectory]:
    """One trajectory per prompt (text, chat messages or token ids), its first segment sampled in one
    ``ctx.generate`` call."""
    generations = ctx.generate(list(prompts), **sampling)
    trajectories = [Trajectory(g.prompt_ids) for g in generations]
    for t, g in zip(trajectories, generations):
        t.add(kind, g.completion_ids, g.text, ctx.eos_token_ids)
    return trajectories


def generate_turn(trajectories: Sequence[Trajectory], kind: str, ctx, **sampling) -> list[Segment]:
    """Sample the next segment of every trajectory in one ``ctx.generate`` call (the same call on every process),
    each from its own context, and append it."""
    generations = ctx.generate([t.context() for t in trajectories], **sampling)
    return [t.add(kind, g.completion_ids, g.text, ctx.eos_token_ids) for t, g in zip(trajectories, generations)]


def sample_accepted(
    trajectories: Sequence[Trajectory], kind: str, ctx, accept: Callable[[int, str], bool], *, tries: int, **sampling
) -> list[Segment | None]:
    """Sequential rejection sampling of one turn: sample the next segment of every trajectory, keep it where
    ``accept(index, text)`` holds, and sample again for the others, up to ``tries`` samples a trajectory. Each
    round is one ``ctx.generate`` call over the trajectories still without an accepted segment; a rejected sample
    is dropped, so the kept one is the first accepted of ``tries`` draws. Returns each trajectory's accepted
    segment, appended to it, or ``None``."""
    accepted: list[Segment | None] = [None] * len(trajectories)
    pending = list(range(len(trajectories)))
    for _ in range(tries):
        if not pending:
            break
        generations = ctx.generate([trajectories[i].context() for i in pending], **sampling)
        for i, g in zip(pending, generations):
            if accept(i, g.text):
                accepted[i] = trajectories[i].add(kind, g.completion_ids, g.text, ctx.eos_token_ids)
        pending = [i for i in pending if accepted[i] is None]
    return accepted


def segment_pairs(trajectory: Trajectory, trained: Callable[[Segment], bool]) -> list[tuple[list[int], list[int]]]:
    """The (context, completion) token pairs that fine-tune the ``trained`` segments of a trajectory: each segment
    after everything before it (prompt, earlier segments, injected text), the last one with its end-of-sequence
    token, as :meth:`Trajectory.packed` gives it. Pairs for :meth:`stackrl.StepContext.supervised_phase`."""
    ids, _, segments = trajectory.packed()
    return [(trajectory.prompt_ids + ids[: s.start], ids[s.start : s.end]) for s in segments if trained(s)]


def verify_then_revise(
    prompts: Sequence, ctx, *, answers: int, verify: str, revise: str, verify_last: bool = False,
    verdict: Callable[[str], bool | None] = parse_verdict,
) -> list[Trajectory]:
    """Answer, verify, and answer again after a "wrong" verdict, for every prompt, up to ``answers`` answers.

    ``verify`` (injected after an answer) and ``revise`` (after a "wrong" verdict) are the instructions' texts;
    ``verdict`` reads a verification (True: right, False: wrong, None: none), and only False goes on. The last
    answer a row may give is verified only with ``verify_last``: its verdict then ends the row whatever it says.
    Each turn is one ``ctx.generate`` call over the rows still going.
    """
    tokens = lambda text: ctx.tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    verify_ids, revise_ids = tokens(verify), tokens(revise)
    rows = first_turn(prompts, ANSWER, ctx)
    active = list(rows)
    for given in range(1, answers + 1):
        if given == answers and not verify_last:
            break
        for row in active:
            row.inject(verify_ids)
        checks = generate_turn(active, VERIFY, ctx)
        active = [row for row, check in zip(active, checks) if verdict(check.text) is False]
        if given == answers or not active:
            break
        for row in active:
            row.inject(revise_ids)
        generate_turn(active, ANSWER, ctx)
    return rows


def packed_samples(trajectories: Sequence[Trajectory], columns: dict | None = None) -> Samples:
    """The rollout of these trajectories, one row each: completions, loss mask and the segments column."""
    rows = [t.packed() for t in trajectories]
    return Samples(
        completion_ids=[ids for ids, _, _ in rows],
        prompt_ids=[t.prompt_ids for t in trajectories],
        columns={SEGMENTS_COLUMN: [segments for _, _, segments in rows], **(columns or {})},
        loss_mask=[mask for _, mask, _ in rows],
    )


class NewlineTokens:
    """Whether a token id decodes to text holding a line break, under one tokenizer; each id decoded once."""

    def __init__(self, tokenizer):
        self._tokenizer = tokenizer
        self._known: dict[int, bool] = {}

    def __call__(self, token: int) -> bool:
        if token not in self._known:
            self._known[token] = "\n" in self._tokenizer.decode([token])
        return self._known[token]


def line_spans(completion_ids: Sequence[int], is_newline: Callable[[int], bool]) -> list[tuple[int, int]]:
    """``(start, end)`` token ranges of a completion's lines: each ends after a newline token, the last at the end."""
    bounds, start = [], 0
    for t, token in enumerate(completion_ids):
        if is_newline(token):
            bounds.append((start, t + 1))
            start = t + 1
    if start < len(completion_ids):
        bounds.append((start, len(completion_ids)))
    return bounds


def turn_spans(rollout, is_newline: Callable[[int], bool], *, lines: bool = False) -> list[list[tuple[int, int]]]:
    """Each row's turns as token spans: its generated segments (:data:`SEGMENTS_COLUMN`) where the rollout has them
    and ``lines`` is false, else its lines (:func:`line_spans`). Injected text lies in no segment's span."""
    if SEGMENTS_COLUMN in rollout.columns and not lines:
        return [[(s.start, s.end) for s in row] for row in rollout.columns[SEGMENTS_COLUMN]]
    return [line_spans(ids, is_newline) for ids in rollout.completion_ids]


def segments_of(rollout, *, plugin: str) -> list[list[Segment]]:
    """Each row's segments, from the rollout's :data:`SEGMENTS_COLUMN`; an error naming ``plugin`` without it."""
    if SEGMENTS_COLUMN not in rollout.columns:
        raise PluginError(
            f"{plugin}: the rollout has no column '{SEGMENTS_COLUMN}'; its rows come from its own generate_rollout "
            "(set exclusive.generate_rollout: " + plugin + " if another plugin generates)"
        )
    return rollout.columns[SEGMENTS_COLUMN]


def judged_segments(rollout, judge: Callable[[Segment, object], object], *, plugin: str, column: str, purpose: str) -> list[list]:
    """Each row's ``judge(segment, answer)`` of its segments in order, ``answer`` the row's reference answer from
    ``column``; ``plugin`` and ``purpose`` name a missing column in the error (:func:`stackrl.rewards.reference_answers`)."""
    answers = reference_answers(rollout.columns, column, plugin=plugin, purpose=purpose)
    return [[judge(s, answer) for s in segments] for segments, answer in zip(segments_of(rollout, plugin=plugin), answers)]


def judged_turns(rollout, is_correct: Callable[[str, object], bool], *, plugin: str, column: str) -> list[list]:
    """Each row's outcome of its segments in order: an answer's correctness (``is_correct(text, reference)``), a
    verification's verdict (:func:`stackrl.tasks.parse_verdict`: True "correct", False "wrong", None none)."""

    def outcome(segment: Segment, answer) -> bool | None:
        return is_correct(segment.text, answer) if segment.kind == ANSWER else parse_verdict(segment.text)

    return judged_segments(rollout, outcome, plugin=plugin, column=column, purpose="judge answers and verdicts against")


def verdicts_right(kinds: Sequence[str], outcomes: Sequence) -> list[bool]:
    """Whether each verification of a trajectory (its segments' kinds and outcomes in order, as
    :func:`judged_turns` gives them) says what the answer before it is: "correct" to a right answer, "wrong" to a
    wrong one. A verification without a verdict, or before any answer, is not right."""
    right, checked = [], None
    for kind, outcome in zip(kinds, outcomes, strict=True):
        if kind == ANSWER:
            checked = bool(outcome)
        else:
            right.append(outcome is not None and checked is not None and outcome == checked)
    return right


def verifier_figures(correct: Sequence[bool], verdicts: Sequence) -> dict[str, float]:
    """The verifications as a classifier of the answers they check, "correct" the positive class:
    ``precision`` = P(right | judged correct), ``recall`` = P(judged correct | right), ``recall_negative`` =
    P(judged wrong | wrong); a missing verdict counts as not "correct" and not "wrong". Figures without a
    denominator are left out."""
    said_correct = [v is True for v in verdicts]
    said_wrong = [v is False for v in verdicts]
    figures = {}
    true_positive = sum(c and s for c, s in zip(correct, said_correct))
    if any(said_correct):
        figures["precision"] = true_positive / sum(said_correct)
    if any(correct):
        figures["recall"] = true_positive / sum(correct)
    if not all(correct):
        figures["recall_negative"] = sum(not c and s for c, s in zip(correct, said_wrong)) / sum(not c for c in correct)
    return figures


def log_revisions(ctx, kinds, outcomes, answers, right, *, right_key: str, revised_key: str) -> list[list[bool]]:
    """Log what a verify-then-revise loop did with its rows (``kinds``/``outcomes`` as :func:`judged_turns` gives
    them, ``answers`` each row's answers judged in turn, ``right`` each row's verdicts judged against the answers
    they check): the first verdict as a classifier of the first answer (``verify_<figure>``), the share of right
    verdicts (``right_key``), the share of rows answered again (``revised_key``) and how their last answer changed
    on their first (``<revised_key>_<transition>``). Returns the rows answered again."""
    first_verdicts = [next((o for k, o in zip(ks, out) if k == VERIFY), None) for ks, out in zip(kinds, outcomes)]
    for name, value in verifier_figures([a[0] for a in answers], first_verdicts).items():
        ctx.log(f"verify_{name}", value)
    judged = [r for row in right for r in row]
    if judged:
        ctx.log(right_key, sum(judged) / len(judged))
    revised = [a for a in answers if len(a) > 1]
    ctx.log(revised_key, len(revised) / len(answers))
    for name, value in transitions([a[0] for a in revised], [a[-1] for a in revised]).items():
        ctx.log(f"{revised_key}_{name}", value)
    return revised


def segment_advantages(
    values: Sequence[Sequence[float]], segments: Sequence[Sequence[Segment]], group_size: int, width: int
) -> torch.Tensor:
    """``(N, width)`` per-token advantages from one value per segment (``values[i][k]`` for ``segments[i][k]``).

    The baseline of a segment is its group's segments of the same kind and turn (the first answers of a group are
    compared with each other, its first checks with each other, ...): each value is centred on their mean and
    divided by their standard deviation (+1e-4, as GRPO's), and a segment alone in its slot gets 0. The advantage
    covers the segment's tokens; injected text and padding get 0.
    """
    advantages = [[0.0] * len(row) for row in segments]
    for group in range(0, len(values), group_size):
        slots: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for row in range(group, group + group_size):
            if len(values[row]) != len(segments[row]):
                raise PluginError(f"segment_advantages: row {row} has {len(segments[row])} segments but {len(values[row])} values")
            for k, segment in enumerate(segments[row]):
                slots.setdefault((segment.kind, segment.turn), []).append((row, k))
        for members in slots.values():
            if len(members) < 2:
                continue
            scores = torch.tensor([float(values[row][k]) for row, k in members])
            for (row, k), advantage in zip(members, ((scores - scores.mean()) / (scores.std() + 1e-4)).tolist()):
                advantages[row][k] = advantage
    spans = [[(s.start, s.end) for s in row] for row in segments]
    return broadcast_segments(advantages, spans, width)


def rollout_segment_advantages(rollout, values: Sequence[Sequence[float]]) -> torch.Tensor:
    """:func:`segment_advantages` of the segments in ``rollout``'s :data:`SEGMENTS_COLUMN`, one value per segment,
    over its groups and its completions' width."""
    return segment_advantages(
        values, rollout.columns[SEGMENTS_COLUMN], rollout.group_size, rollout.completion_mask().size(1)
    )


def final_answer_rewards(ctx, correct: Sequence[Sequence[bool]], *, first: str) -> list[float]:
    """The reward of each row whose answers were judged in turn (``correct[i]``, first to last): its final answer's
    correctness. Logs the share of rows whose first answer was right as ``first``."""
    ctx.log(first, sum(row[0] for row in correct) / len(correct))
    return [float(row[-1]) for row in correct]


def check_instruction(section: str, key: str, text: str) -> None:
    """Refuse an injected instruction (the config key ``<section>.<key>``) that holds no text."""
    if not text.strip():
        raise ConfigError(f"{section}.{key}: must hold the instruction to inject")


def transitions(before: Sequence[bool], after: Sequence[bool]) -> dict[str, float]:
    """How a second answer changed on the first: the shares of rows that went wrong -> right and right -> wrong
    (of all rows), and their difference, the net self-correction."""
    n = len(before)
    if n == 0:
        return {}
    fixed = sum(1 for a, b in zip(before, after) if not a and b) / n
    broken = sum(1 for a, b in zip(before, after) if a and not b) / n
    return {"wrong_to_right": fixed, "right_to_wrong": broken, "net_correction": fixed - broken}


class TwoStages(Plugin):
    """A plugin whose rows are two attempts in one trajectory, trained in two stages (SCoRe, Octopus).

    In stage I a KL term (``first_attempt_kl`` times :func:`stackrl.blocks.kl.reference_kl`) holds each row's first
    segment near the policy as training began, a snapshot named after the plugin and kept in checkpoints; stage II,
    from the step ``stage_two_step`` on, drops it. The stage switches in ``post_step`` and is part of the plugin's
    state, so a resumed run stays in the stage it reached. The subclass's ``Config`` has both fields, and its rows
    carry the stage they were generated in, :meth:`stage_columns`, beside :data:`SEGMENTS_COLUMN`.
    """

    stage_column = ""  # the column of each row's stage: the subclass names it

    def __init__(self, config=None):
        super().__init__(config)
        self.stage = 1 if self.config.stage_two_step > 0 else 2
        self.switched_at: int | None = None  # the step stage II began at

    def stage_columns(self, rows: int) -> dict[str, list[int]]:
        """The stage column of ``rows`` rows generated now."""
        return {self.stage_column: [self.stage] * rows}

    @hookimpl
    def train_begin(self, ctx):
        if ctx.step == 0 and self.stage == 1 and self.config.first_attempt_kl:
            ctx.update_snapshot(self.name, checkpoint=True)  # the start, stage I's reference; a resume restores it

    @hookimpl
    def loss_term(self, ctx):
        rollout = ctx.rollout
        if self.stage_column not in rollout.columns or not self.config.first_attempt_kl:
            return None
        first = ctx.loss_mask.new_zeros(ctx.loss_mask.shape)
        for row, (segments, stage) in enumerate(zip(rollout.columns[SEGMENTS_COLUMN], rollout.columns[self.stage_column])):
            if stage == 1:  # stage II drops the KL
                first[row, segments[0].start : segments[0].end] = 1
        if not first.any():
            return None
        kl = reference_kl(ctx, first, model=self.name)
        ctx.log("first_attempt_kl", kl.item())
        return self.config.first_attempt_kl * kl

    @hookimpl
    def post_step(self, ctx):
        if self.stage == 1 and ctx.step >= self.config.stage_two_step:
            self.stage, self.switched_at = 2, ctx.step
        ctx.log("stage", self.stage)

    @hookimpl
    def state_dict(self):
        return {"stage": self.stage, "switched_at": self.switched_at}

    @hookimpl
    def load_state_dict(self, state):
        self.stage, self.switched_at = int(state["stage"]), state["switched_at"]
