"""The built-in task as a world: states, actions and transitions between them (a world model's forward and inverse
prompts, as SWIRL's forward world model and inverse dynamics model read them).

A state is the arithmetic expression still to be worked out, written as the question writes it
(:func:`stackrl.tasks.arithmetic.make_problem`); an action is one solution line, which replaces the expression's
first operation by its result. The last state is the answer alone::

    states:   "(3 + 4) * 2"  ->  "7 * 2"  ->  "14"
    actions:        "3 + 4 = 7"     "7 * 2 = 14"

    forward prompt:  "State: (3 + 4) * 2\\nAction: 3 + 4 = 7\\nNext state:\\n"   reply: "7 * 2"
    inverse prompt:  "State: (3 + 4) * 2\\nNext state: 7 * 2\\nAction:\\n"      reply: "3 + 4 = 7"

:func:`next_state` and :func:`action_between` are the world's rules (what a perfect forward and inverse model
write); ``stackrl/arith-roles`` was taught both directions on every transition of training problems.
"""

from __future__ import annotations

import re

__all__ = [
    "FORWARD_MARKER",
    "FORWARD_TEMPLATE",
    "INVERSE_MARKER",
    "INVERSE_TEMPLATE",
    "action_between",
    "actions",
    "forward_prompt",
    "inverse_prompt",
    "next_state",
    "read_state",
    "states",
    "transitions",
]

FORWARD_MARKER = "Next state:"
INVERSE_MARKER = "Action:"
FORWARD_TEMPLATE = "State: {state}\nAction: {action}\n" + FORWARD_MARKER + "\n"
INVERSE_TEMPLATE = "State: {state}\nNext state: {next}\n" + INVERSE_MARKER + "\n"

_TOKEN = re.compile(r"\d+|[-+*]")
_ACTION = re.compile(r"^(\d+) ([-+*]) (\d+) = (-?\d+)$")


def _apply(value: int, op: str, operand: int) -> int:
    return value + operand if op == "+" else value - operand if op == "-" else value * operand


def _write(value: int, operations: list[tuple[str, int]]) -> str:
    """The expression that applies ``operations`` to ``value`` left to right, parenthesised as the question is."""
    expr = str(value)
    for step, (op, operand) in enumerate(operations):
        expr = f"({expr}) {op} {operand}" if step else f"{expr} {op} {operand}"
    return expr


def read_state(state: str) -> tuple[int, list[tuple[str, int]]] | None:
    """``(value, [(op, operand), ...])`` of a state written as :func:`states` writes it, or ``None``."""
    tokens = _TOKEN.findall(state)
    if not tokens or not tokens[0].isdigit() or len(tokens) % 2 == 0:
        return None
    value, rest = int(tokens[0]), tokens[1:]
    if any(op not in "+-*" for op in rest[::2]) or not all(x.isdigit() for x in rest[1::2]):
        return None
    operations = [(op, int(x)) for op, x in zip(rest[::2], rest[1::2])]
    return (value, operations) if _write(value, operations) == state.strip() else None


def states(question: str) -> list[str]:
    """The states a question's problem goes through: its expression, then each operation replaced by its result in
    turn, ending with the answer alone. ``question`` is the task's "What is ...?" text."""
    expression = question.strip().removeprefix("What is ").removesuffix("?")
    read = read_state(expression)
    if read is None:
        raise ValueError(f"not a question of the arithmetic task: {question!r}")
    value, operations = read
    result = [_write(value, operations)]
    for step, (op, operand) in enumerate(operations):
        value = _apply(value, op, operand)
        result.append(_write(value, operations[step + 1 :]))
    return result


def actions(solution: str) -> list[str]:
    """The actions of a solution: its step lines (all but the final "The answer is N." line)."""
    return solution.split("\n")[:-1]


def transitions(question: str, solution: str) -> list[tuple[str, str, str]]:
    """(state, action, next state) for each step of ``solution`` to ``question``."""
    path = states(question)
    return list(zip(path, actions(solution), path[1:]))


def next_state(state: str, action: str) -> str | None:
    """The state ``action`` leads to from ``state``: its first operation replaced by the result; ``None`` where the
    action is not that operation or its result is wrong (or either text is not in the task's form)."""
    read, found = read_state(state), _ACTION.match(action.strip())
    if read is None or found is None or not read[1]:
        return None
    value, operations = read
    op, operand = operations[0]
    if (int(found[1]), found[2], int(found[3])) != (value, op, operand) or int(found[4]) != _apply(value, op, operand):
        return None
    return _write(int(found[4]), operations[1:])


def action_between(state: str, following: str) -> str | None:
    """The action that leads from ``state`` to ``following`` (the line "a op b = c"), or ``None`` where no action
    does."""
    read = read_state(state)
    if read is None or not read[1]:
        return None
    value, operations = read
    op, operand = operations[0]
    action = f"{value} {op} {operand} = {_apply(value, op, operand)}"
    return action if next_state(state, action) == following.strip() else None


def forward_prompt(state: str, action: str) -> str:
    """The prompt asking for the state ``action`` leads to from ``state`` (:data:`FORWARD_TEMPLATE`)."""
    return FORWARD_TEMPLATE.format(state=state, action=action)


def inverse_prompt(state: str, following: str) -> str:
    """The prompt asking for the action that leads from ``state`` to ``following`` (:data:`INVERSE_TEMPLATE`)."""
    return INVERSE_TEMPLATE.format(state=state, next=following)
