"""Completions put in place of sampled ones in the groups whose samples all failed.

A group whose every sample fails gives GRPO no advantage to learn from. Methods that bring a success into such a
group from elsewhere (ExPO's answer-conditioned explanation, R^3's replayed success of the same prompt from an
earlier step) decide which samples reached the answer before any reward exists, find the failed groups, and put
the success in a group's last row, trained on the prompt the group was asked:

- :func:`reaches`: whether a completion's final answer is the reference one, up to math equivalence;
- :func:`failed_groups`: the groups without a sample that reaches its answer;
- :func:`into_last_rows`: the ``Samples`` of a ``generate_rollout`` with chosen groups' last rows replaced, and a
  column marking the replaced rows.
"""

from __future__ import annotations

from stackrl.answers import equivalent
from stackrl.context import Samples
from stackrl.rewards import extract_answer


def reaches(text: str, answer) -> bool:
    """Whether ``text``'s final answer (``stackrl.rewards.extract_answer``) is ``answer``, up to math equivalence."""
    own = extract_answer(text)
    return own is not None and equivalent(own, str(answer))


def failed_groups(correct: list[bool], group_size: int) -> list[int]:
    """The groups (of ``group_size`` consecutive rows) with no correct row."""
    return [g for g in range(len(correct) // group_size) if not any(correct[g * group_size : (g + 1) * group_size])]


def into_last_rows(samples: list, replacements: dict[int, list[int]], group_size: int, column: str) -> Samples:
    """``samples`` (the policy's generations, one per row) as ``Samples``, each group ``g`` of ``replacements`` with
    its last row's completion replaced by ``replacements[g]`` (token ids); ``column`` marks the replaced rows. Every
    row, a replaced one too, is trained on the prompt its group was asked."""
    completion_ids = [s.completion_ids for s in samples]
    replaced = [False] * len(samples)
    for group, ids in replacements.items():
        row = (group + 1) * group_size - 1
        completion_ids[row], replaced[row] = list(ids), True
    return Samples(completion_ids=completion_ids, prompt_ids=[s.prompt_ids for s in samples],
                   columns={column: replaced})
