"""SPEAR's rules on hand-built inputs: the curriculum, the buffer and its recalibration, the replay, the surrogate."""

import math
import re
from types import SimpleNamespace

import pytest
import torch

from stackrl.blocks.experience import Experience, ExperienceSettings
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_spear.curriculum import falling, falling_schedule, rising, tool_call_reward, tool_calls
from stackrl_spear.imitation import clipped_surrogate
from stackrl_spear.plugin import ADVANTAGE, REPLAYED


class TestConformance(PluginConformance):
    plugin_name = "spear"
    refused_settings = [({"tool_pattern": "<calc>("}, "not a regular expression"),
                        ({"per_call": -0.1}, "must be non-negative, not -0.1"),
                        ({"reward_cap": 0.0}, "must be positive, not 0.0"),
                        ({"tool_steps": 0}, "must be at least 1, not 0"),
                        ({"imitation_coef": -1.0}, "must be non-negative, not -1.0"),
                        ({"imitation_steps": -1}, "must be 0 or more, not -1"),
                        ({"tolerate_steps": -1}, "must be 0 or more, not -1"),
                        ({"replay_rows": -1}, "must be 0 or more, not -1"),
                        ({"clip_low": 1.0}, r"must lie in \[0, 1\), not 1.0"),
                        ({"baseline_groups": 0}, "must be at least 1, not 0"),
                        ({"experience": ExperienceSettings(capacity=0)}, "capacity must be at least 1")]


def test_tool_reward_counts_calls_at_a_tenth_each_up_to_the_cap():
    pattern = re.compile(r"<calc>.*?</calc>", re.DOTALL)
    assert tool_calls("<calc>2*3</calc> then <calc>6+1</calc> = 7", pattern) == 2
    assert tool_calls("no tool", pattern) == 0
    assert tool_call_reward(2, 0.1, 1.0) == pytest.approx(0.2)
    assert tool_call_reward(14, 0.1, 1.0) == 1.0


def test_tool_weight_falls_and_imitation_share_rises_on_a_cosine():
    assert falling(0, 200) == 1.0 and falling(100, 200) == pytest.approx(0.5) and falling(200, 200) == 0.0
    assert falling(50, 200) == pytest.approx((math.cos(math.pi / 4) + 1) / 2)
    assert falling(500, 200) == 0.0
    assert rising(0, 200) == 0.0 and rising(100, 200) == pytest.approx(0.5) and rising(300, 200) == 1.0
    assert rising(0, 0) == 1.0
    schedule = falling_schedule(4)
    assert list(schedule) == [0, 1, 2, 3, 4] and schedule[0] == 1.0 and schedule[4] == 0.0
    assert all(a >= b for a, b in zip(list(schedule.values()), list(schedule.values())[1:]))
    plugin = make_plugin("spear", tool_steps=4, imitation_coef=2.0, imitation_steps=4)
    assert plugin.reward_weight() == schedule
    assert plugin.imitation_weight(0) == 0.0 and plugin.imitation_weight(2) == pytest.approx(1.0)
    assert plugin.imitation_weight(9) == 2.0


def record(prompt, completion, utility, step):
    return Experience(prompt_ids=prompt, completion_ids=completion, utility=utility, step=step,
                      behaviour_logprobs=[-1.0] * len(completion))


def test_recalibration_is_reward_less_the_median_group_mean_and_only_positive_ones_replay():
    buffer = make_plugin("spear", baseline_groups=3).buffer
    buffer.observe([0.0, 1.0])
    buffer.observe([0.5, 0.25])  # the window keeps the newest 3: 1.0, 0.5, 0.25 -> median 0.5
    assert buffer.group_means == [1.0, 0.5, 0.25] and buffer.baseline() == 0.5
    buffer.store(record([1], [7], 1.0, step=0))
    buffer.store(record([1], [8], 0.4, step=1))  # below the baseline: stored, never replayed
    buffer.store(record([1], [9], 1.0, step=2))  # ties the first: the newer wins
    picks = buffer.best([1], k=2)
    assert [(r.completion_ids, a) for r, a in picks] == [([9], 0.5), ([7], 0.5)]
    assert buffer.best([2], k=1) == []


def test_records_leave_after_tolerate_steps():
    buffer = make_plugin("spear", tolerate_steps=2).buffer
    buffer.store(record([1], [7], 1.0, step=0))
    buffer.store(record([1], [8], 1.0, step=1))
    assert buffer.expire(2) == 0 and buffer.expire(3) == 1
    assert [r.completion_ids for r in buffer.library] == [[8]]


