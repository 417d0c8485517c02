"""R^3's replay: only all-fail groups, only a stored success of the same prompt, stored after the choice."""

from types import SimpleNamespace

import pytest
import torch

from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_r3.plugin import REPLAYED


class TestConformance(PluginConformance):
    plugin_name = "r3"
    refused_settings = [({"keep": "all"}, "must be one of latest, first, not 'all'"),
                        ({"rank_scale": 1.0}, r"must lie in \[0, 1\), not 1.0"),
                        ({"top_fraction": 0.0}, r"must lie in \(0, 1\], not 0.0"),
                        ({"stability_weight": -1.0}, "must be non-negative, not -1.0")]


class SampleStub:
    """The sample stage's context: ``generate`` returns the written completions, each group's prompt [g]."""

    def __init__(self, texts, answers, group_size=2):
        self.texts, self.group_size, self.training, self.logged = texts, group_size, True, {}
        self.rollout_columns = {"answer": answers}
        self.acted_on = None

    def generate(self, prompts):
        return [SimpleNamespace(text=t, completion_ids=[100 + i], prompt_ids=[i // self.group_size])
                for i, t in enumerate(self.texts)]

    def log(self, name, value):
        self.logged[name] = value

    def acted(self, n, *, of, hint=None):
        self.acted_on = (n, of)


RIGHT, WRONG = "The answer is 5.", "The answer is 6."


def test_only_an_all_fail_group_gets_its_prompts_earlier_success_in_its_last_row():
    plugin = make_plugin("r3")
    answers = ["5"] * 6
    first = plugin.generate_rollout(["p"] * 6, SampleStub([RIGHT, WRONG, WRONG, RIGHT, WRONG, WRONG], answers))
    assert first.columns[REPLAYED] == [False] * 6  # nothing stored yet: group 2 fails, unreplayed
    # Prompt 0 and 1 succeeded at the first step; now groups 0 and 2 fail, group 1 has its own success.
    ctx = SampleStub([WRONG, WRONG, RIGHT, WRONG, WRONG, WRONG], answers)
    second = plugin.generate_rollout(["p"] * 6, ctx)
    assert second.columns[REPLAYED] == [False, True, False, False, False, False]
    assert second.completion_ids[1] == [100]  # prompt 0's success of the first step, not another prompt's
    assert second.completion_ids[3] == [103] and second.completion_ids[5] == [105]  # prompt 2 had none stored
    assert ctx.acted_on == (1, 3)


def test_latest_keeps_the_newest_success_and_first_the_first():
    latest, first = make_plugin("r3"), make_plugin("r3", keep="first")
    for plugin in (latest, first):
        plugin.generate_rollout(["p"] * 2, SampleStub([RIGHT, WRONG], ["5", "5"]))
        plugin.generate_rollout(["p"] * 2, SampleStub([WRONG, RIGHT], ["5", "5"]))
    assert latest.buffer.successes == {(0,): [101]}
    assert first.buffer.successes == {(0,): [100]}


def test_a_group_without_an_answer_is_left_as_sampled():
    plugin = make_plugin("r3")
    plugin.generate_rollout(["p"] * 2, SampleStub([RIGHT, WRONG], ["5", "5"]))
    out = plugin.generate_rollout(["p"] * 2, SampleStub([WRONG, WRONG], [None, None]))
    assert out.columns[REPLAYED] == [False, False]


def test_the_buffer_survives_a_checkpoint(tmp_path):
    plugin = make_plugin("r3")
    plugin.generate_rollout(["p"] * 4, SampleStub([WRONG, RIGHT, RIGHT, WRONG], ["5"] * 4))
    torch.save(plugin.state_dict(), tmp_path / "state.pt")
    resumed = make_plugin("r3")
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    assert resumed.buffer.successes == {(0,): [101], (1,): [102]}


def test_the_structural_score_is_the_top_entropies_mean_less_the_weighted_overall_mean():
    from stackrl_r3.ranking import structural_scores

    entropy = torch.tensor([[0.1, 2.0, 0.3, 0.2, 9.0], [1.0, 1.0, 1.0, 1.0, 1.0]])
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])  # the 9.0 is padding
    scores = structural_scores(entropy, mask, top_fraction=0.5, stability_weight=0.5)
    # Row 0: the top two of four (2.0, 0.3) average 1.15, the mean is 0.65; row 1: 1.0 - 0.5 * 1.0.
    assert scores.tolist() == pytest.approx([1.15 - 0.5 * 0.65, 0.5])


def test_failures_are_ranked_below_every_success_and_apart_from_each_other():
    from stackrl_r3.ranking import ranking_rewards

    scores = torch.tensor([0.3, 0.9, 0.1, 5.0, 0.2, 0.4])
    got = ranking_rewards(scores, [False, False, False, True, False, False], 3, scale=0.3)
    # Group 0 all failed: ranks 1, 2, 0 of 3; group 1: the success earns the scale, its failures ranks 0 and 1 of 2.
    assert got == pytest.approx([0.1, 0.2, 0.0, 0.3, 0.0, 0.15])


def test_the_ranking_reward_on_the_built_in_model_scores_every_row(built_in_trainer):
    from stackrl.testing.heldout import right_and_wrong_rollout
    from stackrl import RewardContext

    trainer = built_in_trainer(["r3"])
    rollout = right_and_wrong_rollout(trainer.processing_class)
    ctx = RewardContext(step=0, tokenizer=trainer.processing_class, policy=trainer._shared_policy,
                        _log=lambda *_: None, _plugin="r3", rollout=rollout)
    got = trainer.plugins.plugins["r3"].reward(ctx)
    assert got == pytest.approx([0.1, 0.0, 0.1, 0.0])  # each group: the right solution, then its lone slip
