"""Both built-in tools in one environment, for a multi-tool episode on the task ``lookup`` (``data.source: lookup``):
``<search>kavo</search>`` shows ``kavo is 37.`` and ``<calc>37 + 4</calc>`` shows ``41``. TRL's convention, as the
built-in ``calculator`` and ``search``; unlike the built-in calculator, whose mistakes are shown as results, a mistaken
expression here raises, so the runner shows it as an error and records ``tool_error`` in the turn's ``env_info``: a
failed call, which Tool-Star's multi-tool bonus does not count.
"""

from __future__ import annotations

import ast

from stackrl.blocks.env.calculator import _value
from stackrl.blocks.env.search import Search


class Toolbox(Search):
    """``search`` over a local corpus (``kwargs`` as the built-in ``search``'s) and ``calc``, which raises on a
    mistaken expression."""

    def calc(self, expression: str) -> str:
        """Evaluate an integer expression with + - * / and brackets.

        Args:
            expression: the expression, such as 23*7
        """
        value = _value(ast.parse(expression.strip(), mode="eval").body)  # SyntaxError, ValueError, ZeroDivisionError
        return str(value.numerator) if value.denominator == 1 else f"{float(value):.6g}"
