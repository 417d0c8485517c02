"""CSA's rules on hand-built inputs: the decision table, the pass rate and solvability, the reward hook over a
rollout written by hand (with scripted probes), the written delegation, and the conformance suite."""

import pytest
import torch

from stackrl import Rollout
from stackrl.policy import Generation
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import Scripted, make_plugin
from stackrl_csa.decisions import DecisionTable, decision_accuracy, delegates, group_rewards, is_solvable, pass_rate
from stackrl_csa.plugin import WRITTEN

TABLE = DecisionTable(attempt_right=1.0, attempt_wrong=-0.5, delegate_solvable=-1.0, delegate_unsolvable=0.25)


class TestConformance(PluginConformance):
    plugin_name = "csa"
    refused_settings = [
        ({"delegation": ""}, "must be some text"),
        ({"delegation": "DELEGATE", "written_delegation": "I pass."}, "must hold the delegation phrase"),
        ({"solvability": "oracle"}, "must be one of group, reference"),
        ({"threshold": 0.0}, "must lie in"),
        ({"threshold": 1.5}, "must lie in"),
        ({"probes": -1}, "must be at least 0"),
        ({"solvability": "reference", "probes": 0}, "needs at least 1 probe"),
        ({"attempt_right": 0.0, "attempt_wrong": 0.0}, "must exceed attempt_wrong"),
        ({"delegate_unsolvable": 0.0, "delegate_solvable": 1.0}, "must exceed delegate_solvable"),
        ({"metric": "bleu"}, "must be a built-in outcome reward"),
    ]


# -- the table and its inputs ------------------------------------------------------------------------------------------


def test_each_cell_of_the_table():
    assert TABLE.reward(False, True, None) == 1.0
    assert TABLE.reward(False, False, True) == -0.5  # an attempt ignores solvability
    assert TABLE.reward(True, None, True) == -1.0
    assert TABLE.reward(True, True, False) == 0.25  # a delegation ignores correctness
    assert TABLE.reward(True, None, None) is None and TABLE.reward(False, None, True) is None


def test_delegation_pass_rate_and_solvability():
    assert delegates("The answer is ?.", "The answer is ?") and not delegates("The answer is 7.", "The answer is ?")
    assert pass_rate([True, False, False, True]) == 0.5 and pass_rate([]) is None
    assert is_solvable(0.5, 0.5) is True and is_solvable(0.49, 0.5) is False and is_solvable(None, 0.5) is None


def test_group_rewards_by_hand():
    # Group 0: right, wrong, wrong, delegated; probes wrong, wrong: pass rate 1/5 < 0.5, unsolvable.
    # Group 1: right, right, wrong, delegated; probe right: pass rate 3/4, solvable.
    delegated = [False, False, False, True, False, False, False, True]
    correct = [True, False, False, None, True, True, False, None]
    rewards, rates = group_rewards(delegated, correct, [[False, False], [True]], 4, TABLE, 0.5)
    assert rates == [pytest.approx(0.2), pytest.approx(0.75)]
    assert rewards == [1.0, -0.5, -0.5, 0.25, 1.0, 1.0, -0.5, -1.0]
    # Without the group's own attempts the probes alone decide: group 0 stays unsolvable (0/2), group 1 solvable.
    _, rates = group_rewards(delegated, correct, [[False, False], [True]], 4, TABLE, 0.5, count_group=False)
    assert rates == [0.0, 1.0]
    # A threshold above 3/4 makes group 1 unsolvable: its delegation earns the unsolvable cell.
    rewards, _ = group_rewards(delegated, correct, [[False, False], [True]], 4, TABLE, 0.8)
    assert rewards[7] == 0.25


def test_a_group_without_attempts_to_judge_leaves_its_delegations_unscored():
    rewards, rates = group_rewards([True, True, False], [None, None, None], [[]], 3, TABLE, 0.5)
    assert rewards == [None, None, None] and rates == [None]


def test_decision_accuracy():
    assert decision_accuracy([False, True, True, False], [True, False, True, None]) == pytest.approx(2 / 3)
    assert decision_accuracy([True], [None]) is None


# -- the hooks -------------------------------------------------------------------------------------------------------


class RewardStage:
    """A reward-stage context whose policy answers the probes with scripted texts, recording the model asked."""

    def __init__(self, rollout, probe_texts):
        self.rollout, self.probe_texts, self.asked, self.logged, self.reports = rollout, list(probe_texts), [], {}, []

    def generate(self, prompts, model="policy", **sampling):
        self.asked.append((list(prompts), model))
        return [Generation([], [], self.probe_texts.pop(0)) for _ in prompts]

    def log(self, name, value):
        self.logged[name] = value

    def warn(self, name, count=1):
        self.logged[f"warn/{name}"] = count

    def acted(self, n, *, of, hint=None):
        self.reports.append((n, of))


