"""RLER's ensembled reward and diagnostics on hand-built votes, its selection and its settings."""

from types import SimpleNamespace

import pytest
import torch

from stackrl import ConfigError, Rollout
from stackrl.plugin import RunFacts
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_rler.bias import correlation, diagnostics, rho_noise, rho_selfbias, rho_symbias
from stackrl_rler.ensemble import ensemble_reward


class TestConformance(PluginConformance):
    plugin_name = "rler"
    refused_settings = [({"estimators": []}, "must name distinct models"),
                        ({"estimators": ["policy", "policy"]}, "must name distinct models"),
                        ({"weights": {"critic": 1.0}}, "critic is not among rler.estimators"),
                        ({"weights": {"policy": 0.0}}, "must be positive"),
                        ({"samples": 0}, "must be at least 1, not 0"),
                        ({"temperature": -1.0}, "must be non-negative"),
                        ({"snapshot_every": -1}, "must be non-negative"),
                        ({"interpolation": "mean"}, "must be one of adaptive, hard, soft, not 'mean'"),
                        ({"margin": 2.0}, r"must lie in \[-1, 1\], not 2.0"),
                        ({"absent": "ignore"}, "must be one of error, skip, not 'ignore'")]


# A group of four policy rows answering 4, 4, 5 and nothing; a second model answers 5 twice, a third 4 once.
ROWS = ["4", "4", "5", None]
VOTES = {"policy": ROWS, "tiny": ["5", "5"], "skills": ["4"]}


def test_the_ensemble_pools_every_estimator_and_interpolates_by_its_confidence():
    # p_policy = (4: 1/2, 5: 1/4), p_tiny = (5: 1), p_skills = (4: 1): p = (4: 1/2, 5: 5/12), label 4, c = 1/2.
    out = ensemble_reward(ROWS, VOTES, {}, math_verify=False)
    assert out.label == "4" and out.confidence == pytest.approx(0.5)
    assert out.shares == pytest.approx([0.5, 0.5, 5 / 12, 0.0])
    # r = c * hard + (1 - c) * p: 0.5 + 0.25 for a 4, 0.5 * 5/12 for the 5, 0 for no answer.
    assert out.rewards == pytest.approx([0.75, 0.75, 5 / 24, 0.0])
    # tiny's top answer is 5, not the label: a third of the weight disagrees.
    assert out.top == {"policy": "4", "tiny": "5", "skills": "4"}
    assert out.disagreement == pytest.approx(1 / 3)
    assert out.self_shares == pytest.approx([0.5, 0.5, 0.25, 0.0])
    assert out.kept(0.0) and out.kept(1 / 6) and not out.kept(0.2)


def test_weights_hard_and_soft_readings():
    weighted = ensemble_reward(ROWS, VOTES, {"tiny": 3.0}, math_verify=False)
    # p = (4: (1/2 + 1) / 5 = 0.3, 5: (1/4 + 3) / 5 = 0.65): the weighted estimator turns the label to 5.
    assert weighted.label == "5" and weighted.confidence == pytest.approx(0.65)
    assert weighted.rewards == pytest.approx([0.35 * 0.3, 0.35 * 0.3, 0.65 + 0.35 * 0.65, 0.0])
    assert ensemble_reward(ROWS, VOTES, {}, interpolation="hard", math_verify=False).rewards == [1.0, 1.0, 0.0, 0.0]
    assert ensemble_reward(ROWS, VOTES, {}, interpolation="soft", math_verify=False).rewards == pytest.approx(
        [0.5, 0.5, 5 / 12, 0.0])


def test_the_policy_alone_is_the_self_reward_and_another_model_moves_it():
    alone = ensemble_reward(ROWS, {"policy": ROWS}, {}, math_verify=False)
    assert alone.rewards == pytest.approx([0.5 + 0.25, 0.5 + 0.25, 0.5 * 0.25, 0.0]) and alone.disagreement == 0.0
    # A model that answers 5 pulls the reward from the policy's majority to the minority answer.
    against = ensemble_reward(ROWS, {"policy": ROWS, "tiny": ["5"]}, {}, math_verify=False)
    assert against.label == "5" and against.confidence == pytest.approx(5 / 8)
    assert against.rewards[2] > alone.rewards[2] and against.rewards[0] < alone.rewards[0]
    assert against.disagreement == pytest.approx(0.5)


def test_answers_cluster_across_estimators_and_nothing_answered_is_no_label():
    out = ensemble_reward(["1/2", "0.5"], {"policy": ["1/2", "0.5"], "tiny": ["0.50"]}, {})
    assert out.label == "1/2" and out.confidence == pytest.approx(1.0) and out.rewards == [1.0, 1.0]
    empty = ensemble_reward([None, None], {"policy": [None, None], "tiny": [None]}, {})
    assert empty.label is None and empty.rewards == [0.0, 0.0] and empty.disagreement == 1.0


