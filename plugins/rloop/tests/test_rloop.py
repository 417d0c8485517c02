"""RLoop: each iteration collects the distinct successes of hard groups, then restarts from its start fine-tuned on
them; the fine-tuned start begins the next iteration, across a resume too."""

import json
from pathlib import Path

import pytest
import torch

from stackrl import ConfigError, StepContext
from stackrl.plots import METRICS_FILE
from stackrl.policy import snapshots_of
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import StopAt, train_steps
from stackrl.testing.heldout import written_rollout
from stackrl_rloop import Rloop, RloopConfig
from stackrl_rloop.plugin import START

RIGHT, WRONG = "4 * 2 = 8\n8 + 3 = 11\nThe answer is 11.", "4 * 2 = 8\n8 + 3 = 12\nThe answer is 12."
OTHER_RIGHT = "4 * 2 = 8\n8 + 3 = 11\nSo the answer is 11."


# The tiny random model never answers right: a trajectory "succeeds" here on the test reward's digit share.
SUCCESS = {"reward": "digit_reward", "success_threshold": 0.05, "max_pass_rate": 1.0}


class TestConformance(PluginConformance):
    plugin_name = "rloop"
    plugin_settings = {"rloop": {"iteration_steps": 1}}


def _collect(plugin, tokenizer, completions, group_size=4):
    rollout = written_rollout(tokenizer, ["(4 * 2) + 3"] * len(completions), completions, group_size=group_size)
    logged = {}
    ctx = StepContext(step=1, tokenizer=tokenizer, policy=None, _log=logged.__setitem__, _plugin="rloop",
                      rollout=rollout)
    plugin._collect(ctx)
    return rollout, logged


def test_only_distinct_successes_of_hard_groups_are_kept(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    plugin = Rloop(RloopConfig(max_pass_rate=0.5))
    # group 1: 3 of 4 right (easy, above 0.5: nothing kept); group 2: 2 of 4 right, the same text twice: kept once
    rollout, logged = _collect(plugin, tokenizer, [RIGHT, RIGHT, OTHER_RIGHT, WRONG, RIGHT, WRONG, RIGHT, WRONG])
    assert plugin.buffer == [(rollout.prompt_ids[4], rollout.completion_ids[4])]
    assert logged == {"rloop/kept": 1.0}
    # the same success in a later step is not kept again; a new one is
    _collect(plugin, tokenizer, [RIGHT, WRONG, WRONG, WRONG, OTHER_RIGHT, WRONG, WRONG, WRONG])
    assert [tokenizer.decode(c) for _, c in plugin.buffer] == [RIGHT, OTHER_RIGHT]
    everything = Rloop(RloopConfig(max_pass_rate=1.0))
    _collect(everything, tokenizer, [RIGHT, RIGHT, OTHER_RIGHT, WRONG])
    assert len(everything.buffer) == 2


def test_each_iteration_restarts_from_its_start_and_the_result_starts_the_next(make_config):
    """With a vanishing RFT learning rate the phase leaves the start as it was: after each iteration the live
    weights are back at the iteration's start (within Adam's step), not where RL took them."""
    config = make_config(["digit_reward", "rloop"], rloop={"iteration_steps": 2, "rft_learning_rate": 1e-9, **SUCCESS},
                         trainer={"max_steps": 4, "learning_rate": 0.02})
    starts = []

    def monitor(hook, plugin, kwargs, result):
        if hook in ("train_begin", "post_step"):
            trainer = kwargs["ctx"].policy._trainer
            starts.append({n: p.detach().clone() for n, p in trainer.model.named_parameters()})

    trainer = train_steps(config, monitor=monitor)
    begin, after_first, after_second = starts[0], starts[2], starts[4]
    for name, weight in begin.items():
        torch.testing.assert_close(after_first[name], weight, atol=1e-7, rtol=0, msg=name)
        torch.testing.assert_close(after_second[name], weight, atol=1e-7, rtol=0, msg=name)
    assert any((starts[1][n] - begin[n]).abs().max() > 1e-4 for n in begin), "RL moved the weights in between"
    assert torch.equal(snapshots_of(trainer)[START].own["model.norm.weight"], after_second["model.norm.weight"])
    records = map(json.loads, (Path(trainer.args.output_dir) / METRICS_FILE).read_text().splitlines())
    phases = [r for r in records if "phase/rft/pairs" in r]
    assert [r["step"] for r in phases] == [2, 4]
    assert trainer.plugins.plugins["rloop"].iteration == 2 and trainer.plugins.plugins["rloop"].buffer == []


def test_a_run_resumed_inside_an_iteration_matches_an_uninterrupted_one(make_config, tmp_path):
    sections = dict(rloop={"iteration_steps": 2, "rft_learning_rate": 0.01, **SUCCESS},
                    trainer={"save_strategy": "steps", "save_steps": 3, "max_steps": 5})
    plugins = ["digit_reward", "rloop"]
    straight = train_steps(make_config(plugins, output_dir=str(tmp_path / "straight"), **sections))
    assert straight.plugins.plugins["rloop"].buffer, "the last iteration kept successes, carried across the resume"
    config = make_config(plugins, output_dir=str(tmp_path / "resumed"), **sections)
    train_steps(config, callbacks=[StopAt(3)])
    resumed = train_steps(config, resume=True)
    want = dict(straight.model.named_parameters())
    assert all(torch.equal(p, want[n]) for n, p in resumed.model.named_parameters())
    assert resumed.plugins.plugins["rloop"].state_dict() == straight.plugins.plugins["rloop"].state_dict()


@pytest.mark.parametrize("settings, message", [
    ({"iteration_steps": 0}, "rloop.iteration_steps: must be at least 1"),
    ({"max_pass_rate": 0.0}, r"rloop.max_pass_rate: must lie in \(0, 1\]"),
    ({"rft_learning_rate": 0.0}, "rloop.rft_learning_rate: must be positive"),
    ({"rft_epochs": 0}, "rloop.rft_epochs: must be at least 1"),
])
def test_settings_no_run_could_use_are_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        Rloop(RloopConfig(**settings))
