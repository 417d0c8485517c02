"""SPC's game: a sneaky generator makes one step of a right solution wrong, a critic judges it; the winner of each
confrontation gets +1, the loser -1. A corruption that is not a valid erroneous step is not played.

On the built-in task a corruption is valid when it is a solution of the question's chain with exactly one line
wrong in itself (``stackrl.tasks.roles.wrong_lines``), as the task's own corrupter makes them; the authors instead
complete the original and the corrupted step several times with a solver and call the corruption valid when it
lowers the solver's success rate. A critic verdict that cannot be read has not identified the error.
"""

from __future__ import annotations

from stackrl.tasks import wrong_lines

WIN, LOSS = 1.0, -1.0


def valid_corruption(question: str, text: str) -> bool:
    """Whether ``text`` is a valid corruption at ``question``: the question's chain with exactly one wrong line."""
    return wrong_lines(question, text) == 1


def sneaky_reward(valid: bool, verdict: bool | None, invalid: float | None = LOSS) -> float | None:
    """A sneaky row's reward: ``invalid`` for a corruption that is not valid (``None``: not played, unscored);
    else +1 when the critic did not call it wrong (``verdict`` True or unreadable: deceived), -1 when it did."""
    if not valid:
        return invalid
    return LOSS if verdict is False else WIN


def critic_reward(wrong: bool, verdict: bool | None) -> float:
    """A critic row's reward: +1 when its verdict is the truth of what it judged (``wrong``: a valid corruption,
    to be called wrong; else the right solution, to be called correct), -1 otherwise, an unreadable verdict too."""
    return WIN if verdict is (not wrong) else LOSS
