"""ReMix's mix: the fresh share, the newest stored rows of the same prompt within the age limit, their behaviour
log-probs handed over, fresh rows stored with the log-probs scored before the update, reincarnation, resume."""

from types import SimpleNamespace

import pytest
import torch

from stackrl.blocks.experience import Experience
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_remix.mixing import fresh_count, pick_stale, usable
from stackrl_remix.plugin import AGE


class TestConformance(PluginConformance):
    plugin_name = "remix"
    refused_settings = [({"fresh_share": 0.0}, r"must lie in \(0, 1\], not 0.0"),
                        ({"fresh_share": 1.5}, r"must lie in \(0, 1\], not 1.5"),
                        ({"max_age": 0}, "must be at least 1, not 0"),
                        ({"on_policy_from": -1}, "must be non-negative, not -1")]


def test_the_fresh_count_rounds_up_and_keeps_one_row():
    assert fresh_count(4, 0.5) == 2
    assert fresh_count(6, 0.5) == 3
    assert fresh_count(4, 0.3) == 2  # 1.2 rows rounds up
    assert fresh_count(8, 0.01) == 1  # never a group without a fresh row
    assert fresh_count(4, 1.0) == 4


def test_the_newest_usable_rows_are_picked_and_none_past_the_age_limit():
    records = [Experience(prompt_ids=[1], completion_ids=[s], step=s) for s in (0, 1, 2, 3, 3)]  # oldest first
    # At batch 4 with max_age 2 rows of batches 2 and 3 may be replayed: the two of batch 3 first, then batch 2's.
    assert [r.completion_ids[0] for r in pick_stale(records, 4, 2, 3)] == [3, 3, 2]
    assert [r.completion_ids[0] for r in pick_stale(records, 4, 2, 8)] == [3, 3, 2]  # batches 0 and 1 too old
    assert pick_stale(records, 4, 2, 0) == []
    assert not usable(records[1], 4, 2) and usable(records[2], 4, 2)
    assert not usable(records[3], 3, 2), "a row of this very batch is not stale"


class Stub:
    """The sample and advantage stages' context: a prompt "p<g>" has token ids [g]; the policy's k-th sample
    is [100 + k]; scores give each token log-prob -0.5 - step / 10."""

    def __init__(self, group_size=4, step=0):
        self.group_size, self.step, self.training = group_size, step, True
        self.sampling_temperature, self.logged, self.acted_on, self.calls = 1.0, {}, None, []
        self.counter = 0

    def generate(self, prompts):
        self.calls.append(list(prompts))
        out = []
        for p in prompts:
            out.append(SimpleNamespace(prompt_ids=[int(p[1:])], completion_ids=[100 + self.counter, 7], text=""))
            self.counter += 1
        return out

    def score(self, contexts, continuations, temperature):
        assert temperature == self.sampling_temperature
        width = max(len(c) for c in continuations)
        return SimpleNamespace(logprobs=torch.full((len(continuations), width), -0.5 - self.step / 10))

    def log(self, name, value):
        self.logged[name] = value

    def acted(self, n, *, of, hint=None):
        self.acted_on = (n, of)


def step(plugin, ctx, groups=2):
    """One generation batch and its advantage stage, as the host calls them."""
    prompts = [f"p{g}" for g in range(groups) for _ in range(ctx.group_size)]
    samples = plugin.generate_rollout(prompts, ctx)
    rollout = SimpleNamespace(prompt_ids=[[int(p[1:])] for p in prompts], completion_ids=samples.completion_ids,
                              completions=[""] * len(prompts), prompts=prompts, rewards={},
                              columns=dict(samples.columns), importance_weights=None)
    ctx.rollout = rollout
    plugin.reshape_advantages(torch.zeros(len(prompts)), ctx)
    return samples


def test_half_fresh_half_replayed_with_their_behaviour_log_probs():
    plugin = make_plugin("remix", fresh_share=0.5, max_age=2)
    first = step(plugin, Stub(step=0))
    # Nothing stored yet: every row sampled now, in one call, none marked.
    assert first.columns[AGE] == [0] * 8 and first.behaviour_logprobs == [None] * 8
    assert len(plugin.library) == 8
    ctx = Stub(step=1)
    second = step(plugin, ctx)
    assert [len(c) for c in ctx.calls] == [4], "only the fresh half is generated once rows are stored"
    assert second.columns[AGE] == [0, 0, 1, 1] * 2
    assert ctx.acted_on == (4, 8)
    # Batch 0 sampled 100-103 for prompt 0 and 104-107 for prompt 1: the replayed rows are each prompt's two
    # newest of batch 0, newest first, with batch 0's log-probs.
    assert second.completion_ids[2:4] == [[103, 7], [102, 7]] and second.completion_ids[6:8] == [[107, 7], [106, 7]]
    assert second.behaviour_logprobs[2] == pytest.approx([-0.5, -0.5]) and second.behaviour_logprobs[0] is None
    third = step(plugin, Stub(step=2))
    # Batch 1's fresh rows are the newest: replayed before batch 0's, each with its own batch's log-probs.
    assert third.columns[AGE] == [0, 0, 1, 1] * 2
    assert third.behaviour_logprobs[2] == pytest.approx([-0.6, -0.6])


def test_rows_past_the_age_limit_are_never_replayed():
    plugin = make_plugin("remix", fresh_share=0.5, max_age=1)
    step(plugin, Stub(step=0), groups=2)
    step(plugin, Stub(step=1), groups=1)  # prompt 1 is not drawn at batch 1
    ctx = Stub(step=2)
    third = step(plugin, ctx, groups=2)
    # Prompt 0 has batch 1's rows (age 1); prompt 1 only batch 0's (age 2, past max_age 1): sampled fresh instead.
    assert third.columns[AGE] == [0, 0, 1, 1, 0, 0, 0, 0]
    assert [len(c) for c in ctx.calls] == [6]
    assert all(record.step >= 1 for record in plugin.library), "the too-old rows were evicted"
    assert plugin.known == {"p0": [0], "p1": [1]}


def test_reincarnation_samples_on_policy_and_empties_the_library():
    plugin = make_plugin("remix", on_policy_from=2)
    step(plugin, Stub(step=0))
    assert step(plugin, Stub(step=1)).columns[AGE] == [0, 0, 1, 1] * 2
    ctx = Stub(step=2)
    assert plugin.generate_rollout(["p0"] * 4, ctx) is None  # the host samples plain GRPO's rollout
    assert len(plugin.library) == 0 and ctx.acted_on == (0, 4)


def test_a_resumed_plugin_replays_the_same_rows(tmp_path):
    plugin = make_plugin("remix")
    step(plugin, Stub(step=0))
    torch.save(plugin.state_dict(), tmp_path / "state.pt")
    resumed = make_plugin("remix")
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    want, got = step(plugin, Stub(step=1)), step(resumed, Stub(step=1))
    assert got.completion_ids == want.completion_ids and got.behaviour_logprobs == want.behaviour_logprobs
    assert got.columns == want.columns
