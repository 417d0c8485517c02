"""Reward weights by step: a constant is a schedule of one piece; a schedule is read, checked with errors that name
the file and key, applied to the rollout of its step (the total GRPO's advantages come from), logged, and the same
after a resume."""

import pytest
import yaml

from stackrl import ConfigError, Plugin
from stackrl.config import load_config
from stackrl.testing.fixtures import StopAt, train_steps
from stackrl.weights import Schedule, reward_schedules, schedule


def test_a_number_is_one_piece_from_step_0():
    assert schedule(0.5, "rewards.x") == Schedule(((0, 0.5),))
    assert schedule(2, "rewards.x").constant


def test_each_weight_holds_from_its_step_until_the_next():
    weights = schedule({40: 0.0, 0: 1.0, 10: 0.25}, "rewards.x")
    assert weights.pieces == ((0, 1.0), (10, 0.25), (40, 0.0))
    assert [weights.at(s) for s in (0, 9, 10, 39, 40, 1000)] == [1.0, 1.0, 0.25, 0.25, 0.0, 0.0]
    assert not weights.constant


def test_steps_written_on_the_command_line_are_read_as_integers():
    assert schedule({"0": 1.0, "3": 0.0}, "rewards.x").pieces == ((0, 1.0), (3, 0.0))


@pytest.mark.parametrize(
    "value, message",
    [
        ({}, "rewards.x: a weight schedule needs at least the weight at step 0"),
        ({5: 1.0}, "rewards.x: a weight schedule starts at step 0 (its first key is 5)"),
        ({0: 1.0, -2: 0.0}, "rewards.x: a schedule's keys are training steps (integers >= 0), not -2"),
        ({0: 1.0, 1.5: 0.0}, "rewards.x: a schedule's keys are training steps (integers >= 0), not 1.5"),
        ({0: 1.0, "3": 0.0, 3: 1.0}, "rewards.x: a step appears twice"),
        ({0: "1.0"}, "rewards.x.0: a weight must be a finite number, not '1.0'"),
        ({0: True}, "rewards.x.0: a weight must be a finite number, not True"),
        (float("nan"), "rewards.x: a weight must be a finite number, not nan"),
    ],
)
def test_a_malformed_schedule_is_refused_naming_its_key(value, message):
    with pytest.raises(ConfigError) as error:
        schedule(value, "rewards.x")
    assert str(error.value).startswith(message)


class _Phased(Plugin):
    def reward_weight(self):
        return {0: 1.0, 3: 0.0}


def test_a_plugin_default_applies_unless_the_config_weighs_its_component():
    phased = reward_schedules({}, ["exact_match", "phased"], {"phased": _Phased().reward_weight()})
    assert phased["exact_match"].pieces == ((0, 1.0),) and phased["phased"].pieces == ((0, 1.0), (3, 0.0))
    given = reward_schedules({"phased": 0.5}, ["exact_match", "phased"], {"phased": _Phased().reward_weight()})
    assert given["phased"].pieces == ((0, 0.5),)
    with pytest.raises(ConfigError, match="rewards.other: no reward component of that name"):
        reward_schedules({"other": 1.0}, ["exact_match"], {})


def test_a_bad_schedule_in_a_file_names_the_file_and_key(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"rewards": {"exact_match": {2: 1.0}}}))
    with pytest.raises(ConfigError) as error:
        load_config([path])
    assert str(error.value).startswith(f"{path}: rewards.exact_match: a weight schedule starts at step 0")


def test_files_and_the_command_line_merge_schedules_step_by_step(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"rewards": {"exact_match": {0: 1.0, 5: 0.0}}}))
    config = load_config([path], ["rewards.exact_match={5: 0.5, 9: 2.0}"])
    assert schedule(config.host.rewards["exact_match"], "rewards.exact_match").pieces == ((0, 1.0), (5, 0.5), (9, 2.0))


def _weighed_totals(trainer):
    """Per logged step: (the logged weight of digit_reward, the logged total, the weighted sum of the means)."""
    rows = [row for row in trainer.state.log_history if "reward_weight/digit_reward" in row]
    return [
        (row["reward_weight/digit_reward"], row["reward"],
         row["rewards/exact_match/mean"] + row["reward_weight/digit_reward"] * row["rewards/digit_reward/mean"])
        for row in rows
    ]


def test_the_weight_of_the_rollouts_step_makes_the_total(make_config):
    # The rollouts of steps 0 and 1 (trained as steps 1 and 2) weigh digit_reward 1, those from step 2 on 0.
    config = make_config(["digit_reward"], rewards={"exact_match": 1.0, "digit_reward": {0: 1.0, 2: 0.0}})
    trainer = train_steps(config, steps=4)
    totals = _weighed_totals(trainer)
    assert [weight for weight, _, _ in totals] == [1.0, 1.0, 0.0, 0.0]
    for _, total, weighed in totals:
        assert total == pytest.approx(weighed, abs=1e-5)
    # The muted component is still computed and logged, and would have moved the total.
    assert any(row["rewards/digit_reward/mean"] > 0 for row in trainer.state.log_history[2:4])
    assert trainer.reward_weights.tolist() == [1.0, 0.0]


def test_a_constant_weight_logs_nothing_new(make_config):
    trainer = train_steps(make_config(["digit_reward"], rewards={"exact_match": 1.0, "digit_reward": 0.5}), steps=1)
    assert not any(key.startswith("reward_weight/") for row in trainer.state.log_history for key in row)
    assert trainer.reward_weights.tolist() == [1.0, 0.5]


def test_a_resumed_run_weighs_each_step_as_an_uninterrupted_one(make_config, tmp_path):
    saving = {"save_strategy": "steps", "save_steps": 2, "max_steps": 4}
    rewards = {"exact_match": 1.0, "digit_reward": {0: 0.0, 3: 1.0}}
    straight = train_steps(make_config(["digit_reward"], rewards=rewards, trainer=saving,
                                       output_dir=str(tmp_path / "straight")))
    interrupted = make_config(["digit_reward"], rewards=rewards, trainer=saving, output_dir=str(tmp_path / "resumed"))
    train_steps(interrupted, callbacks=[StopAt(2)])
    resumed = train_steps(interrupted, resume=True)
    assert [w for w, _, _ in _weighed_totals(straight)] == [0.0, 0.0, 0.0, 1.0]
    assert _weighed_totals(resumed)[-2:] == _weighed_totals(straight)[-2:]
