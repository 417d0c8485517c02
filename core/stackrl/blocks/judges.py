"""Judges: a model asked, through a prompt template, whether a completion answers its prompt well.

What self-judging rewards share: a ``Judge`` formats one judge prompt per completion, gets a judgement by
generating (a rationale, then a verdict or a score) from the live policy, a snapshot or an auxiliary model
(``aux_models``: a second Transformers model, a server, a rule), or by the likelihood of the two verdict words from
the policy, the frozen reference (LoRA off), a snapshot or an auxiliary ``hf`` model, and parses it into a number in
``[0, 1]``.
A judgement it cannot parse is ``None``, not 0: the completion is not scored, and the share of malformed
judgements is logged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Optional

import torch

from stackrl.errors import ConfigError
from stackrl.hookspecs import hookimpl
from stackrl.plugin import Plugin


class Scale(Enum):
    """What a judgement says, and the number it becomes."""

    yes_no = "yes_no"  # "yes" -> 1, "no" -> 0
    correct_wrong = "correct_wrong"  # "correct" -> 1, "wrong" or "incorrect" -> 0
    score_100 = "score_100"  # a number from 0 to 100 -> score / 100


class Mode(Enum):
    generate = "generate"  # the judge writes its judgement (a rationale first, if the template asks for one)
    likelihood = "likelihood"  # P(positive word) / (P(positive word) + P(negative word)) after the judge prompt


# The words of each two-way scale: positive first. Likelihood mode scores the first of each list.
VERDICT_WORDS = {Scale.yes_no: (("yes",), ("no",)), Scale.correct_wrong: (("correct",), ("wrong", "incorrect"))}
_NUMBER = re.compile(r"(?<![/\d.])-?\d+(?:\.\d+)?")  # not the 100 of "85/100"


def parse_judgement(text: str, scale: Scale, prefix: str | None = None) -> float | None:
    """The number a judgement stands for, or ``None`` when it is malformed.

    With ``prefix`` (``"Verdict:"``), only what follows its first occurrence counts, and the first word or number
    there is read; without it, the last verdict word or number in the whole text. A word outside the scale, a
    score outside 0..100, or nothing to read is malformed.
    """
    if prefix is not None:
        start = text.find(prefix)
        if start < 0:
            return None
        text = text[start + len(prefix) :]
    if scale is Scale.score_100:
        numbers = _NUMBER.findall(text)
        if not numbers:
            return None
        value = float(numbers[0] if prefix is not None else numbers[-1])
        return value / 100 if 0 <= value <= 100 else None
    positive, negative = VERDICT_WORDS[scale]
    words = re.findall(r"[a-z]+", text.lower())
    if prefix is not None:
        words = words[:1]
    for word in reversed(words):
        if word in positive:
            return 1.0
        if word in negative:
            return 0.0
    return None


@dataclass
class JudgeSettings:
    """How a plugin's judge works: the fields a plugin's ``Config`` inherits (defaults set per plugin)."""

    # Formatted with {prompt} (the dataset prompt; a chat's last user message), {attempt} (the completion) and
    # any dataset column of the row.
    judge_template: str = "{prompt}\n{attempt}\nIs this answer correct? Answer yes or no.\n"
    scale: Scale = Scale.yes_no
    mode: Mode = Mode.generate
    judge_model: str = "policy"  # policy | reference (LoRA off; likelihood only) | a snapshot | an aux_models name
    verdict_prefix: Optional[str] = None  # read only what follows it (e.g. "Verdict:"); likelihood: scored after it
    max_new_tokens: int = 256  # generate: the judgement's length
    temperature: float = 0.0  # generate: 0 = greedy


class Judge:
    """Judges the completions of a rollout as ``settings`` say; ``section`` names the plugin's config section."""

    def __init__(self, settings: JudgeSettings, section: str):
        self.settings, self.section = settings, section
        if settings.mode is Mode.generate and settings.judge_model == "reference":
            raise ConfigError(
                f"{section}.judge_model: 'reference' cannot write a judgement; use {section}.mode: likelihood to "
                f"judge with it, or another {section}.judge_model"
            )
        if settings.mode is Mode.likelihood and settings.scale is Scale.score_100:
            raise ConfigError(f"{section}.mode: likelihood judges two verdict words; {section}.scale score_100 needs generate")
        if settings.max_new_tokens < 1 or settings.temperature < 0:
            raise ConfigError(f"{section}.max_new_tokens must be at least 1 and {section}.temperature 0 or more")
        try:
            settings.judge_template.format_map(_AnyField())
        except (ValueError, IndexError) as exc:
            raise ConfigError(f"{section}.judge_template is not a format string: {exc}") from None
        if "{attempt}" not in settings.judge_template:
            raise ConfigError(f"{section}.judge_template must contain {{attempt}}, the completion judged")

    def prompts(self, rollout) -> list:
        """One judge prompt per completion: text, or a one-message chat where the rollout's prompts are chats."""
        prompts = []
        for row, (prompt, completion) in enumerate(zip(rollout.prompts, rollout.completions)):
            fields = {name: values[row] for name, values in rollout.columns.items()}
            question = prompt if isinstance(prompt, str) else [m for m in prompt if m["role"] == "user"][-1]["content"]
            try:
                text = self.settings.judge_template.format(**{**fields, "prompt": question, "attempt": completion})
            except KeyError as exc:
                raise ConfigError(
                    f"judge_template names {exc}, which the rollout lacks; columns: {', '.join(rollout.columns) or 'none'}"
                ) from None
            prompts.append(text if isinstance(prompt, str) else [{"role": "user", "content": text}])
        return prompts

    def __call__(self, ctx) -> list[float | None]:
        """Each completion's judgement in ``[0, 1]`` (``None``: malformed); logs ``judge_malformed``, the share."""
        judgements = self.judgements(ctx, self.prompts(ctx.rollout))
        ctx.log("judge_malformed", sum(j is None for j in judgements) / max(1, len(judgements)))
        formed = sum(j is not None for j in judgements)
        s, section = self.settings, self.section  # every judged completion counts as the plugin's activity
        after = f" after {section}.verdict_prefix '{s.verdict_prefix}'" if s.verdict_prefix else ""
        ctx.acted(formed, of=len(judgements), hint=None if formed else (
            f"no judgement held a verdict of {section}.scale '{s.scale.value}'{after}; see {section}.judge_template"))
        return judgements

    def judgements(self, ctx, prompts: list) -> list[float | None]:
        """The judgement of each of ``prompts``, judge prompts a plugin built itself (``None``: malformed), as the
        settings say; neither logged nor reported as activity (``__call__`` does both for a rollout's own)."""
        if self.settings.mode is Mode.generate:
            return self._generated(ctx, prompts)
        return self._likelihood(ctx, prompts)

    def _generated(self, ctx, prompts) -> list[float | None]:
        s = self.settings
        sampling = {"max_new_tokens": s.max_new_tokens}
        sampling.update({"do_sample": False} if s.temperature == 0 else {"do_sample": True, "temperature": s.temperature})
        generations = ctx.generate(prompts, model=s.judge_model, **sampling)
        return [None if g.failed else parse_judgement(g.text, s.scale, s.verdict_prefix) for g in generations]

    def _likelihood(self, ctx, prompts) -> list[float]:
        """``P(yes) / (P(yes) + P(no))``: each verdict word's whole log-prob after the judge prompt (and prefix)."""
        s = self.settings
        positive, negative = (words[0] for words in VERDICT_WORDS[s.scale])
        contexts, words = [], []
        for prompt in prompts:
            lead = verdict_lead(prompt, s.verdict_prefix)
            for word in (positive, negative):
                contexts.append(prompt)
                words.append(ctx.tokenizer(lead + word, add_special_tokens=False)["input_ids"])
        scores = ctx.score(contexts, words, model=s.judge_model)
        totals = (scores.logprobs * scores.mask).sum(dim=1).view(-1, 2)
        return torch.softmax(totals, dim=1)[:, 0].tolist()


def verdict_lead(prompt, prefix: str | None) -> str:
    """What a verdict word follows in likelihood mode: the prefix, if any, then a space where the text so far ends
    in a non-space, as the word would be written there ("Reply:" goes on with " yes"; byte-level BPE tokenizers
    keep " yes" and "yes" as different tokens). A chat prompt ends with its generation prompt, a new line."""
    before = (prompt if isinstance(prompt, str) else "\n") + (prefix or "")
    return (prefix or "") + (" " if before and not before[-1].isspace() else "")


class JudgeReward(Plugin):
    """A plugin whose reward is a model's judgement of each completion (``Judge``): a subclass sets ``Config``, a
    ``JudgeSettings`` with its own defaults, and ``section``, its config section (the entry-point name)."""

    Config = JudgeSettings
    section = ""
    activity = "completions got a well-formed judgement"

    def __init__(self, config=None):
        super().__init__(config)
        self._judge = Judge(self.config, self.section)

    @hookimpl
    def reward(self, ctx):
        return self._judge(ctx)


class _AnyField(dict):
    """Every field name formats (to check a template's syntax before the columns are known)."""

    def __missing__(self, key):
        return ""
