"""TRIAGE's role labels: the request a labeller answers, how its reply is read, and the rule labeller of the
built-in task.

The authors' structured judge reads a trajectory's segments and gives each one of four roles: decisive progress,
useful exploration, no-progress infrastructure, regression. Here a segment is a line of the completion (one step of
the built-in task), and the labeller is an auxiliary model asked once per completion with :func:`label_request`:
the question, the numbered steps, and the instruction to label each. Its reply has one ``"<k>. <role>"`` line per
step; :func:`read_labels` reads it (a step it leaves out or labels with another word gets no label).

On the built-in task a step can be checked with no model: :func:`rule_labels` marks a step whose arithmetic is wrong
(or a final answer that is not the last step's result) as regression, a step that repeats an earlier line as
no-progress infrastructure, a right new step as progress. It is registered as the auxiliary-model rule
``triage_steps`` (``aux_models: {labeller: {backend: rule, rule: triage_steps}}``).
"""

from __future__ import annotations

import operator
import re

from stackrl.answers import answer_after_phrase
from stackrl.aux_rules import register_rule

PROGRESS, EXPLORATION, INFRASTRUCTURE, REGRESSION = "progress", "exploration", "infrastructure", "regression"
ROLES = (PROGRESS, EXPLORATION, INFRASTRUCTURE, REGRESSION)
RULE = "triage_steps"  # the name the rule labeller is registered under

STEPS_MARKER, LABELS_MARKER = "Steps:", "Labels:"
INSTRUCTION = (
    "Label each step with its role: progress (a right new step towards the answer), exploration (a useful try that "
    "is not kept), infrastructure (no progress: a repeat or a step that adds nothing) or regression (a wrong step)."
)
# The request: {prompt} the question as the policy saw it, {steps} the completion's non-empty lines, numbered.
LABEL_TEMPLATE = "{prompt}" + STEPS_MARKER + "\n{steps}\n" + INSTRUCTION + "\n" + LABELS_MARKER + "\n"

_NUMBERED = re.compile(r"^\s*(\d+)[.:)]\s*(.*?)\s*$")
_STEP = re.compile(r"^\s*(-?\d+)\s*([-+*])\s*(-?\d+)\s*=\s*(-?\d+)\s*$")
_APPLY = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def numbered(steps: list[str]) -> str:
    """``steps`` as the request shows them: ``"1. 3 + 4 = 7"``, one a line."""
    return "\n".join(f"{k}. {step.strip()}" for k, step in enumerate(steps, start=1))


def label_request(prompt: str, steps: list[str], template: str = LABEL_TEMPLATE) -> str:
    """The labeller's request for one completion's ``steps`` at ``prompt``."""
    prompt = prompt if prompt.endswith("\n") else prompt + "\n"
    return template.format(prompt=prompt, steps=numbered(steps))


def read_labels(reply: str | None, count: int) -> list[str | None]:
    """The role of each of ``count`` steps from a labeller's reply (``"2. regression"`` a line; the first word after
    the number, in lower case). A step without a line, or with a word that is no role, gets ``None``; a failed
    reply (``None``) labels nothing."""
    labels: list[str | None] = [None] * count
    for line in (reply or "").splitlines():
        found = _NUMBERED.match(line)
        if found is None or not found[2]:
            continue
        k, word = int(found[1]) - 1, found[2].split()[0].strip(".,;").lower()
        if 0 <= k < count and labels[k] is None and word in ROLES:
            labels[k] = word
    return labels


def rule_labels(steps: list[str]) -> list[str]:
    """The rule labeller's roles for one completion's lines on the built-in task.

    A step ``a op b = c`` is regression where ``c`` is not ``a op b``; a final ``The answer is X.`` is regression
    where ``X`` is not the last right-or-wrong step's result; a line written before (up to spaces) is infrastructure
    (it adds nothing), as is a line in neither form (a cut-off step); any other line is progress. A wrong line
    is regression however often it is written. The rule never says exploration: no line of the task's chains is a
    try that is set aside.
    """
    seen: set[str] = set()
    last: int | None = None
    labels = []
    for step in steps:
        text = " ".join(step.split())
        found = _STEP.match(text)
        if found is not None:
            a, op, b, result = int(found[1]), found[2], int(found[3]), int(found[4])
            right = _APPLY[op](a, b) == result
            last = result
        else:
            answer = answer_after_phrase(text)
            # neither a step nor an answer: no progress, but nothing wrong to check
            right = answer is None or (last is not None and answer == str(last))
        new = text not in seen and (found is not None or answer is not None)
        labels.append(REGRESSION if not right else PROGRESS if new else INFRASTRUCTURE)
        seen.add(text)
    return labels


def steps_of_request(request: str) -> list[str]:
    """The numbered steps a request made by :func:`label_request` shows, in order."""
    body = request.split(STEPS_MARKER + "\n", 1)[-1].split("\n" + INSTRUCTION, 1)[0]
    return [found[2] for found in map(_NUMBERED.match, body.splitlines()) if found is not None]


def rule_reply(request: str) -> str:
    """The rule labeller's reply to one request: ``"1. progress\\n2. regression"``."""
    return "\n".join(f"{k}. {role}" for k, role in enumerate(rule_labels(steps_of_request(request)), start=1))


def triage_steps(prompts: list) -> list[str | None]:
    """The rule labeller as an auxiliary model: one reply per request (a request not in text gets ``None``)."""
    return [rule_reply(p) if isinstance(p, str) else None for p in prompts]


register_rule(RULE, triage_steps)
