"""SEC's rules on hand-built numbers: the per-category reward, the value step and the softmax draw."""

import math

import pytest
import torch

from stackrl_sec import category_rewards, draw_probabilities, updated_values
from stackrl_sec.config import SecConfig
from stackrl import ConfigError


def test_a_category_reward_is_the_mean_absolute_advantage_of_its_completions():
    categories = ["a", "a", "b", "b", "b", "a"]
    advantages = torch.tensor([1.5, -0.5, 0.0, -2.0, 1.0, -1.0])
    rewards = category_rewards(categories, advantages, torch.ones(6, 1))
    assert rewards == pytest.approx({"a": (1.5 + 0.5 + 1.0) / 3, "b": (0 + 2.0 + 1.0) / 3})


def test_per_token_advantages_are_averaged_over_real_tokens_after_the_absolute_value():
    # Row 0: |1| and |-3| on its two real tokens (the third is padding): 2.0, not |mean| = 1.0.
    advantages = torch.tensor([[1.0, -3.0, 100.0], [2.0, 2.0, 2.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    assert category_rewards(["a", "b"], advantages, mask) == pytest.approx({"a": 2.0, "b": 2.0})


def test_values_step_by_alpha_toward_the_reward_and_absent_ones_toward_zero():
    values = {"a": 0.4, "b": 1.0, "c": 0.2}
    new = updated_values(values, {"a": 1.0, "c": 0.0}, alpha=0.25, absent_toward_zero=True)
    assert new == pytest.approx({"a": 0.25 * 1.0 + 0.75 * 0.4, "b": 0.75 * 1.0, "c": 0.75 * 0.2})
    kept = updated_values(values, {"a": 1.0}, alpha=0.25, absent_toward_zero=False)
    assert kept == pytest.approx({"a": 0.55, "b": 1.0, "c": 0.2})


def test_draw_probabilities_are_the_softmax_of_the_values_at_the_temperature():
    values = {"a": 0.0, "b": 0.4, "c": 1.0}
    probabilities = draw_probabilities(values, temperature=0.4)
    exp = {k: math.exp(v / 0.4) for k, v in values.items()}
    assert probabilities == pytest.approx({k: e / sum(exp.values()) for k, e in exp.items()})
    assert draw_probabilities({"a": 500.0, "b": 0.0}, 0.01)["a"] == 1.0  # no overflow


@pytest.mark.parametrize(
    "settings, message",
    [({"alpha": 0.0}, "sec.alpha"), ({"temperature": 0.0}, "sec.temperature"),
     ({"absent_categories": "drop"}, "sec.absent_categories")],
)
def test_bad_settings_name_the_key(settings, message):
    with pytest.raises(ConfigError, match=message):
        SecConfig(**settings)