def test_bias_diagnostics_by_hand():
    rewards, correct = [1.0, 1.0, 0.5, 0.0], [1, 0, 0, 0]
    assert rho_noise(rewards, correct) == pytest.approx(1.5 / 4)
    assert rho_symbias(rewards, correct) == pytest.approx(1.0)  # every error rewards a wrong answer
    assert rho_symbias([0.0, 1.0], [1, 1]) == pytest.approx(-1.0)  # an under-reward only
    assert rho_symbias([0.0, 1.0], [1, 0]) == pytest.approx(0.0) and rho_symbias([1.0], [1]) == 0.0
    # The error (0, 1, 0.5, 0) against the policy's own confidence (1, 1, 0.5, 0): it over-rewards what it believes.
    assert rho_selfbias([1.0, 1.0, 0.5, 0.0], rewards, correct) == pytest.approx(
        correlation([1.0, 1.0, 0.5, 0.0], [0.0, 1.0, 0.5, 0.0]))
    assert rho_selfbias([1.0, 1.0, 0.5, 0.0], rewards, correct) > 0
    assert correlation([1, 1], [0, 1]) is None
    assert set(diagnostics(rewards, correct, [1, 1, 0.5, 0])) == {"rho_noise", "rho_symbias", "rho_selfbias"}


class Context:
    """A reward-stage context: estimators answer from ``replies`` (model -> text per prompt)."""

    def __init__(self, completions, prompts, replies, group_size, training=True, aux=()):
        n = len(completions)
        self.rollout = Rollout(prompts, completions, [[0]] * n, [[0]] * n, {}, group_size=group_size)
        self.replies, self.training, self.aux_model_names = replies, training, tuple(aux)
        self.logged, self.acted_on, self.asked, self.snapshots, self.warned = {}, None, [], [], {}

    def generate(self, prompts, *, model="policy", **sampling):
        self.asked.append((model, list(prompts), sampling))
        return [SimpleNamespace(text=self.replies[model][p]) for p in prompts]

    def update_snapshot(self, name, decay=0.0, **_):
        self.snapshots.append(name)

    def declare_pseudo_labels(self, labels):
        self.rollout.pseudo_labels["rler"] = labels

    def log(self, name, value):
        self.logged[name] = value

    def warn(self, name, count=1):
        self.warned[name] = count

    def acted(self, n, *, of, hint=None):
        self.acted_on = (n, of)


def say(x):
    return f"The answer is {x}."


def test_the_reward_hook_asks_each_model_once_per_prompt_and_keeps_out_split_groups():
    plugin = make_plugin("rler", estimators=["policy", "snapshot", "tiny"], math_verify=False)
    completions = [say(4), say(4), say(5), "no idea", say(7), say(8), say(9), say(9)]
    replies = {"rler": {"q1": say(4), "q2": say(1)}, "tiny": {"q1": say(5), "q2": say(2)}}
    ctx = Context(completions, ["q1"] * 4 + ["q2"] * 4, replies, 4, aux=["tiny"])
    plugin.train_begin(ctx)
    rewards = plugin.reward(ctx)
    assert ctx.snapshots == ["rler"]
    assert [(model, prompts) for model, prompts, _ in ctx.asked] == [("rler", ["q1", "q2"]), ("tiny", ["q1", "q2"])]
    assert ctx.asked[0][2] == {"do_sample": False}
    # q1: p = (4: (1/2 + 1) / 3, 5: (1/4 + 1) / 3) = (1/2, 5/12): label 4 with c = 1/2, one estimator of three
    # disagrees: kept. q2: p = (9: 1/6, 7: 1/12, 8: 1/12, 1: 1/3, 2: 1/3): label 1 (first of the tie), c = 1/3,
    # every estimator but the snapshot disagrees (2/3): kept out.
    expected = ensemble_reward([*"44", "5", None], {"policy": [*"44", "5", None], "rler": ["4"], "tiny": ["5"]}, {},
                               math_verify=False).rewards
    assert rewards[:4].tolist() == pytest.approx(expected)
    assert rewards[:4].tolist() == pytest.approx([0.75, 0.75, 5 / 24, 0.0])
    assert ctx.rollout.pseudo_labels["rler"] == ["4"] * 4 + ["1"] * 4
    assert ctx.rollout.excluded == {4, 5, 6, 7}
    assert ctx.acted_on == (3, 8)
    assert ctx.logged["selected"] == 0.5
    assert rewards.dtype == torch.float32


def test_absent_models_refused_or_left_out():
    facts = dict(max_steps=4, group_size=4, groups_per_step=2, columns=None, builtin_columns=(), chat=False,
                 reference=False, source="arithmetic", components=("rler",))
    plugin = make_plugin("rler", estimators=["policy", "tiny"])
    with pytest.raises(ConfigError, match="rler.estimators: tiny names no model of this run"):
        plugin.check_run(RunFacts(**facts))
    assert plugin.check_run(RunFacts(**facts, aux_models=("tiny",))) is None
    with pytest.raises(ConfigError, match="reference names no model"):
        make_plugin("rler", estimators=["policy", "reference"]).check_run(RunFacts(**facts))
    skipping = make_plugin("rler", estimators=["policy", "tiny"], absent="skip", math_verify=False)
    assert skipping.check_run(RunFacts(**facts)) == ["rler.estimators: tiny left out (no such model in this run)"]
    ctx = Context([say(1), say(2)], ["q", "q"], {}, 2)
    skipping.train_begin(ctx)
    assert skipping.reward(ctx).tolist() == pytest.approx([0.5 + 0.25, 0.25])  # the policy's own vote alone
    assert ctx.asked == [] and ctx.warned == {"absent_estimators": 1}
