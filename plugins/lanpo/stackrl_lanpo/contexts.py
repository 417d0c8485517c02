"""LANPO's contexts: the prompt a row is sampled from and trained on, given the trials the pool shows it.

A group's rows are split by mode (:func:`row_modes`): the first rows reflect on the question's own earlier trials,
the next ones read lessons from related questions, the rest see the question alone. Every text here is made from
the trials' prompts and completions (and what the policy writes about them), never from a reward.
"""

from __future__ import annotations

import math

from stackrl.tasks import checked_retry_prompt, judge_prompt

REFLECT, ABSTRACT, PLAIN = "reflect", "abstract", "plain"

# A related trial as a lesson, raw: its question and the attempt the policy wrote (the CPU analogue of a lesson).
TRIAL_TEMPLATE = "{prompt}{completion}\n"
# The lessons before the question, as the built-in task lays out a reference before it (REFERENCE_TEMPLATE).
ABSTRACTION_TEMPLATE = "{lessons}\n{prompt}"
# The policy's own abstraction of related trials (the paper's setting): it is asked for the lessons they teach.
SUMMARY_TEMPLATE = ("Here are attempts at problems like the next one:\n\n{trials}\nWrite the general lessons they "
                    "teach for solving such problems, without solving any particular one.\nLessons:\n")


def row_modes(group_size: int, reflect_share: float, abstract_share: float) -> list[str]:
    """Each row's mode in a group: ``round(share * group_size)`` rows reflect, then as many read lessons (half up;
    never more rows than the group has), the rest plain."""
    reflect = min(group_size, math.floor(reflect_share * group_size + 0.5))
    abstract = min(group_size - reflect, math.floor(abstract_share * group_size + 0.5))
    return [REFLECT] * reflect + [ABSTRACT] * abstract + [PLAIN] * (group_size - reflect - abstract)


def reflection_prompt(prompt: str, attempt: str, template: str) -> str:
    """The question with an earlier trial of it and the instruction to try again (docs/roles.md's retry format by
    default): no word on whether the trial was right."""
    return template.format(prompt=prompt, attempt=attempt)


def check_request(prompt: str, attempt: str) -> str:
    """The prompt asking the policy to check its earlier trial (the judge format): its own reflection, written
    before the retry."""
    return judge_prompt(prompt, attempt)


def checked_reflection_prompt(prompt: str, attempt: str, check: str) -> str:
    """The question, the earlier trial, the policy's own check of it, then the retry instruction."""
    return checked_retry_prompt(prompt, attempt, check)


def trial_lessons(trials) -> str:
    """Related trials as lessons, raw: each one's question and attempt, in the order given."""
    return "".join(TRIAL_TEMPLATE.format(prompt=t.prompt, completion=t.completion) for t in trials)


def abstraction_prompt(prompt: str, lessons: str, template: str) -> str:
    """The question after the lessons drawn from related trials."""
    return template.format(lessons=lessons, prompt=prompt)
