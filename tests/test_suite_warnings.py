"""The suite's own warnings: one raised from the project's modules fails the test, a library's does not."""

import warnings

import pytest
import torch

from stackrl.testing.heldout import grpo_advantages


@pytest.mark.parametrize("module", ["stackrl.run", "stackrl_covo.plugin"])
def test_a_warning_from_the_projects_own_modules_fails(module):
    with pytest.raises(UserWarning):
        warnings.warn_explicit("deliberate", UserWarning, "module.py", 1, module=module)


def test_a_libraries_warning_is_only_a_warning():
    with pytest.warns(UserWarning):
        warnings.warn_explicit("deliberate", UserWarning, "trainer.py", 1, module="transformers.trainer")


def test_grpo_advantages_of_a_group_of_one_are_zero_and_of_two_are_scaled():
    assert grpo_advantages(torch.tensor([1.0, 0.0]), 1).tolist() == [0.0, 0.0]
    spread = 0.5**0.5  # the sample standard deviation of (1, 0)
    assert grpo_advantages(torch.tensor([1.0, 0.0]), 2).tolist() == pytest.approx([0.5 / (spread + 1e-4),
                                                                                   -0.5 / (spread + 1e-4)])
