"""DAPD on the built-in model, trained: the loss still equals its hand computation once the three models differ,
and a short run brings the policy's matched-information views together while accuracy holds."""

from pathlib import Path

import pytest

from stackrl.testing.fixtures import train_steps
from stackrl.testing.heldout import sampling_noise
from stackrl.testing.repository import load_script
from stackrl_dapd import DapdConfig, dapd_loss, dapd_terms, reference_ids

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"
TEMPLATE = "{reference}\n\n{prompt}"


def test_after_training_the_loss_is_still_its_hand_computation(make_config, dapd_by_hand):
    """Five steps with a refresh every three: the base (step 0), the snapshot (step 3) and the policy (step 5) are
    three trained-apart models, so an anchor swapped for the other, a term's context carrying the wrong text, or
    a source left out, each gives another value."""
    config = make_config(["dapd"], model={"name_or_path": "stackrl/arith-tiny"}, rewards={"exact_match": 0.0},
                         dapd={"teacher_template": TEMPLATE, "snapshot_interval": 3},
                         trainer={"max_completion_length": 32, "num_generations": 4, "per_device_train_batch_size": 8,
                                  "learning_rate": 1e-3, "temperature": 1.3})
    trainer = train_steps(config, steps=5)
    mechanism = load_script(BENCHMARK)
    policy = trainer._shared_policy
    rollout = mechanism.heldout_rollout(policy, 6, seed=7)
    plugin = trainer.plugins.plugins["dapd"]
    references = reference_ids(trainer.processing_class, rollout.columns["solution"], policy.eos_token_ids, None)
    got = dapd_loss(dapd_terms(policy, rollout, references, plugin.config, models=plugin.models, grad=False),
                    plugin.config).item()
    weights = DapdConfig(teacher_template=TEMPLATE).weights()
    options, cache = dict(clip=0.05, temperature=1.3, snapshot="dapd.snapshot", base="dapd.initial"), {}
    hand = lambda **kw: dapd_by_hand(trainer, rollout, references, weights, cache=cache,  # noqa: E731
                                     **{**options, **kw}).item()
    assert got == pytest.approx(hand(), rel=1e-4)
    assert hand(snapshot="dapd.initial", base="dapd.snapshot") != pytest.approx(got, rel=1e-3)


def test_a_short_run_brings_the_views_together_and_keeps_accuracy():
    """The mechanism on the built-in model, short (the full figures come from benchmarks/mechanism.py)."""
    before, after = load_script(BENCHMARK).run(seed=0, steps=8, heldout=48)
    assert after["gap"] < before["gap"], (before, after)
    assert after["accuracy"] >= before["accuracy"] - sampling_noise(before["accuracy"], 48), (before, after)
