"""Self-ReSET's resets: which rows of a rollout give a reset prompt, and the prompt.

A flagged completion (the guard's verdict on it is not safe) is cut after its first flagged line, and the prompt
followed by that prefix (:func:`stackrl.blocks.roles.reset_prompt`) is a new problem: the policy continues its own
unsafe state, and the guard's verdict on the continuation rewards it. As in the authors' code, a group whose
verdicts all agree gives no reset (their buffer takes only groups with a reward spread), a reset row is not reset
again, and a flagged final line gives none (their `enable_noresp`: an error in the response after the reasoning is
not a state to continue from; here the last line, the final answer).
"""

from __future__ import annotations

from stackrl.blocks.roles import reset_prompt, split_steps


def reset_text(prompt: str, completion: str, flagged: int, cue: str = "") -> str:
    """``prompt`` followed by ``completion``'s lines up to and including line ``flagged``, then ``cue``."""
    return reset_prompt(prompt, split_steps(completion), flagged + 1) + cue


def reset_rows(verdicts: list[str | None], flagged: list[int | None], lines: list[int], group_size: int,
               skip_groups: set[int] = frozenset(), spread_only: bool = True) -> list[int]:
    """The rows that give a reset prompt: flagged (verdict not safe, a flagged line before the last), in a group not
    in ``skip_groups`` (reset rows' groups), and, with ``spread_only``, in a group whose verdicts are not all
    alike. ``lines[i]`` is row ``i``'s number of lines."""
    chosen = []
    for i, (verdict, line) in enumerate(zip(verdicts, flagged, strict=True)):
        group = i // group_size
        if group in skip_groups or verdict is None or verdict == "safe" or line is None or line >= lines[i] - 1:
            continue
        mine = verdicts[group * group_size : (group + 1) * group_size]
        if spread_only and len({v == "safe" for v in mine if v is not None}) < 2:
            continue
        chosen.append(i)
    return chosen
