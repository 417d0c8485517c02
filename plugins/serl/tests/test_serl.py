"""SeRL: the majority-vote reward and the difficulty band by hand, in a run, and its pseudo-label on the built-in model."""

import pytest
import torch

from stackrl import RewardContext, Rollout
from stackrl.answers import group_answers
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import HookRecorder, train_steps
from stackrl.trainer import ROW_INDEX
from stackrl_serl import SeRL, SeRLConfig
from stackrl_serl.plugin import majority_rewards, outside_band


class TestConformance(PluginConformance):
    plugin_name = "serl"
    refused_settings = [
        ({"min_mean_reward": 0.9, "max_mean_reward": 0.1},
         r"serl.min_mean_reward and serl.max_mean_reward .*\[0.9, 0.1\]"),
    ]


def test_only_the_majority_answer_is_rewarded_under_math_equivalence():
    group = group_answers(["\\frac{1}{2}", "3", "0.5", None, "3", "1/2"])  # 1/2 three times, 3 twice
    assert majority_rewards(group.in_majority()) == [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    plain = group_answers(["\\frac{1}{2}", "3", "0.5", None, "3", "1/2"], math_verify=False)
    assert majority_rewards(plain.in_majority()) == [0.0, 1.0, 0.0, 0.0, 1.0, 0.0]  # without it, 3 leads
    assert majority_rewards(group_answers(["7", "8"]).in_majority()) == [1.0, 0.0]  # a tie: the first written


def test_unanswered_rows_vote_as_the_empty_answer_only_when_asked():
    texts = ["The answer is 3.", "no answer", "I give up", "The answer is 3.", "none", "The answer is 4."]
    rollout = Rollout(["q"] * 6, texts, [[1]] * 6, [[2]] * 6, {}, group_size=6)
    for votes, rewards in ((False, [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]), (True, [0.0, 1.0, 1.0, 0.0, 1.0, 0.0])):
        plugin = SeRL(SeRLConfig(answer_extractor="answer_is", math_verify=False, unanswered_votes=votes))
        plugin.name = "serl"
        ctx = RewardContext(step=0, tokenizer=None, policy=None, _log=lambda *_: None, _plugin="serl", rollout=rollout)
        assert plugin.reward(ctx).tolist() == rewards  # three unanswered rows outvote the two 3s


def test_the_band_leaves_out_of_the_loss_the_groups_outside_it_in_training_only():
    # Group 1: every row agrees (mean 1, too easy); group 2: two of four agree (mean 0.5, inside the band).
    texts = ["The answer is 3."] * 4 + ["The answer is 5.", "The answer is 5.", "The answer is 6.", "none"]
    plugin = SeRL(SeRLConfig(answer_extractor="answer_is", math_verify=False))
    plugin.name = "serl"
    for training, excluded in ((True, {0, 1, 2, 3}), (False, set())):
        rollout = Rollout(["q"] * 8, texts, [[1]] * 8, [[2]] * 8, {}, group_size=4)
        ctx = RewardContext(step=0, tokenizer=None, policy=None, _log=lambda *_: None, _plugin="serl", rollout=rollout,
                            training=training)
        assert plugin.reward(ctx).tolist() == [1.0] * 4 + [1.0, 1.0, 0.0, 0.0]
        assert rollout.excluded == excluded  # evaluation scores every group and leaves none out


def test_the_band_keeps_groups_whose_mean_reward_lies_inside_it_bounds_included():
    rewards = torch.tensor([1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0], dtype=torch.float)
    # Group means over 8: 7/8 (too easy), 1/8 (too hard), 2/8 (inside).
    assert outside_band(rewards, 8, 0.2, 0.8).tolist() == [True, True, False]
    assert outside_band(rewards, 8, 0.25, 0.875).tolist() == [False, True, False]  # both bounds belong to the band


def test_a_label_free_run_trains_only_on_groups_inside_the_band(make_config, tmp_path):
    recorder = HookRecorder()
    config = make_config(
        ["serl"],
        model={"name_or_path": "stackrl/arith-tiny"},
        data={"label_free": True, "size": 32},
        rewards={"exact_match": None},
        trainer={"per_device_train_batch_size": 16, "num_generations": 8, "max_completion_length": 40, "max_steps": 1,
                 "seed": 1},
        serl={"answer_extractor": "answer_is", "math_verify": False},
    )
    trainer = train_steps(config, monitor=recorder)
    rewards = torch.as_tensor(next(call.result for call in recorder.calls if call.hook == "reward")).view(-1, 8)
    kept = (rewards.mean(1) >= 0.2) & (rewards.mean(1) <= 0.8)
    assert kept.any() and not kept.all(), "this seed gives groups inside and outside the band"
    batch = trainer._buffered_inputs[0]
    tokens = (batch["completion_mask"] * batch["tool_mask"])[batch[ROW_INDEX].argsort()].sum(1).view(-1, 8)
    assert ((tokens > 0).all(1) == kept).all() and ((tokens == 0).all(1) == ~kept).all()
    logged = trainer.state.log_history[0]
    assert logged["serl/filtered_groups"] == pytest.approx(1 - kept.double().mean().item())
    # The host checks serl's reward and its pseudo-label (each group's majority answer) against the hidden answers.
    assert {"truth/serl/auroc", "truth/serl/pseudo_label_accuracy", "truth/correct"} <= set(logged)
