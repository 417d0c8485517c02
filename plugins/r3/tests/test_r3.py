"""R^3's replay: only all-fail groups, only a stored success of the same prompt, stored after the choice."""

from types import SimpleNamespace

import pytest
import torch

from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_r3.plugin import REFLECTED, REPLAYED


class TestConformance(PluginConformance):
    plugin_name = "r3"
    refused_settings = [({"keep": "all"}, "must be one of latest, first, not 'all'"),
                        ({"rank_scale": 1.0}, r"must lie in \[0, 1\), not 1.0"),
                        ({"top_fraction": 0.0}, r"must lie in \(0, 1\], not 0.0"),
                        ({"stability_weight": -1.0}, "must be non-negative, not -1.0"),
                        ({"reflect_insert": "all"}, "must be one of any, success, not 'all'"),
                        ({"reflect_template": "{prompt}again"}, "must contain {attempt}")]


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
    assert latest.buffer.values == {(0,): [101]}
    assert first.buffer.values == {(0,): [100]}


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
    assert resumed.buffer.values == {(0,): [101], (1,): [102]}


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


class ReflectStub(SampleStub):
    """As ``SampleStub``; a retry prompt (a question after an attempt) is answered ``reply``, ids [900 + k]."""

    def __init__(self, texts, answers, reply=RIGHT, group_size=2):
        super().__init__(texts, answers, group_size)
        self.reply, self.asked = reply, []

    def generate(self, prompts):
        if prompts and "Try again." in prompts[0]:
            self.asked += prompts
            return [SimpleNamespace(text=self.reply, completion_ids=[900 + k]) for k in range(len(prompts))]
        return super().generate(prompts)


PROMPTS = ["Q0\n", "Q0\n", "Q1\n", "Q1\n", "Q2\n", "Q2\n"]


def test_a_persistent_failure_without_a_stored_success_is_shown_its_own_past_failure():
    plugin = make_plugin("r3", reflect=True)
    fails = ["The answer is 7.", "The answer is 8."]
    plugin.generate_rollout(PROMPTS, ReflectStub([fails[0], fails[1], RIGHT, WRONG, WRONG, RIGHT], ["5"] * 6))
    # Prompt 0 failed before and fails again, none stored a success: reflected on its first failure. Prompt 1
    # succeeded before: replayed. Prompt 2 succeeds now: left as sampled, though it failed before.
    ctx = ReflectStub([WRONG, WRONG, WRONG, WRONG, RIGHT, WRONG], ["5"] * 6)
    out = plugin.generate_rollout(PROMPTS, ctx)
    assert ctx.asked == ["Q0\n" + fails[0] + "\nTry again.\n"]
    assert out.columns[REFLECTED] == [None, fails[0], None, None, None, None]
    assert out.columns[REPLAYED] == [False, False, False, True, False, False]
    assert out.completion_ids[1] == [900] and out.prompt_ids[1] == [0]  # trained on the group's own question
    assert ctx.acted_on == (2, 3)


def test_a_failure_of_this_step_is_not_shown_and_reflection_is_opt_in():
    plugin, off = make_plugin("r3", reflect=True), make_plugin("r3")
    ctx = ReflectStub([WRONG, WRONG], ["5", "5"])
    assert plugin.generate_rollout(PROMPTS[:2], ctx).columns[REFLECTED] == [None, None] and ctx.asked == []
    off.generate_rollout(PROMPTS[:2], ReflectStub([WRONG, WRONG], ["5", "5"]))
    ctx = ReflectStub([WRONG, WRONG], ["5", "5"])
    assert REFLECTED not in off.generate_rollout(PROMPTS[:2], ctx).columns and ctx.asked == []


def test_with_insert_success_only_a_reflection_reaching_the_answer_takes_the_row():
    plugin = make_plugin("r3", reflect=True, reflect_insert="success")
    plugin.generate_rollout(PROMPTS[:2], ReflectStub([WRONG, WRONG], ["5", "5"]))
    ctx = ReflectStub([WRONG, WRONG], ["5", "5"], reply=WRONG)
    out = plugin.generate_rollout(PROMPTS[:2], ctx)
    assert len(ctx.asked) == 1 and out.columns[REFLECTED] == [None, None] and out.completion_ids[1] == [101]


def test_the_failures_survive_a_checkpoint(tmp_path):
    plugin = make_plugin("r3", reflect=True)
    plugin.generate_rollout(PROMPTS[:4], ReflectStub([WRONG, RIGHT, RIGHT, RIGHT], ["5"] * 4))
    torch.save(plugin.state_dict(), tmp_path / "state.pt")
    resumed = make_plugin("r3", reflect=True)
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    assert resumed.failures.values == {(0,): WRONG}


def test_a_chat_run_with_reflection_is_refused(make_config):
    from stackrl import ConfigError
    from stackrl.run import validate

    validate(make_config(["r3"], data={"chat": True}))  # the replay and the ranking reward work on chat prompts
    with pytest.raises(ConfigError, match="r3.reflect: data.chat is true"):
        validate(make_config(["r3"], data={"chat": True}, r3={"reflect": True}))
