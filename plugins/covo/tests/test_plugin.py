"""The CoVo plugin in runs: conformance, the label-free recipe, both scoring paths, its mechanism on arith-tiny."""

import re
from pathlib import Path

import pytest
import torch

from stackrl import ConfigError
from stackrl.tasks.arithmetic import CATEGORIES, make_dataset
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import HookRecorder, train_steps
from stackrl.trainer import ROW_INDEX


class TestConformance(PluginConformance):
    plugin_name = "covo"


def test_the_cpu_recipe_trains_label_free_on_rewarded_groups_only(tmp_path, covo):
    recorder = HookRecorder()
    trainer = train_steps(covo.recipe(tmp_path, "trainer.seed=3"), steps=2, monitor=recorder)
    assert trainer.state.global_step == 2
    assert "answer" not in trainer.train_dataset.column_names  # the reward never saw a reference answer
    rewards = [call.result for call in recorder.calls if call.hook == "reward"]
    assert len(rewards) == 2 and all(len(r) == 8 for r in rewards)
    logged = {key for entry in trainer.state.log_history for key in entry}
    assert {"covo/consistency", "covo/volatility", "covo/filtered_groups", "rewards/covo/mean"} <= logged
    # The group filter: the last step's groups without any CoVo reward have no token in the loss, the others do.
    batch = trainer._buffered_inputs[0]
    in_loss = batch["completion_mask"] * batch["tool_mask"]  # TRL's policy loss counts these tokens
    tokens = in_loss[batch[ROW_INDEX].argsort()].sum(dim=1).view(-1, 4)
    rewarded = torch.as_tensor(rewards[-1]).view(-1, 4).sum(dim=1) > 0
    assert rewarded.any() and not rewarded.all(), "this seed gives one group of each kind"
    assert ((tokens > 0).all(dim=1) == rewarded).all() and ((tokens == 0).all(dim=1) == ~rewarded).all()


def test_one_forward_per_trajectory_gives_the_per_probe_numbers(arith_trainer, covo):
    questions = make_dataset(split="train", size=4, seed=5, categories=CATEGORIES[1:3])["question"]
    rollout = covo.sampled(arith_trainer, questions, group_size=6)
    settings = {"reward_mode": "continuous", "curiosity": "log"}
    shared, shared_logs = covo.reward(arith_trainer, rollout, scoring="shared_prefix", **settings)
    naive, naive_logs = covo.reward(arith_trainer, rollout, scoring="per_probe", **settings)
    assert shared_logs["covo/distinct_answers"] > 1
    assert torch.allclose(shared, naive, atol=1e-5)
    assert shared_logs == pytest.approx(naive_logs, abs=1e-5)


# What is (9 * 5) + 16? The built-in model, asked "The answer is" after a line, answers that line's result: a
# state points at the answer its running value equals. Answer 61's trajectories reach it in their first state
# and stay there; answer 77's run through 61 for three states before turning to 77.
QUESTION = "What is (9 * 5) + 16?\n"
CONSISTENT = "9 * 5 + 16 = 61\nThe answer is 61."
VOLATILE = "9 * 5 = 61\n61 + 0 = 61\n61 * 1 = 61\n61 + 16 = 77\nThe answer is 77."


def test_states_that_keep_to_their_answer_are_rewarded(arith_trainer, covo):
    tokenizer = arith_trainer.processing_class
    rollout = covo.rollout_of(tokenizer, [QUESTION] * 4, [CONSISTENT, VOLATILE, CONSISTENT, VOLATILE], group_size=4)
    rewards, logs = covo.reward(arith_trainer, rollout, curiosity="off")
    assert rewards.tolist() == [1.0, 0.0, 1.0, 0.0]  # RiV 1.0 for 61; 0.4 for 77, under the 0.5 threshold
    assert logs["covo/consistency"] == pytest.approx((1.0 + 0.4) / 2)  # 77: own answer nearest in 2 of 5 states
    assert logs["covo/volatility"] == pytest.approx((0.0 + 0.6) / 2)  # 77 leaned away until its third state
    continuous, _ = covo.reward(arith_trainer, rollout, curiosity="off", reward_mode="continuous")
    assert continuous.tolist() == pytest.approx([1.0, 0.4, 1.0, 0.4])