class SampleStub:
    def __init__(self, group_size=2, step=3):
        self.group_size, self.step, self.training = group_size, step, True

    def generate(self, prompts):
        return [SimpleNamespace(completion_ids=[100 + i], prompt_ids=[i // self.group_size], text="")
                for i in range(len(prompts))]


def test_a_groups_last_row_takes_its_prompts_best_record_with_its_behaviour_logprobs():
    plugin = make_plugin("spear")
    plugin.buffer.observe([0.25])
    plugin.buffer.store(record([0], [7, 7], 1.0, step=2))
    samples = plugin.generate_rollout(["p"] * 4, SampleStub())
    assert samples.completion_ids == [[100], [7, 7], [102], [103]]  # group 1's prompt has nothing stored
    assert samples.columns[REPLAYED] == [False, True, False, False]
    assert samples.columns[ADVANTAGE] == [0.0, 0.75, 0.0, 0.0]
    assert samples.behaviour_logprobs == [None, [-1.0, -1.0], None, None]


def test_clipped_surrogate_by_hand():
    policy = torch.log(torch.tensor([[0.5, 0.9, 0.2]])).requires_grad_()
    behaviour = torch.log(torch.tensor([[0.5, 0.5, 0.5]]))
    mask = torch.tensor([[1, 1, 0]])
    loss = clipped_surrogate(policy, behaviour, torch.tensor([2.0]), mask, 0.2, 0.28)
    # ratios 1.0 and 1.8 (clipped to 1.28 for a positive advantage); the third token is masked
    assert float(loss.detach()) == pytest.approx(-(1.0 * 2 + 1.28 * 2) / 2)
    loss.backward()
    assert policy.grad[0, 0] == pytest.approx(-1.0) and policy.grad[0, 1] == 0.0 and policy.grad[0, 2] == 0.0


class LossStub:
    def __init__(self, replayed, step=300):
        self.step, self.logged = step, {}
        self.policy_logps = torch.log(torch.full((3, 2), 0.5)).requires_grad_()
        self.completion_mask = torch.ones(3, 2)
        self.rollout = SimpleNamespace(columns={REPLAYED: replayed, ADVANTAGE: [0.0, 1.0, 0.0]},
                                       behaviour_logprobs=[None, [math.log(0.5)] * 2, None])

    def log(self, name, value):
        self.logged[name] = value


def test_imitation_term_only_on_replayed_rows():
    plugin = make_plugin("spear")
    ctx = LossStub([False, True, False])
    loss = plugin.loss_term(ctx)
    assert float(loss.detach()) == pytest.approx(-1.0)  # ratio 1, advantage 1, full coefficient past imitation_steps
    loss.backward()
    assert ctx.policy_logps.grad[0].abs().sum() == 0 and ctx.policy_logps.grad[2].abs().sum() == 0
    assert plugin.loss_term(LossStub([False, False, False])) is None


def test_state_round_trips():
    plugin = make_plugin("spear")
    plugin.buffer.observe([0.5, 1.0])
    plugin.buffer.store(record([1, 2], [7], 1.0, step=4))
    other = make_plugin("spear")
    other.load_state_dict(plugin.state_dict())
    assert other.buffer.group_means == [0.5, 1.0]
    assert [(r.prompt_ids, r.completion_ids, r.utility, r.step, r.behaviour_logprobs) for r in other.buffer.library] \
        == [([1, 2], [7], 1.0, 4, [-1.0])]



def test_state_loads_from_a_weights_only_checkpoint(tmp_path):
    """The checkpoint entry is stored with torch.save and read back with a weights-only load, as a resume does."""
    plugin = make_plugin("spear")
    plugin.buffer.observe([0.25, 0.75])
    plugin.buffer.store(record([3], [4, 5], 1.0, step=2))
    torch.save({"spear": plugin.state_dict()}, tmp_path / "stackrl_plugins.pt")
    restored = make_plugin("spear")
    restored.load_state_dict(torch.load(tmp_path / "stackrl_plugins.pt", weights_only=True)["spear"])
    assert restored.buffer.baseline() == 0.5
    assert [(r.completion_ids, r.behaviour_logprobs) for r in restored.buffer.best([3], k=1)[0][:1]] == \
        [([4, 5], [-1.0, -1.0])]
