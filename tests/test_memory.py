"""The memory block: one value per prompt from each group's first chosen row, the newest or the first kept."""

import torch

from stackrl.blocks.memory import PromptMemory

PROMPTS = [[1], [1], [2], [2]]  # two groups of two


def test_each_groups_first_chosen_row_is_its_prompts_value():
    memory = PromptMemory()
    assert memory.remember(PROMPTS, ["a1", "a2", "b1", "b2"], [False, True, False, False], 2) == 1
    assert memory.values == {(1,): "a2"}  # prompt 2 had no chosen row: nothing remembered
    assert memory.recall([[2], [1], [3]]) == [None, "a2", None]


def test_latest_replaces_a_prompts_value_and_first_keeps_it():
    latest, first = PromptMemory(latest=True), PromptMemory(latest=False)
    for values in (["a1", "a2", "b1", "b2"], ["a3", "a4", "b3", "b4"]):
        for memory in (latest, first):
            memory.remember(PROMPTS, values, [True, False, True, True], 2)
    assert latest.values == {(1,): "a3", (2,): "b3"}
    assert first.values == {(1,): "a1", (2,): "b1"}
    assert latest.remember(PROMPTS, ["a3", "x", "b9", "x"], [True, False, True, False], 2) == 1  # only b changed


def test_the_memory_survives_a_weights_only_checkpoint(tmp_path):
    memory = PromptMemory()
    memory.remember(PROMPTS, [[7, 8], [9], [5], [6]], [True] * 4, 2)
    torch.save(memory.state_dict(), tmp_path / "memory.pt")
    resumed = PromptMemory()
    resumed.load_state_dict(torch.load(tmp_path / "memory.pt", weights_only=True))
    assert resumed.values == {(1,): [7, 8], (2,): [5]}
