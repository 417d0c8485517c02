"""A calculator tool on the built-in arithmetic task, in TRL's environment convention: ``reset(**row)`` and one
public method, the tool ``calc``. The run's outcome reward scores the final answer, as on the task without it."""

from __future__ import annotations

import ast
import operator
from fractions import Fraction

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _value(node) -> Fraction:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_value(node.left), _value(node.right))
    raise ValueError("only integers, + - * / and brackets")


class Calculator:
    """The built-in task's calculator: ``<calc>23*7</calc>`` shows ``161``."""

    def reset(self, **row) -> None:
        self.calls = 0
        return None

    def calc(self, expression: str) -> str:
        """Evaluate an integer expression with + - * / and brackets; a mistake is shown as an error.

        Args:
            expression: the expression, such as 23*7
        """
        self.calls += 1
        try:
            value = _value(ast.parse(expression.strip(), mode="eval").body)
        except (SyntaxError, ValueError, ZeroDivisionError, RecursionError) as e:
            return f"error: {e}"
        return str(value.numerator) if value.denominator == 1 else f"{float(value):.6g}"
