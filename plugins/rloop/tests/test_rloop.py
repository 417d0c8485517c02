"""RLoop: each iteration collects the distinct successes of hard groups, then restarts from its start fine-tuned on
them; the fine-tuned start begins the next iteration, across a resume too."""

import json
import math
from pathlib import Path

import pytest
import torch

from stackrl import StepContext
from stackrl.plots import METRICS_FILE
from stackrl.policy import snapshots_of
from stackrl.policy_ops import restore_weights, supervised_phase
from stackrl.run import build_trainer
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import StopAt, train_steps
from stackrl.testing.heldout import completion_logits, recipe_config, written_rollout
from stackrl_rloop import Rloop, RloopConfig
from stackrl_rloop.plugin import START

RIGHT, WRONG = "4 * 2 = 8\n8 + 3 = 11\nThe answer is 11.", "4 * 2 = 8\n8 + 3 = 12\nThe answer is 12."
OTHER_RIGHT = "4 * 2 = 8\n8 + 3 = 11\nSo the answer is 11."
RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "rloop-cpu.yaml"


# The tiny random model never answers right: a trajectory "succeeds" here on the test reward's digit share.
SUCCESS = {"reward": "digit_reward", "success_threshold": 0.05, "max_pass_rate": 1.0}


class TestConformance(PluginConformance):
    plugin_name = "rloop"
    plugin_settings = {"rloop": {"iteration_steps": 1}}
    refused_settings = [
        ({"iteration_steps": 0}, "rloop.iteration_steps: must be at least 1"),
        ({"max_pass_rate": 0.0}, r"rloop.max_pass_rate: must lie in \(0, 1\]"),
        ({"rft_learning_rate": 0.0}, "rloop.rft_learning_rate: must be positive"),
        ({"rft_epochs": 0}, "rloop.rft_epochs: must be at least 1"),
    ]