# Two groups of three: one distinct answer (61) and no answer; then 61, 77 and no answer.
TWO_GROUPS = [CONSISTENT, CONSISTENT, "9 * 5 = 45", CONSISTENT, VOLATILE, "9 * 5 = 45"]


def test_a_group_with_one_distinct_answer_gets_nothing_and_curiosity_is_only_logged(arith_trainer, covo):
    rollout = covo.rollout_of(arith_trainer.processing_class, [QUESTION] * 6, TWO_GROUPS, group_size=3)
    everyone_curious = {"curiosity_threshold": -100.0}
    rewards, logs = covo.reward(arith_trainer, rollout, **everyone_curious)  # the default: the released code's
    assert rewards.tolist() == [0.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert logs["covo/answered"] == pytest.approx(4 / 6)
    assert logs["covo/curiosity_bonus"] == pytest.approx(0.4 * 2 / 6)  # computed and logged, not added
    # The paper's bonus: only where the group has answers to compare, never to a group with one answer.
    bonus, _ = covo.reward(arith_trainer, rollout, curiosity="add", **everyone_curious)
    assert bonus.tolist() == pytest.approx([0.0, 0.0, 0.0, 1.4, 0.4, 0.0])


def test_the_group_filter_keeps_groups_without_reward_out_of_the_loss(arith_trainer, covo):
    def rollout():
        return covo.rollout_of(arith_trainer.processing_class, [QUESTION] * 6, TWO_GROUPS, group_size=3)

    filtered = rollout()
    _, logs = covo.reward(arith_trainer, filtered, group_filter=True)
    assert filtered.excluded == {0, 1, 2} and logs["covo/filtered_groups"] == 0.5
    for unfiltered, settings in ((rollout(), {}), (rollout(), {"group_filter": True, "training": False})):
        covo.reward(arith_trainer, unfiltered, **settings)
        assert unfiltered.excluded == set(), settings  # off by default, and evaluation is never filtered
    # The filter reads the intrinsic reward: a group the bonus alone rewards is filtered too (no answer passes 1.5).
    bonus_only = rollout()
    rewards, _ = covo.reward(arith_trainer, bonus_only, group_filter=True, curiosity="add", curiosity_threshold=-100.0,
                             riv_threshold=1.5)
    assert rewards.tolist() == pytest.approx([0.0, 0.0, 0.0, 0.4, 0.4, 0.0])
    assert bonus_only.excluded == set(range(6))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"covo.max_steps": 0}, "covo.max_steps must be at least 1, not 0"),
        ({"covo.probe_template": "The answer is"}, "must contain {answer}"),
        ({"covo.probe_template": "'{answer} {x}'"}, "is not a format string with only {answer}"),
        ({"covo.answer_extractor": "regex"}, "covo.answer_regex is needed with covo.answer_extractor: regex"),
        ({"covo.answer_extractor": "regex", "covo.answer_regex": "(unclosed"}, "is not a valid regex"),
        ({"covo.reward_mode": "soft"}, "covo.reward_mode"),
    ],
)
def test_bad_settings_are_named(tmp_path, covo, settings, message):
    from stackrl.run import validate

    with pytest.raises(ConfigError, match=re.escape(message)):
        validate(covo.recipe(tmp_path, *[f"{key}={value}" for key, value in settings.items()]))


def test_scoring_benchmark_prints_its_speedup_and_its_distance_to_the_limit(capsys):
    """The short mode of benchmarks/scoring.py: both scoring paths agree and the README's figures are printed."""
    from stackrl.testing.repository import load_script

    benchmark = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "scoring.py")
    benchmark.main(["--prompts", "2", "--samples", "4", "--repeats", "1"])
    output = capsys.readouterr().out
    assert re.search(r"^covo_limit_ratio: [\d.]+$", output, re.MULTILINE), output
    assert re.search(r"^covo_speedup: [\d.]+$", output, re.MULTILINE), output
