"""Tests of the `seedrl` plugin: its rules on hand-built inputs, the library's checkpoint, and the conformance suite."""

import io
from types import SimpleNamespace

import pytest
import torch

from stackrl import Rollout
from stackrl.errors import ConfigError
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_seedrl import skill_advantages
from stackrl_seedrl.skills import keep_verified, retrieved_skills, written_skills


class TestConformance(PluginConformance):
    plugin_name = "seedrl"
    # The policy writes each row's skill (the default); a short request and skill keep the run fast.
    plugin_settings = {"seedrl": {"skill_tokens": 2, "analysis_template": "{response}\n"}}
    refused_settings = [
        ({"weight": -0.1}, "non-negative"),
        ({"clip": 0.0}, "positive"),
        ({"skill_tokens": 0}, "at least 1"),
        ({"skills": "oracle"}, "one of policy, library"),
        ({"retrieve": "any"}, "one of same, similar"),
        ({"teacher": "ema"}, "ema"),
        ({"teacher_template": "{prompt}"}, r"must contain \{skill\}"),
    ]


def rollout(prompts, completions, passed, group_size=2):
    """Rows of text prompts (token ids: each character's code) with the outcome component ``exact_match``."""
    encode = lambda text: [ord(c) for c in text]  # noqa: E731
    return Rollout(
        prompts=list(prompts), completions=list(completions), prompt_ids=[encode(p) for p in prompts],
        completion_ids=[encode(c) for c in completions], group_size=group_size,
        columns={"answer": ["1"] * len(prompts)}, rewards={"exact_match": torch.tensor(passed, dtype=torch.float32)},
    )


def test_the_skill_shift_is_added_to_each_token_with_its_weight_and_clip():
    advantages = torch.tensor([1.0, -0.5])
    shift = torch.tensor([[0.4, -3.0, 9.0], [2.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    # By hand: A + w * clip(shift) on real tokens, 0 on padding.
    expected = torch.tensor([[1.0 + 0.25 * 0.4, 1.0 + 0.25 * -2.0, 0.0], [-0.5 + 0.25 * 2.0, 0.0, 0.0]])
    assert torch.allclose(skill_advantages(advantages, shift, mask, 0.25, clip=2.0), expected)
    unclipped = torch.tensor([[1.0 + 0.25 * 0.4, 1.0 + 0.25 * -3.0, 0.0], [-0.5 + 0.25 * 2.0, 0.0, 0.0]])
    assert torch.allclose(skill_advantages(advantages, shift, mask, 0.25), unclipped)
    # Per-token advantages are kept token by token.
    assert torch.allclose(skill_advantages(advantages.unsqueeze(1) * mask, shift, mask, 0.0), advantages.unsqueeze(1) * mask)


def test_the_library_keeps_each_groups_first_verified_completion_and_gives_it_back_as_the_skill():
    plugin = make_plugin("seedrl", skills="library")
    first = rollout(["What is 1?", "What is 1?", "What is 2?", "What is 2?"], ["a", "b", "c", "d"], [0, 1, 0, 0])
    assert keep_verified(plugin.library, first, first.rewards["exact_match"].bool().tolist(), 3) == 1
    later = rollout(["What is 1?", "What is 1?", "What is 2?", "What is 2?"], ["e", "f", "g", "h"], [1, 1, 1, 0])
    assert retrieved_skills(plugin.library, later, "same") == ["b", "b", None, None]
    keep_verified(plugin.library, later, [True, True, True, False], 4)
    # The newest record of the prompt is its skill; a prompt never verified has none with `same`...
    assert retrieved_skills(plugin.library, later, "same") == ["e", "e", "g", "g"]
    other = rollout(["What is 12?", "What is 12?"], ["x", "y"], [0, 0])
    assert retrieved_skills(plugin.library, other, "same") == [None, None]
    # ...and with `similar`, the skill of the closest stored prompt (ROUGE-L over the prompts).
    near = rollout(["Who is 2?", "Who is 2?"], ["x", "y"], [0, 0])
    assert retrieved_skills(plugin.library, near, "similar") == ["g", "g"]


def test_a_resumed_run_retrieves_the_same_skills():
    plugin = make_plugin("seedrl", skills="library", retrieve="similar")
    batch = rollout(["What is 1?", "What is 1?", "What is 2?", "What is 2?"], ["a", "b", "c", "d"], [1, 0, 0, 1])
    keep_verified(plugin.library, batch, [True, False, False, True], 1)
    buffer = io.BytesIO()
    torch.save(plugin.state_dict(), buffer)
    buffer.seek(0)
    resumed = make_plugin("seedrl", skills="library", retrieve="similar")
    resumed.load_state_dict(torch.load(buffer, weights_only=True))
    probe = rollout(["What is 2?", "What is 1?", "Is 2 it?", "Is 2 it?"], ["x"] * 4, [0] * 4)
    assert retrieved_skills(resumed.library, probe, "similar") == retrieved_skills(plugin.library, probe, "similar")
    assert retrieved_skills(resumed.library, probe, "similar")[:2] == ["d", "a"]
    assert [r.key for r in resumed.library] == [r.key for r in plugin.library]


def test_the_policy_writes_each_rows_skill_from_its_own_trajectory_and_outcome():
    plugin = make_plugin("seedrl", analysis_template="{prompt}|{response}|{outcome}", skill_tokens=7)
    batch = rollout(["What is 1?", "What is 1?"], ["one", "two"], [1, 0])
    asked = []

    def generate(prompts, **sampling):
        asked.append((list(prompts), sampling))
        return [SimpleNamespace(text=f" skill {k} ") for k in range(len(prompts))]

    ctx = SimpleNamespace(generate=generate, step=5, warn=lambda *a, **k: None)
    skills = written_skills(ctx, plugin.library, batch, [0, 1], [True, False], plugin.config.analysis_template, 7)
    assert asked == [(["What is 1?|one|success", "What is 1?|two|failure"], {"max_new_tokens": 7})]
    assert skills == ["skill 0", "skill 1"]
    assert [(r.artefact, r.tags, r.completion, r.step) for r in plugin.library] == [
        ("skill 0", ["success"], "one", 5), ("skill 1", ["failure"], "two", 5)]


def test_failed_only_rescores_only_the_rows_the_outcome_does_not_pass():
    plugin = make_plugin("seedrl", skills="library", failed_only=True)
    batch = rollout(["What is 1?", "What is 1?"], ["a", "b"], [1, 0])
    keep_verified(plugin.library, batch, [True, False], 0)
    ctx = SimpleNamespace(rollout=batch, step=1)
    assert plugin.skills(ctx, [True, False]) == [None, "a"]


def test_a_data_column_named_skill_is_refused():
    with pytest.raises(ConfigError, match="seedrl.teacher_template: the data has a column 'skill'"):
        make_plugin("seedrl").check_run(SimpleNamespace(columns=["prompt", "answer", "skill"]))