def written(completions, answers, group_size=2):
    prompts = [f"What is q{i // group_size}?\n" for i in range(len(completions))]
    return Rollout(prompts=prompts, completions=completions, prompt_ids=[[1]] * len(completions),
                   completion_ids=[[2]] * len(completions), group_size=group_size, columns={"answer": answers},
                   rewards={"exact_match": torch.zeros(len(completions))})


def test_reward_hook_judges_attempts_and_delegations_by_the_probed_pass_rate():
    plugin = make_plugin("csa", delegation="The answer is ?", probes=2)
    rollout = written(["The answer is 5.", "The answer is ?.", "The answer is 8.", "The answer is ?."],
                      ["5", "5", "7", "7"])
    # Group 0: its attempt right, probes right and wrong: 2/3, solvable. Group 1: attempt wrong, a probe delegates
    # (not counted) and one is wrong: 0/2, unsolvable.
    ctx = RewardStage(rollout, ["The answer is 5.", "The answer is 4.", "The answer is ?.", "The answer is 1."])
    assert plugin.reward(ctx) == [1.0, 0.0, 0.0, 1.0]
    assert ctx.asked == [(["What is q0?\n", "What is q0?\n", "What is q1?\n", "What is q1?\n"], "policy")]
    assert ctx.reports == [(4, 4)] and ctx.logged["delegated"] == 0.5 and ctx.logged["solvable"] == 0.5
    # Row 0 attempts a solvable problem and row 3 delegates an unsolvable one; rows 1 and 2 decide against it.
    assert ctx.logged["decision_accuracy"] == 0.5


def test_reference_solvability_probes_the_reference_alone_and_rows_without_an_answer_go_unscored():
    plugin = make_plugin("csa", delegation="DELEGATE", solvability="reference", probes=1)
    rollout = written(["The answer is 5.", "DELEGATE", "DELEGATE", "The answer is 3."], ["5", "5", None, None])
    # The group's right attempt does not count: the reference's one probe is wrong, so group 0 is unsolvable.
    ctx = RewardStage(rollout, ["The answer is 6."])
    assert plugin.reward(ctx) == [1.0, 1.0, None, None]
    assert ctx.asked == [(["What is q0?\n"], "reference")]
    assert ctx.reports == [(2, 4)] and ctx.logged["warn/delegations_without_pass_rate"] == 1


def test_written_delegation_takes_each_training_groups_last_row():
    plugin = make_plugin("csa", delegation="?", written_delegation="?!")
    ctx = Scripted({"a": ["1", "2"], "b": ["3", "4"]})
    ctx.group_size, ctx.training = 2, True
    samples = plugin.generate_rollout(["a", "a", "b", "b"], ctx)
    assert [[chr(t) for t in ids] for ids in samples.completion_ids] == [
        ["1", "\t"], ["?", "!", "\t"], ["3", "\t"], ["?", "!", "\t"]]
    assert samples.columns[WRITTEN] == [False, True, False, True]
    ctx.training = False
    assert plugin.generate_rollout(["a", "a"], ctx) is None  # held-out evaluation samples plain completions
    assert make_plugin("csa").generate_rollout(["a", "a"], ctx) is None


def test_prompt_template_adds_an_instruction():
    plugin = make_plugin("csa", prompt_template="{prompt}Or write DELEGATE.\n")
    ctx = Scripted({})
    ctx.rollout_columns = {"answer": ["5"]}
    assert plugin.transform_prompts(["What is 2 + 3?\n"], ctx) == ["What is 2 + 3?\nOr write DELEGATE.\n"]
    assert make_plugin("csa").transform_prompts(["x"], ctx) is None


def test_run_checks_refuse_data_without_answers_and_reference_solvability_without_a_reference():
    from stackrl import ConfigError
    from stackrl.plugin import RunFacts

    def facts(columns=("question", "answer"), reference=False):
        return RunFacts(max_steps=2, group_size=4, groups_per_step=2, columns=columns,
                        builtin_columns=("question", "answer", "solution", "category"), chat=False,
                        reference=reference, source="arithmetic", components=("exact_match", "csa"))

    make_plugin("csa").check_run(facts())
    with pytest.raises(ConfigError, match="csa.answer_column"):
        make_plugin("csa").check_run(facts(columns=("question",)))
    with pytest.raises(ConfigError, match="csa.solvability"):
        make_plugin("csa", solvability="reference").check_run(facts())
    make_plugin("csa", solvability="reference").check_run(facts(reference=True))
