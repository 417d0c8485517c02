"""Tests of the `triage` plugin: the rule labeller, the reading of a labeller's reply, the role credit, the hook on
a written rollout (the rule called in the process and the same rule as an auxiliary model), and conformance."""

import pytest
import torch

from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl.testing.heldout import advantage_context, written_rollout
from stackrl_triage.credit import role_constants, segment_credit
from stackrl_triage.labels import label_request, read_labels, rule_labels, steps_of_request, triage_steps


class TestConformance(PluginConformance):
    plugin_name = "triage"
    refused_settings = [
        ({"regression": -1.5}, "must lie in"),
        ({"progress": 2.0}, "must lie in"),
        ({"regression": 0.2, "progress": 0.1}, "must not exceed"),
        ({"template": "{prompt} only"}, "must contain \\{steps\\}"),
        ({"max_new_tokens": 0}, "at least 1"),
        ({"labeller": "policy"}, "auxiliary model"),
    ]


def test_the_rule_labels_right_new_steps_wrong_steps_and_repeats():
    steps = ["3 + 4 = 7", "7 * 2 = 15", "7 * 2 = 15", "7 * 2 = 14", "7  * 2 = 14", "The answer is 14.", "7 *"]
    assert rule_labels(steps) == ["progress", "regression", "regression", "progress", "infrastructure", "progress",
                                  "infrastructure"]
    # A final answer is checked against the last step's result, right or wrong; with no step it is wrong.
    assert rule_labels(["4 * 2 = 9", "The answer is 9."]) == ["regression", "progress"]
    assert rule_labels(["4 * 2 = 8", "The answer is 9."]) == ["progress", "regression"]
    assert rule_labels(["The answer is 8."]) == ["regression"]


def test_the_rule_answers_the_request_as_a_model_labeller_would():
    request = label_request("What is (3 + 4) * 2?\n", ["3 + 4 = 7", "7 * 2 = 15", "The answer is 15."])
    assert steps_of_request(request) == ["3 + 4 = 7", "7 * 2 = 15", "The answer is 15."]
    assert triage_steps([request, ["not text"]]) == ["1. progress\n2. regression\n3. progress", None]


def test_a_reply_is_read_line_by_line_and_what_it_leaves_out_gets_no_role():
    assert read_labels("1. Progress\n3: regression.\n2) maybe\n1. regression", 3) == ["progress", None, "regression"]
    assert read_labels("4. progress\nno number", 2) == [None, None]
    assert read_labels(None, 2) == [None, None]


def test_each_segment_gets_the_outcome_advantage_plus_its_role_constant():
    constants = {"progress": 0.1, "exploration": 0.2, "infrastructure": -0.1, "regression": -0.3}
    corrections = role_constants([["progress", "regression"], ["exploration", None, "infrastructure"]], constants)
    assert corrections == [[0.1, -0.3], [0.2, 0.0, -0.1]]
    spans = [[(0, 2), (2, 3)], [(0, 1), (1, 2), (2, 4)]]
    per_row = segment_credit(torch.tensor([1.0, -1.0]), spans, corrections, width=5)
    expected = torch.tensor([[1.1, 1.1, 0.7, 1.0, 1.0], [-0.8, -1.0, -1.1, -1.1, -1.0]])
    torch.testing.assert_close(per_row, expected)
    per_token = segment_credit(torch.full((2, 5), 0.5), spans, corrections, width=5)
    torch.testing.assert_close(per_token, expected - torch.tensor([[1.0], [-1.0]]) + 0.5)


COMPLETIONS = [
    "4 * 2 = 8\n8 + 3 = 11\nThe answer is 11.",  # right: progress on every line
    "4 * 2 = 9\n9 + 3 = 12\nThe answer is 12.",  # a wrong first step, then right lines from it
    "3 + 5 = 8\n3 + 5 = 8\n8 - 2 = 6\nThe answer is 6.",  # a repeated step in a right solution
    "3 + 5 = 8\n8 - 2 = 6\nThe answer is 6.",
]


@pytest.fixture(scope="module")
def aux_trainer(tmp_path_factory):
    from stackrl.run import build_trainer
    from stackrl.testing.tiny import tiny_config

    tmp = tmp_path_factory.mktemp("triage")
    config = tiny_config("stackrl/arith-tiny", ["triage"], tmp_dir=tmp, output_dir=str(tmp / "run"),
                         aux_models={"labeller": {"backend": "rule", "rule": "triage_steps"}})
    return build_trainer(config)


def credited(trainer, **settings):
    problems = ["(4 * 2) + 3", "(4 * 2) + 3", "(3 + 5) - 2", "(3 + 5) - 2"]
    rollout = written_rollout(trainer.processing_class, problems, COMPLETIONS,
                              advantages=torch.tensor([0.7, -0.7, 0.5, 0.5]))
    ctx = advantage_context(trainer, rollout, plugin="triage")
    return make_plugin("triage", **settings).reshape_advantages(advantages=rollout.advantages, ctx=ctx), rollout


@pytest.mark.parametrize("labeller", ["", "labeller"])
def test_the_hook_moves_each_line_by_its_role_in_place_or_through_the_aux_model(aux_trainer, labeller):
    from stackrl.blocks.turns import NewlineTokens, line_spans

    out, rollout = credited(aux_trainer, labeller=labeller)
    newline = NewlineTokens(aux_trainer.processing_class)
    means = [[round(float(out[i, a:b].mean()), 4) for a, b in line_spans(ids, newline)]
             for i, ids in enumerate(rollout.completion_ids)]
    assert means[0] == [0.8, 0.8, 0.8]
    assert means[1] == [-1.0, -0.6, -0.6]  # the wrong step below the right ones of its row
    assert means[2] == [0.6, 0.4, 0.6, 0.6]  # the repeat below the steps that are new


def test_a_labeller_that_gives_no_role_leaves_the_outcome_advantage(aux_trainer, monkeypatch):
    from stackrl.aux_rules import RULES

    monkeypatch.setitem(RULES, "triage_steps", lambda prompts: ["I cannot tell"] * len(prompts))
    out, rollout = credited(aux_trainer)
    mask = rollout.completion_mask().bool()
    torch.testing.assert_close(out[mask], rollout.advantages[:, None].expand_as(out)[mask])
