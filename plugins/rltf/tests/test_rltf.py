"""RLTF: feedback and a second attempt on each failed first attempt, self-distilled into the bare question (SD),
the feedback predicted (FM)."""

import pytest
import torch

from stackrl.rewards import exact_match
from stackrl.tasks import checked_retry_prompt, judge_prompt
from stackrl.tasks.roles import judge_reply
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import train_steps
from stackrl_rltf.feedback import critic_feedback, second_attempt_advantages
from stackrl_rltf.objectives import feedback_nll_sum, self_distillation_sum
from stackrl_rltf.plugin import FEEDBACK, SD_ADVANTAGE, SECOND, SECOND_CORRECT, SECOND_IDS


class TestConformance(PluginConformance):
    plugin_name = "rltf"
    refused_settings = [
        ({"variant": "kl"}, "rltf.variant: must be one of sd, fm, both"),
        ({"feedback": "judge"}, "rltf.feedback: must be one of critic, policy"),
        ({"feedback": "policy", "variant": "both"}, "rltf.feedback: the policy's own check is no target"),
        ({"sd_coef": 0.0}, "rltf.sd_coef: must be positive"),
        ({"fm_coef": -1.0}, "rltf.fm_coef: must be positive"),
        ({"min_logprob": 0.0}, "rltf.min_logprob: must be negative"),
        ({"feedback_template": "{prompt}\nCheck:\n"}, r"rltf.feedback_template: must contain \{attempt\}"),
        ({"retry_template": "{prompt}{attempt}\nTry again.\n"}, r"rltf.retry_template: must contain \{feedback\}"),
    ]


def test_second_attempts_are_weighed_by_their_reward_less_the_groups_first_attempt_mean():
    # Two groups of four. Group 0: first attempts right, wrong, wrong, right (mean 0.5); rows 1 and 2 retried, the
    # first fixed. Group 1: one right of three judged (row 5 has no answer), row 6 retried and still wrong.
    first = [True, False, False, True, False, None, False, True]
    second = {1: True, 2: False, 6: False}
    advantages = second_attempt_advantages(first, second, group_size=4)
    assert advantages == pytest.approx({1: 0.5, 2: -0.5, 6: -1 / 3})


def test_the_sd_sum_weighs_kept_tokens_by_the_advantage_and_drops_unlikely_ones():
    logps = torch.tensor([[-0.5, -6.0, -1.0], [-2.0, -0.1, 0.0]], requires_grad=True)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    advantages = torch.tensor([0.5, -2.0])
    total, kept = self_distillation_sum(logps, mask, advantages, min_logprob=-5.0)
    # row 0: -0.5 * (-0.5 - 1.0) (the -6.0 token is below -5: dropped); row 1: 2.0 * (-2.0 - 0.1)
    assert total.item() == pytest.approx(0.75 - 4.2)
    assert kept.tolist() == [[True, False, True], [True, True, False]]
    total.backward()
    # descending the loss raises a positive-advantage attempt's kept tokens and lowers a negative one's
    assert logps.grad.tolist() == [[-0.5, 0.0, -0.5], [2.0, 2.0, 0.0]]


def test_the_fm_sum_is_the_feedbacks_negative_log_likelihood():
    logps = torch.tensor([[-1.0, -2.0, -7.0], [-0.5, -3.0, -3.0]])
    assert feedback_nll_sum(logps, torch.tensor([[1, 1, 0], [1, 1, 1]])).item() == pytest.approx(9.5)


def test_the_critic_checks_a_readable_attempt_and_passes_over_an_unreadable_one():
    attempt = "3 + 4 = 8\n8 * 2 = 16\nThe answer is 16."
    assert critic_feedback(attempt) == judge_reply(attempt) == "3 + 4 = 7 | 8 no\nVerdict: wrong"
    assert critic_feedback(attempt + "\n") == judge_reply(attempt)
    assert critic_feedback("3 + 4 is seven\nThe answer is 7.") is None
    assert critic_feedback("") is None


def test_failed_first_attempts_get_the_critics_feedback_and_a_second_attempt(make_config):
    config = make_config(
        ["rltf"],
        model={"name_or_path": "stackrl/arith-skills"},
        data={"options": {"categories": ["3 steps, 1-digit", "4 steps, 1-digit"]}},
        rltf={"variant": "both"},
        trainer={"per_device_train_batch_size": 8, "num_generations": 4, "max_completion_length": 48},
    )
    trainer = train_steps(config, steps=1)
    rollout, decode = trainer._rollouts["train"], trainer.processing_class.decode
    columns = rollout.columns
    retried = [i for i, value in enumerate(columns[SD_ADVANTAGE]) if value is not None]
    assert retried, "no failed first attempt: the test is void"
    for i in range(len(rollout)):
        prompt, attempt, answer = rollout.prompts[i], rollout.completions[i], columns["answer"][i]
        if i not in retried:  # a right first attempt (or one the critic cannot read) is not retried
            assert exact_match(attempt, answer) or critic_feedback(attempt) is None
            assert columns[FEEDBACK][i] is None and columns[SECOND][i] is None
            continue
        assert not exact_match(attempt, answer)
        assert columns[FEEDBACK][i] == judge_reply(attempt.strip())
        assert decode(columns[SECOND_IDS][i], skip_special_tokens=True) == columns[SECOND][i]
        assert columns[SECOND_CORRECT][i] is (exact_match(columns[SECOND][i], answer) == 1.0)
        group = range(i - i % rollout.group_size, i - i % rollout.group_size + rollout.group_size)
        baseline = sum(exact_match(rollout.completions[j], columns["answer"][j]) for j in group) / len(group)
        assert columns[SD_ADVANTAGE][i] == pytest.approx(float(columns[SECOND_CORRECT][i]) - baseline)
    logged = trainer.state.log_history[0]
    assert logged["loss/rltf"] != 0.0
    assert logged["activity/rltf"] == pytest.approx(len(retried) / len(rollout))
    assert 0 < logged["rltf/feedback_nll"] and 0 < logged["rltf/sd_kept"] <= 1
