"""Self-verification RL: the verifier's plain 1/0 for answers and verdicts; verification-weighted voting."""

import pytest

from stackrl import ConfigError
from stackrl.rewards import SOLVE, VERIFY
from stackrl.tasks import parse_verdict
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import train_steps
from stackrl_rise import critique_score, solution_score
from stackrl_selfverify import SelfVerifyConfig


class TestConformance(PluginConformance):
    plugin_name = "selfverify"


def test_the_verifier_scores_answers_and_verdicts_one_or_zero():
    config = SelfVerifyConfig()
    assert [solution_score(t, "7", config) for t in ("The answer is 7.", "The answer is 8.", "7")] == [1.0, 0.0, 0.0]
    critiques = ("Verdict: correct", True), ("Verdict: wrong", True), ("no verdict", False)
    assert [critique_score(text, c, config) for text, c in critiques] == [1.0, 0.0, 0.0]
    assert config.verify_share == 0.5


def test_errors_name_this_plugins_section():
    with pytest.raises(ConfigError, match=r"^selfverify.verify_share: must be in \(0, 1\)"):
        SelfVerifyConfig(verify_share=0.0)


def test_answers_and_verifications_are_scored_by_the_verifier(make_config):
    config = make_config(
        ["selfverify"],
        model={"name_or_path": "stackrl/arith-tiny"},
        rewards={"exact_match": 0.0},
        trainer={"per_device_train_batch_size": 8, "max_completion_length": 48},
    )
    rollout = train_steps(config, steps=1)._rollouts["train"]
    roles, scores = rollout.columns["role"], rollout.rewards["selfverify"]
    assert roles == [SOLVE] * 4 + [VERIFY] * 4
    for i, role in enumerate(roles):
        if role == SOLVE:
            assert scores[i] == rollout.rewards["exact_match"][i]  # the verifier's own 1/0
        else:
            target = rollout.columns["attempt_correct"][i]
            assert scores[i] == float(parse_verdict(rollout.completions[i]) == target)
