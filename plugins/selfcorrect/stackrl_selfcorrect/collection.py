"""Stage 1's data: self-correction trajectories built turn by turn by sequential rejection sampling.

Each prompt's first answer is sampled once; verifications are sampled until one's verdict matches the truth
(kept) or the tries run out (the row is dropped); after a right "wrong" verdict, revisions are sampled until one
is right. Three kinds of trajectory are kept, each with the segments the fine-tuning trains (the paper's Eq. 1):

- ``wrong_to_right``: a wrong answer, "wrong", a right revision: the verdict and the revision;
- ``told_wrong``: a right answer, the injected (masked) verdict ``told_wrong``, a right revision: the revision;
- ``stopped``: a right answer, "correct", the end: the verdict (and the answer, with ``train_first_answer``).

A verdict the policy wrote is trained only where it is right; the one wrong verdict in the data, the injected
``told_wrong``, is context, never a target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stackrl.blocks.turns import ANSWER, VERIFY, Trajectory, first_turn, sample_accepted, segment_pairs
from stackrl.tasks import parse_verdict

KINDS = ("wrong_to_right", "told_wrong", "stopped")


@dataclass
class Collected:
    """One batch's collection: its rows (each prompt's trajectory as far as it got, for the rollout), the
    fine-tuning pairs of the kept trajectories, and how many of each kind were kept."""

    rows: list[Trajectory]
    pairs: list[tuple[list[int], list[int]]] = field(default_factory=list)
    kept: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))

    def keep(self, kind: str, trajectory: Trajectory, train_first: bool) -> None:
        first = trajectory.segments[0]
        self.pairs += segment_pairs(trajectory, lambda s: s != first or train_first)
        self.kept[kind] += 1


def collect(prompts: list, answers: list, ctx, settings) -> Collected:
    """Sequential rejection sampling over a batch: ``answers`` are the prompts' reference answers, ``settings``
    the plugin's config (its instructions, tries and ``is_correct``); a prompt whose answer is ``None`` keeps
    nothing."""
    tokens = lambda text: ctx.tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    right = lambda text, i: settings.is_correct(text, answers[i])  # noqa: E731
    rows = first_turn(prompts, ANSWER, ctx)
    first_right = [right(row.segments[0].text, i) for i, row in enumerate(rows)]
    told = [i for i, r in enumerate(first_right) if r and settings.told_wrong_tries]
    told_rows = [rows[i].copy() for i in told]
    out = Collected(rows)

    for row in rows:
        row.inject(tokens(settings.verify_instruction))
    # A row without an answer (label-free) has no truth for its verdict to match: it keeps nothing.
    labelled = [answer is not None for answer in answers]
    verdicts = sample_accepted(rows, VERIFY, ctx, lambda i, text: labelled[i] and parse_verdict(text) == first_right[i],
                               tries=settings.verdict_tries)
    for i, verdict in enumerate(verdicts):
        if verdict is not None and first_right[i]:
            out.keep("stopped", rows[i], settings.train_first_answer)

    wrong = [i for i, v in enumerate(verdicts) if v is not None and not first_right[i]]
    for i in wrong:
        rows[i].inject(tokens(settings.revise_instruction))
    revised = sample_accepted([rows[i] for i in wrong], ANSWER, ctx, lambda k, text: right(text, wrong[k]),
                              tries=settings.revision_tries)
    for i, revision in zip(wrong, revised):
        if revision is not None:
            out.keep("wrong_to_right", rows[i], False)

    told_ids = tokens(settings.verify_instruction + settings.told_wrong + settings.revise_instruction)
    for row in told_rows:
        row.inject(told_ids)
    revised = sample_accepted(told_rows, ANSWER, ctx, lambda k, text: right(text, told[k]),
                              tries=settings.told_wrong_tries)
    for row, revision in zip(told_rows, revised):
        if revision is not None:
            out.keep("told_wrong", row, False)
    return out