def _weights(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


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
    settings = {"iteration_steps": 2, "rft_learning_rate": 1e-9, "rft_epochs": 3, "rft_batch_size": 3, **SUCCESS}
    config = make_config(["digit_reward", "rloop"], rloop=settings, trainer={"max_steps": 4, "learning_rate": 0.02})
    starts = []

    def monitor(hook, plugin, kwargs, result):
        if hook in ("train_begin", "post_step"):
            starts.append(_weights(kwargs["ctx"].policy._trainer.model))

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
    # rft_epochs passes over the buffer in batches of rft_batch_size pairs
    assert all(r["phase/rft/optimizer_steps"] == 3 * math.ceil(r["phase/rft/pairs"] / 3) > 0 for r in phases), phases
    assert trainer.plugins.plugins["rloop"].iteration == 2 and trainer.plugins.plugins["rloop"].buffer == []


def test_each_phase_starts_from_the_start_the_iteration_before_ended_with(make_config):
    """Two one-step iterations with a real RFT learning rate: each phase restores the snapshot holding the weights
    the iteration before ended with (the first: the run's initial weights), not the weights RL reached, and not
    the first start again. The start the phase fine-tuned is what the next iteration samples from."""
    settings = {"iteration_steps": 1, "rft_learning_rate": 0.05, **SUCCESS}
    config = make_config(["digit_reward", "rloop"], rloop=settings, trainer={"max_steps": 2, "learning_rate": 0.02})
    ended = []  # the live weights after train_begin and after each iteration's phase: each iteration's start
    restored = []  # (the snapshot each phase restores, what it held, the live weights RL reached)

    def monitor(hook, plugin, kwargs, result):
        if hook in ("train_begin", "post_step"):
            ended.append(_weights(trainer.model))

    def watched_phase(plugin, name, contexts, completion_ids, restore=None, **options):  # the host's, watched
        held = {n: p.clone() for n, p in snapshots_of(trainer)[restore].own.items()} if restore else None
        restored.append((restore, held, _weights(trainer.model)))
        return phase(plugin, name, contexts, completion_ids, restore=restore, **options)

    trainer = build_trainer(config, monitor=monitor)
    phase, trainer._supervised_phase = trainer._supervised_phase, watched_phase
    trainer.train()
    assert [name for name, _, _ in restored] == [START, START]
    for iteration, (_, held, reached) in enumerate(restored):
        start = ended[iteration]
        assert all(torch.equal(held[n], start[n]) for n in start), f"phase {iteration + 1} restored another start"
        assert any(not torch.equal(reached[n], start[n]) for n in start), "RL moved the weights before the phase"
    assert any(not torch.equal(ended[1][n], ended[0][n]) for n in ended[0]), "the first phase fine-tuned its start"


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


def _hard_pairs(rollouts, settings: RloopConfig) -> tuple[list, list]:
    """Worked out here, apart from the plugin: the distinct right and wrong (prompt, completion) pairs of the groups
    at most ``max_pass_rate`` right, in the order they were sampled."""
    right, wrong = [], []
    for rollout in rollouts:
        correct = rollout.rewards[settings.reward] >= settings.success_threshold
        hard = correct.view(-1, rollout.group_size).double().mean(1) <= settings.max_pass_rate
        for i in torch.nonzero(hard[rollout.group_index]).flatten().tolist():
            pair = (list(rollout.prompt_ids[i]), list(rollout.completion_ids[i]))
            side = right if correct[i] else wrong
            if pair not in side:
                side.append(pair)
    return right, wrong


def _mean_logprob(model, pairs) -> float:
    """The mean over pairs of the completion's token-mean log-probability: what RFT's loss lowers."""
    total = 0.0
    for context, completion in pairs:
        logprobs = torch.log_softmax(completion_logits(model, context, completion), -1)
        total += logprobs.gather(1, torch.tensor(completion)[:, None]).mean().item()
    return total / len(pairs)


@pytest.mark.mechanism
def test_the_next_start_is_the_old_start_fine_tuned_on_the_successes_of_hard_groups(tmp_path):
    """One iteration of the CPU recipe on the built-in model (3 steps of 8 problems x 8 samples): the phase gets the
    distinct successes of the groups at most half right and nothing else; the new start is the old start, not the
    weights RL reached, fine-tuned on them; and it prefers those successes over the same groups' failures more
    than the old start did."""
    config = recipe_config(RECIPE, plugins=True, seed=0, steps=3, output_dir=tmp_path,
                           overrides=["trainer.disable_tqdm=true", "rloop.iteration_steps=3"])
    settings = config.plugin_configs["rloop"]
    seen = {"rollouts": []}

    def monitor(hook, plugin, kwargs, result):
        if hook == "train_begin":
            seen["old"] = _weights(kwargs["ctx"].policy._trainer.model)
        elif hook == "post_step":
            seen["rollouts"].append(kwargs["ctx"].rollout)

    trainer = build_trainer(config, monitor=monitor)
    phase = trainer._supervised_phase

    def watched_phase(plugin, name, contexts, completion_ids, **options):  # the host's phase, its input kept
        seen["reached"], seen["pairs"] = _weights(trainer.model), list(zip(contexts, completion_ids))
        return phase(plugin, name, contexts, completion_ids, **options)

    trainer._supervised_phase = watched_phase
    trainer.train()
    model, new, old, reached = trainer.model, _weights(trainer.model), seen["old"], seen["reached"]
    right, wrong = _hard_pairs(seen["rollouts"], settings)
    strays = sum(pair not in right for pair in seen["pairs"])
    assert seen["pairs"] == right, (f"the phase got {len(seen['pairs'])} pairs, {strays} of them not a distinct "
                                    f"success of a hard group, for the {len(right)} the rollouts hold")
    assert len(right) >= 5, "too few hard successes for a measurement"
    assert torch.equal(snapshots_of(trainer)[START].own["model.norm.weight"], new["model.norm.weight"])

    # RL moved the weights, and the phase started again from the old start: the host's fine-tuning replayed there on
    # the same pairs gives the new start (to 1e-6; bitwise on a CPU); from the weights RL reached it would not.
    moved = torch.cat([(reached[n] - old[n]).flatten() for n in old]).norm().item()
    restore_weights(model, old)
    supervised_phase(trainer, trainer._shared_policy, "replay", [c for c, _ in right], [k for _, k in right],
                     learning_rate=settings.rft_learning_rate, epochs=settings.rft_epochs,
                     batch_size=settings.rft_batch_size)
    off = max((p - new[n]).abs().max().item() for n, p in model.named_parameters())
    print(f"RL moved the weights {moved:.3f} (L2); the replay is {off:.1e} off the new start")
    assert moved > 0.05 and off < 1e-6, (moved, off)

    # What the phase taught: the hard groups' successes rise, and rise over those groups' failures.
    figures = {}
    for label, weights in (("old", old), ("reached", reached), ("new", new)):
        restore_weights(model, weights)
        figures[label] = (_mean_logprob(model, right), _mean_logprob(model, wrong))
    print({label: f"right {r:.4f} wrong {w:.4f}" for label, (r, w) in figures.items()})
    (old_right, old_wrong), (new_right, new_wrong) = figures["old"], figures["new"]
    assert new_right > old_right + 0.01 and new_right - new_wrong > old_right - old_wrong + 0.01, figures


