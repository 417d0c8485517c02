"""A resumed run continues exactly: same parameters and the same plugin state as an uninterrupted one."""

import torch
from transformers import TrainerCallback

from stackrl.testing.fixtures import train_steps

PLUGINS = ["digit_reward", "step_counter"]


class StopAt(TrainerCallback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_training_stop = True
            control.should_save = True


def parameters(trainer):
    return {name: p.detach().clone() for name, p in trainer.model.named_parameters()}


def test_six_steps_equal_three_plus_resume_plus_three(make_config, tmp_path):
    saving = {"save_strategy": "steps", "save_steps": 3, "max_steps": 6}
    straight = train_steps(make_config(PLUGINS, trainer=saving, output_dir=str(tmp_path / "straight")))

    interrupted = make_config(PLUGINS, trainer=saving, output_dir=str(tmp_path / "resumed"))
    first = train_steps(interrupted, callbacks=[StopAt(3)])
    assert first.state.global_step == 3
    resumed = train_steps(interrupted, resume=True)

    assert resumed.state.global_step == 6
    want, got = parameters(straight), parameters(resumed)
    assert all(torch.equal(want[name], got[name]) for name in want)
    want_state = straight.plugins.plugins["step_counter"].state_dict()
    assert resumed.plugins.plugins["step_counter"].state_dict() == want_state
    assert want_state["steps"] == 6 and len(want_state["reward_sums"]) == 6
