"""EEPO: every group's second half is sampled from a scratch copy that took the unlearning step on the first half."""

from types import SimpleNamespace

import pytest
import torch

from stackrl import PluginError
from stackrl.policy import snapshots_of
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import train_steps
from stackrl_eepo import Eepo, EepoConfig
from stackrl_eepo.plugin import STAGE_COLUMN

TRAINER = {"max_steps": 1, "per_device_train_batch_size": 16, "num_generations": 4}


class TestConformance(PluginConformance):
    plugin_name = "eepo"
    refused_settings = [
        ({"objective": "likelihood"}, "eepo.objective: must be one of unlikelihood, ascent"),
        ({"learning_rate": 0.0}, "eepo.learning_rate: must be positive"),
        ({"steps": 0}, "eepo.steps: must be at least 1"),
        ({"entropy_threshold": -1.0}, "eepo.entropy_threshold: must be positive or null"),
        ({"entropy_window": 0}, "eepo.entropy_window: must be at least 1 step"),
    ]


def _record_rollout(config, by_hand=None):
    """Train one step; return the trainer and what the monitor saw of the rollout before the optimizer step: its
    Samples, each row's summed log-prob under the live policy and under the unlearned copy, and whether the copy
    equals ``by_hand(ctx, contexts, completion_ids)``, a scratch update made from the same live weights."""
    seen = {}

    def monitor(hook, plugin, kwargs, result):
        if hook != "generate_rollout" or result is None:
            return
        ctx = kwargs["ctx"]
        contexts = ctx.policy._token_ids(kwargs["prompts"])
        seen["samples"] = result
        snapshots = snapshots_of(ctx.policy._trainer)
        if Eepo.SNAPSHOT not in snapshots:
            return
        for model in ("policy", Eepo.SNAPSHOT):
            scores = ctx.score(contexts, result.completion_ids, model=model)
            seen[model] = (scores.logprobs * scores.mask).sum(1)
        second = [p for i, p in enumerate(kwargs["prompts"]) if result.columns[STAGE_COLUMN][i]]
        for model in ("policy", Eepo.SNAPSHOT):
            seen[f"{model} samples"] = [g.completion_ids for g in ctx.generate(second, model=model)]
        if by_hand is not None:
            by_hand(ctx, contexts, result.completion_ids)
            copy, hand = snapshots[Eepo.SNAPSHOT].own, snapshots["by_hand"].own
            seen["same_copy"] = all(torch.equal(copy[n], hand[n]) for n in copy)

    return train_steps(config, monitor=monitor), seen


def test_the_copy_unlearns_the_first_half_and_samples_the_second(make_config):
    """The copy is the live policy moved by the configured step on the first half's completions alone, read at the
    sampling temperature, and it makes them less likely; sampling greedily (top-k 1), the second half is what the
    copy writes, not what the live policy writes."""
    settings = {"learning_rate": 0.5, "objective": "ascent", "steps": 2}
    config = make_config(["eepo"], trainer={**TRAINER, "temperature": 0.9, "top_k": 1},
                         eepo={**settings, "entropy_threshold": None})

    def by_hand(ctx, contexts, completion_ids):
        first = [i for i in range(len(contexts)) if i % 4 < 2]
        ctx.scratch_update("by_hand", [contexts[i] for i in first], [completion_ids[i] for i in first],
                           temperature=0.9, **settings)

    _, seen = _record_rollout(config, by_hand)
    assert seen["same_copy"]
    samples = seen["samples"]
    stage = samples.columns[STAGE_COLUMN]
    assert stage == [0, 0, 1, 1] * 4
    first = torch.tensor(stage) == 0
    assert ((seen["policy"] - seen[Eepo.SNAPSHOT])[first] > 0).all(), "the step lowers every first-half sample"
    second = [c for c, s in zip(samples.completion_ids, stage) if s]
    assert second == seen[f"{Eepo.SNAPSHOT} samples"] != seen["policy samples"]
    assert seen["policy samples"] == [c for c, s in zip(samples.completion_ids, stage) if not s]


def test_a_policy_above_the_entropy_threshold_samples_both_halves_itself(make_config):
    config = make_config(["eepo"], trainer=TRAINER, eepo={"entropy_threshold": 1e-3})
    trainer, seen = _record_rollout(config)
    assert seen["samples"].columns[STAGE_COLUMN] == [0] * 16
    assert Eepo.SNAPSHOT not in snapshots_of(trainer)
    logged = [log for log in trainer.state.log_history if "eepo/unlearned" in log]
    assert logged[0]["eepo/unlearned"] == 0 and logged[0]["eepo/entropy_estimate"] > 1e-3

    below = make_config(["eepo"], trainer=TRAINER, eepo={"entropy_threshold": 1e3})
    _, seen = _record_rollout(below)
    assert seen["samples"].columns[STAGE_COLUMN] == [0, 0, 1, 1] * 4


def _scores_estimating(estimate):
    """What ``ctx.score`` gives for first halves whose sampled tokens each have -log p = ``estimate``."""
    return SimpleNamespace(logprobs=torch.full((2, 3), -estimate), mask=torch.ones(2, 3))


def _gate(plugin, estimates, logged):
    """The plugin's decision at each step whose first half gives these entropy estimates."""
    decisions = []
    for estimate in estimates:
        ctx = SimpleNamespace(sampling_temperature=1.0, log=logged.__setitem__,
                              score=lambda *_, e=estimate, **__: _scores_estimating(e))
        decisions.append(plugin._low_entropy(ctx, [], []))
    return decisions


def test_the_gate_opens_when_the_mean_of_the_last_steps_entropy_falls_below_the_threshold():
    """Estimates 0.6, 0.2, 0.2, 0.2 against the default 0.3: their 3-step means 0.6, 0.4, 0.33, 0.2 open the gate
    at the fourth step only, where one step's estimate alone opens it at the second; the window is carried
    through a checkpoint."""
    logged = {}
    assert _gate(Eepo(EepoConfig(entropy_window=1)), [0.6, 0.2], logged) == [False, True]
    plugin = Eepo(EepoConfig())
    assert _gate(plugin, [0.6, 0.2, 0.2], logged) == [False, False, False]
    assert logged["entropy_estimate"] == pytest.approx(0.2) and logged["entropy_mean"] == pytest.approx(1 / 3)
    resumed = Eepo(EepoConfig())
    resumed.load_state_dict(plugin.state_dict())
    # 0.4 alone would keep it closed; after the restored 0.2, 0.2 the mean is 0.27
    assert _gate(resumed, [0.4], logged) == [True] and logged["entropy_mean"] == pytest.approx(0.8 / 3)


def test_an_odd_group_is_refused(make_config):
    config = make_config(["eepo"], trainer={**TRAINER, "per_device_train_batch_size": 6, "num_generations": 3})
    with pytest.raises(PluginError, match="plugin 'eepo' at step 0: trainer.num_generations must be even"):
        train_steps(config)
