"""A reset point that needs to read an attempt: the oracle's first wrong line of the built-in task, which the task
module holds (:func:`stackrl.tasks.first_wrong_line`, shared with pivoarl's pivot). The step a judge reply marks
wrong (SRPO's self-localisation) is the task's :func:`stackrl.tasks.judged_wrong_step`.

A reset point is the index of the step a continuation starts from (see :func:`stackrl.blocks.roles.reset_prompt`); the
random chooser is :func:`stackrl.blocks.roles.uniform_reset`.
"""

from __future__ import annotations

from stackrl.tasks import first_wrong_line

__all__ = ["first_wrong_line"]
