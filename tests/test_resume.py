"""A resumed run continues exactly: same parameters and the same plugin state as an uninterrupted one."""

import pytest
import torch

from stackrl.testing.fixtures import StopAt, train_steps

PLUGINS = ["digit_reward", "step_counter"]


def parameters(trainer):
    return {name: p.detach().clone() for name, p in trainer.model.named_parameters()}


def same_parameters(a, b) -> bool:
    want, got = parameters(a), parameters(b)
    return all(torch.equal(want[name], got[name]) for name in want)


# One prompt a step. 32 prompts: 6 steps straight against 3 + resume + 3, inside the first epoch. 4 prompts: epochs
# of 4 steps, 8 straight against 5 + resume + 3, so the resumed run must replay the data order of an epoch it began
# after the interruption.
@pytest.mark.parametrize("prompts, stop, total", [(32, 3, 6), (4, 5, 8)])
def test_a_resumed_run_continues_exactly(make_config, tmp_path, prompts, stop, total):
    saving = {"save_strategy": "steps", "save_steps": stop, "max_steps": total}
    data = {"size": prompts}
    straight = train_steps(make_config(PLUGINS, trainer=saving, data=data, output_dir=str(tmp_path / "straight")))

    interrupted = make_config(PLUGINS, trainer=saving, data=data, output_dir=str(tmp_path / "resumed"))
    first = train_steps(interrupted, callbacks=[StopAt(stop)])
    assert first.state.global_step == stop
    resumed = train_steps(interrupted, resume=True)

    assert resumed.state.global_step == total
    assert same_parameters(straight, resumed)
    want_state = straight.plugins.plugins["step_counter"].state_dict()
    assert resumed.plugins.plugins["step_counter"].state_dict() == want_state
    assert want_state["steps"] == total and len(want_state["reward_sums"]) == total
