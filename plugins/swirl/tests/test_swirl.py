"""SWIRL: the phase schedule, the transition rollout, and the reward as the frozen opposite model's log-prob."""

import pytest
import torch
from transformers import TrainerCallback

from stackrl.run import build_trainer
from stackrl.testing.fixtures import StopAt

from stackrl.rewards import ROLE_COLUMN
from stackrl.tasks.transitions import forward_prompt, inverse_prompt, transitions
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_swirl.plugin import SNAPSHOT, STATE, TARGET
from stackrl_swirl.rewards import FORWARD, INVERSE, mean_logprob, opposite_query, phase_at


class TestConformance(PluginConformance):
    plugin_name = "swirl"
    refused_settings = [
        ({"phase_steps": 0}, "swirl.phase_steps: must be at least 1, not 0"),
        ({"first": "both"}, "swirl.first: must be one of forward, inverse, not 'both'"),
        ({"floor": 0.0}, r"swirl.floor: must be negative \(a log-probability\), not 0.0"),
    ]


def test_phases_alternate_every_phase_steps_from_the_first():
    assert [phase_at(s, 2, FORWARD) for s in range(6)] == [FORWARD, FORWARD, INVERSE, INVERSE, FORWARD, FORWARD]
    assert [phase_at(s, 1, INVERSE) for s in range(3)] == [INVERSE, FORWARD, INVERSE]


def test_each_phase_is_scored_by_the_other_direction():
    # A forward row wrote a next state: the inverse prompt reads it and scores the true action; an inverse row
    # wrote an action: the forward prompt reads it and scores the true next state.
    assert opposite_query(FORWARD, "(3 + 4) * 2", " 7 * 2\n", "3 + 4 = 7") == inverse_prompt("(3 + 4) * 2", "7 * 2")
    assert opposite_query(INVERSE, "(3 + 4) * 2", "3 + 4 = 7", "7 * 2") == forward_prompt("(3 + 4) * 2", "3 + 4 = 7")


def test_the_reward_is_the_floored_mean_token_logprob():
    logprobs = torch.tensor([[-1.0, -3.0, -9.0], [-20.0, -40.0, 0.0], [-0.5, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 0], [0, 0, 0]])
    assert mean_logprob(logprobs, mask, -10.0).tolist() == [-2.0, -10.0, 0.0]


class SampleStub:
    def __init__(self, step, solutions, group_size=2):
        self.step, self.group_size, self.logged, self.training = step, group_size, {}, True
        self.rollout_columns = {"solution": solutions}
        self.asked = None

    def generate(self, prompts):
        self.asked = list(prompts)
        return [type("G", (), {"completion_ids": [1], "prompt_ids": [2], "text": "x"})() for _ in prompts]

    def log(self, name, value):
        self.logged[name] = value


def test_the_rollout_asks_one_transition_per_group_in_the_steps_phase():
    plugin = make_plugin("swirl", phase_steps=1)
    prompts = ["What is (3 + 4) * 2?\n"] * 2 + ["What is 5 - 2?\n"] * 2
    solutions = ["3 + 4 = 7\n7 * 2 = 14\nThe answer is 14."] * 2 + ["5 - 2 = 3\nThe answer is 3."] * 2
    for step, phase in ((0, FORWARD), (1, INVERSE)):
        ctx = SampleStub(step, solutions)
        samples = plugin.generate_rollout(prompts, ctx)
        assert samples.columns[ROLE_COLUMN] == [phase] * 4
        for group in (0, 2):
            state, target = samples.columns[STATE][group], samples.columns[TARGET][group]
            (x, z, y), = [t for t in transitions(prompts[group], solutions[group]) if t[0] == state]
            assert target == (z if phase == FORWARD else y)
            assert ctx.asked[group] == ctx.asked[group + 1] == (forward_prompt(x, z) if phase == FORWARD
                                                                 else inverse_prompt(x, y))


class SnapshotStub:
    def __init__(self, step):
        self.step, self.snapshots = step, 0

    def update_snapshot(self, name, decay=0.0, *, checkpoint=False):
        assert name == SNAPSHOT and decay == 0.0 and checkpoint
        self.snapshots += 1


def test_the_opposite_model_is_frozen_at_the_start_of_every_phase():
    plugin = make_plugin("swirl", phase_steps=2)
    begin = SnapshotStub(0)
    plugin.train_begin(begin)
    taken = []
    for step in range(1, 7):  # post_step sees the steps completed: phases begin after steps 2, 4, 6
        ctx = SnapshotStub(step)
        plugin.post_step(ctx)
        taken.append(ctx.snapshots)
    assert begin.snapshots == 1 and taken == [0, 1, 0, 1, 0, 1]


def test_a_run_resumed_mid_phase_keeps_the_restored_snapshot():
    plugin = make_plugin("swirl", phase_steps=2)
    mid, boundary = SnapshotStub(3), SnapshotStub(4)  # train_begin of runs resumed after steps 3 and 4
    plugin.train_begin(mid)
    plugin.train_begin(boundary)
    assert (mid.snapshots, boundary.snapshots) == (0, 1)


class Rewards(TrainerCallback):
    def __init__(self, trainer):
        self.trainer, self.steps = trainer, []

    def on_step_end(self, args, state, control, **kwargs):
        rollout = self.trainer._rollouts["train"]
        self.steps.append((rollout.completions, rollout.rewards["swirl"].tolist()))


def _run(config, callbacks=(), **kwargs):
    """Each step's completions and swirl rewards of a run of ``config``."""
    trainer = build_trainer(config, callbacks=callbacks)
    trainer.add_callback(rewards := Rewards(trainer))
    trainer.train(**kwargs)
    return rewards.steps


def test_a_run_resumed_mid_phase_is_rewarded_as_an_uninterrupted_one(make_config, tmp_path):
    # Steps 0 and 1 are one phase: resumed after step 0, step 1 must still be scored by the snapshot of step 0's
    # start (restored from the checkpoint), not by the restored policy.
    sections = {"trainer": {"per_device_train_batch_size": 8, "max_steps": 2, "save_strategy": "steps",
                            "save_steps": 1, "learning_rate": 1e-2},
                "data": {"size": 8}, "swirl": {"phase_steps": 2}}
    straight = _run(make_config(["swirl"], output_dir=str(tmp_path / "straight"), **sections))
    interrupted = make_config(["swirl"], output_dir=str(tmp_path / "resumed"), **sections)
    _run(interrupted, callbacks=[StopAt(1)])
    resumed = _run(interrupted, resume_from_checkpoint=True)
    assert resumed[0][0] == straight[1][0]
    assert resumed[0][1] == pytest.approx(straight[1][1], abs=1e-6)
