"""Verification-weighted voting: the model's own verdicts on its samples weigh the held-out vote."""

import pytest

from stackrl.errors import ConfigError
from stackrl.evaluation import evaluate, verification_weighted_vote
from stackrl.run import build_trainer


@pytest.mark.parametrize(
    "answers, verdicts, vote",
    [
        (["3", "4", "4"], [True, False, False], "3"),  # the only answer judged correct wins over the majority
        (["3", "4", "4", "3"], [True, True, True, False], "4"),  # among accepted ones, the most common
        (["3", "4", "4"], [False, False, None], "4"),  # none accepted: the plain majority
        (["3", "4"], [True, True], "3"),  # a tie: the first seen
        ([None, "5"], [True, False], "5"),  # an accepted sample without an answer casts no vote
        ([None, None], [True, True], None),
    ],
)
def test_verification_weighted_vote(answers, verdicts, vote):
    assert verification_weighted_vote(answers, verdicts) == vote


def test_eval_reports_the_verified_vote_beside_the_majority(make_config):
    """The tiny random model gives no verdicts, so its verified vote is its plain majority, figure for figure."""
    config = make_config(eval={"verify_vote": True, "size": 8, "samples": 3})
    trainer = build_trainer(config)
    figures = evaluate(trainer.model, trainer.processing_class, config, 8)
    assert "vmaj@3" in figures and figures["vmaj@3"] == figures["maj@3"]
    plain = evaluate(trainer.model, trainer.processing_class, make_config(eval={"size": 8, "samples": 3}), 8)
    assert "vmaj@3" not in plain and plain["maj@3"] == figures["maj@3"]


def test_the_verified_vote_needs_plain_text_solving(make_config):
    with pytest.raises(ConfigError, match="eval.verify_vote judges samples with plain-text judge prompts"):
        make_config(eval={"verify_vote": True}, data={"chat": True})
