"""R^3's replay: only all-fail groups, only a stored success of the same prompt, stored after the choice."""

from types import SimpleNamespace

import torch

from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_r3.plugin import REPLAYED


class TestConformance(PluginConformance):
    plugin_name = "r3"
    refused_settings = [({"keep": "all"}, "must be one of latest, first, not 'all'")]


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
