"""RISE: solutions and critiques of on-policy attempts scored in one batch, each by its own rule."""

import pytest

from stackrl import RewardContext, Rollout
from stackrl.rewards import SOLVE, VERIFY
from stackrl.tasks import judge_prompt, parse_verdict
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import train_steps
from stackrl_rise import Rise, RiseConfig, critique_score, solution_score

# Asymmetric values, so a swapped pair of them shows
SCORES = RiseConfig(correct=1.0, wrong=-0.25, unanswered=-2.0, agree=0.75, disagree=-0.5, no_verdict=-3.0,
                    min_critique_chars=0)


class TestConformance(PluginConformance):
    plugin_name = "rise"
    refused_settings = [({"verify_share": 1.0}, r"must be in \(0, 1\)"), ({"correct": -1.0}, "must exceed rise.wrong"),
                        ({"agree": -1.0}, "must exceed rise.disagree"),
                        ({"metric": "rise"}, "must be a built-in outcome reward"),
                        ({"min_critique_chars": -1}, "must be 0")]


@pytest.mark.parametrize(
    "text, score",
    [
        ("3 + 4 = 7\nThe answer is 7.", 1.0),
        ("3 + 4 = 8\nThe answer is 8.", -0.25),
        ("3 + 4 = 7\n", -2.0),
        ("\\boxed{7}", 1.0),
    ],
)
def test_solutions_score_right_wrong_or_unanswered(text, score):
    assert solution_score(text, "7", SCORES) == score


@pytest.mark.parametrize(
    "verdict, attempt_correct, score",
    [("correct", True, 0.75), ("wrong", False, 0.75), ("correct", False, -0.5), ("wrong", True, -0.5),
     (None, True, -3.0), (None, False, -3.0)],
)
def test_critiques_score_by_agreement_with_the_attempt(verdict, attempt_correct, score):
    text = "3 + 4 = 7\n" + (f"Verdict: {verdict}" if verdict else "")
    assert critique_score(text, attempt_correct, SCORES) == score


def test_a_critique_under_the_length_floor_scores_as_one_without_a_verdict():
    """The authors' floor: a right verdict after fewer than min_critique_chars characters scores no_verdict."""
    floor = RiseConfig(**{**vars(SCORES), "min_critique_chars": 40})
    right = "Verdict: correct"
    for text, score in [(right, -3.0), ("x" * (39 - len(right)) + right, -3.0), ("x" * (40 - len(right)) + right, 0.75)]:
        assert critique_score(text, True, floor) == score


def test_a_solution_without_an_answer_goes_unscored():
    """A row without an answer (a pool row added label-free, a self-supervised task) is no solution rise can judge:
    it scores it None, not wrong, whichever plugin generated it."""
    texts = ["The answer is 5.", "The answer is 6.", "The answer is 5.", "no answer"]
    rollout = Rollout(prompts=["q"] * 4, completions=texts, prompt_ids=[[1]] * 4, completion_ids=[[2]] * 4,
                      columns={"answer": ["5", "5", None, None]}, group_size=2)
    plugin = Rise(SCORES)
    plugin.name = "rise"
    ctx = RewardContext(step=0, tokenizer=None, policy=None, _log=lambda *_: None, rollout=rollout)
    assert plugin.reward(ctx) == [SCORES.correct, SCORES.wrong, None, None]


def test_the_authors_defaults():
    config = RiseConfig()
    assert (config.correct, config.wrong, config.unanswered) == (1.0, -0.5, -1.0)
    assert (config.agree, config.disagree, config.no_verdict) == (1.0, -0.5, -1.0)
    assert config.verify_share == 0.125 and config.min_critique_chars == 800


def test_verify_groups_critique_an_attempt_and_are_scored_by_their_verdict(make_config):
    config = make_config(
        ["rise"],
        model={"name_or_path": "stackrl/arith-tiny"},
        rewards={"exact_match": 0.0},
        rise={"verify_share": 0.5, "min_critique_chars": 0},  # the tiny model's critiques are short
        trainer={"per_device_train_batch_size": 16, "max_completion_length": 48},
    )
    trainer = train_steps(config, steps=1)
    rollout, decode, size = trainer._rollouts["train"], trainer.processing_class.decode, 4
    roles = rollout.columns["role"]
    assert roles == [SOLVE] * 8 + [VERIFY] * 8
    rise, exact = rollout.rewards["rise"], rollout.rewards["exact_match"]
    for i, role in enumerate(roles):
        prompt, text, answer = rollout.prompts[i], rollout.completions[i], rollout.columns["answer"][i]
        if role == SOLVE:
            assert decode(rollout.prompt_ids[i]) == prompt and rollout.columns["attempt_correct"][i] is None
            assert rise[i] == solution_score(text, answer, RiseConfig())
            continue
        trained_on = decode(rollout.prompt_ids[i])  # the question and one attempt, in the judge format
        attempt = trained_on[len(prompt) : -len("\nCheck:\n")]
        assert trained_on == judge_prompt(prompt, attempt)
        assert decode(rollout.prompt_ids[i - i % size]) == trained_on  # one attempt per group
        assert rollout.columns["attempt_correct"][i] == (solution_score(attempt, answer, RiseConfig()) == 1.0)
        assert rise[i] == critique_score(text, rollout.columns["attempt_correct"][i], RiseConfig(min_critique_chars=0))
        assert exact[i].isnan()  # a critique is no solution: the built-in reward leaves it to the plugin
