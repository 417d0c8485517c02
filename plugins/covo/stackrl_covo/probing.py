"""Where CoVo probes a trajectory, and the distances and curiosities the probes' log-probs give.

Steps are located in the completion's own tokens. The state after step ``k`` is the longest token prefix of the
completion that lies inside its text up to the step's end (``B_k`` tokens). An answer probe branches there: its
tokens are the rest of the step's text (when a token straddles the step's end) followed by the template filled
with a distinct answer, so prefix and probe read as the authors' ``prompt + steps + "\\nThe answer is: " + y``.
A curiosity probe of step ``k`` is the trajectory's own tokens ``B_{k-1}..B_k``: step ``k`` given the steps
before it. With ``greedy_next_token`` every probe also averages in the log-prob of the most likely token after it
(the authors score with a one-token greedy generation): one more token, whose own log-prob is ignored, gives the
top-1 of the distribution after the probe.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

import torch

from stackrl_covo.formulas import perplexity, step_curiosity


@dataclass
class Plan:
    """The probes of one trajectory: ``steps x answers`` answer probes (step-major), then its curiosity probes."""

    steps: int
    answers: int
    probes: list[tuple[int, list[int]]] = field(default_factory=list)
    curiosity_steps: int = 0


class TokenPrefixes:
    """``count(char)``: how many of a completion's tokens decode to text within its first ``char`` characters."""

    def __init__(self, tokenizer, ids: list[int]):
        self._tokenizer, self._ids = tokenizer, ids
        # Per-token lengths are exact for whole characters; each guess is checked against a real decode.
        lengths = [len(piece) for piece in tokenizer.batch_decode([[t] for t in ids], skip_special_tokens=True)]
        self._guess_ends = torch.tensor(lengths).cumsum(0).tolist() if ids else []

    def text_length(self, count: int) -> int:
        return len(self._tokenizer.decode(self._ids[:count], skip_special_tokens=True))

    def count(self, char: int) -> int:
        guess = bisect_right(self._guess_ends, char)
        if self.text_length(guess) <= char and (guess == len(self._ids) or self.text_length(guess + 1) > char):
            return guess
        low, high = 0, len(self._ids)  # the largest count whose text fits: decode lengths grow with the count
        while low < high:
            middle = (low + high + 1) // 2
            if self.text_length(middle) <= char:
                low = middle
            else:
                high = middle - 1
        return low


class ProbeTexts:
    """Token ids of probe texts, each distinct text tokenized once: a group's trajectories probe the same answers."""

    def __init__(self, tokenizer):
        self._tokenizer, self._ids = tokenizer, {}

    def encode(self, texts: list[str]) -> list[list[int]]:
        new = [text for text in dict.fromkeys(texts) if text not in self._ids]
        if new:
            self._ids.update(zip(new, self._tokenizer(new, add_special_tokens=False)["input_ids"]))
        return [self._ids[text] for text in texts]


def plan_probes(
    tokenizer,
    probe_texts: ProbeTexts,
    completion_ids: list[int],
    text: str,
    steps: list[tuple[int, int]],
    answers: list[str],
    template: str,
    *,
    curiosity: bool,
    greedy: bool,
    filler: int,
) -> Plan:
    """The probes of one trajectory whose ``text`` has ``steps`` (character spans), for the group's ``answers``.

    ``answers`` may be empty (no answer probes: a group with one distinct answer); ``filler`` is the token
    appended after probes that end the trajectory, for the greedy next-token log-prob. ``probe_texts`` tokenizes
    the answer probes.
    """
    prefixes = TokenPrefixes(tokenizer, completion_ids)
    plan = Plan(steps=len(steps), answers=len(answers))
    boundaries = [prefixes.count(end) for _, end in steps]
    branches, texts = [], []
    for (_, end), branch in zip(steps, boundaries):
        rest = text[prefixes.text_length(branch) : end]
        branches += [branch] * len(answers)
        texts += [rest + template.format(answer=answer) for answer in answers]
    encoded = probe_texts.encode(texts)
    plan.probes += [(branch, ids + [filler] if greedy else ids) for branch, ids in zip(branches, encoded)]
    if curiosity:
        for start, end in zip([0, *boundaries], boundaries):
            if end > start:
                after = completion_ids[end : end + 1] or [filler]
                plan.probes.append((start, completion_ids[start:end] + after if greedy else completion_ids[start:end]))
                plan.curiosity_steps += 1
    return plan


def read_plan(plan: Plan, logprobs: list[torch.Tensor]) -> tuple[torch.Tensor, float | None]:
    """The ``(steps, answers)`` distance matrix and the mean step curiosity from the probes' log-probs.

    ``logprobs`` holds each probe's scored log-probs in plan order (greedy next-token log-prob already last).
    """
    answer_probes = plan.steps * plan.answers
    distances = torch.stack([perplexity(lp) for lp in logprobs[:answer_probes]]) if answer_probes else torch.zeros(0)
    curiosities = [step_curiosity(lp) for lp in logprobs[answer_probes:]]
    curiosity = sum(curiosities) / len(curiosities) if curiosities else None
    return distances.view(plan.steps, plan.answers), curiosity


def probe_logprobs(scores, greedy: bool) -> list[torch.Tensor]:
    """Each probe's log-probs from a ``Scores`` row: its tokens', the appended one's replaced by the greedy top-1.

    float64 from here on, as the authors' distances (Python floats) are.
    """
    lengths = scores.mask.sum(dim=1).cpu()
    logprobs = scores.logprobs.double().cpu()
    if greedy:
        rows, last = torch.arange(len(lengths)), lengths - 1
        logprobs[rows, last] = scores.topk_logprobs[rows, last, 0].double().cpu()
    return [row[:length] for row, length in zip(logprobs, lengths.tolist())]
