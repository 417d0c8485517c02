"""CADENCE's rules on hand-built inputs: DRIFT's mixture, COVA's beta, coverage, FTB's boost, CCD's partial credit
and LAP's bonus, the checks of a run, the state through a resume; then the host's conformance suite."""

import math

import pytest
import torch

from stackrl import ConfigError
from stackrl.plugin import RunFacts
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_cadence.drift import (
    cosine_beta,
    coverage,
    cova_beta,
    drift_advantages,
    entropy,
    forking_boost,
    forward_surrogate,
    log_ratio,
)
from stackrl_cadence.rewards import brevity_bonus, dense_rewards, number, proximity_credit

class TestConformance(PluginConformance):
    plugin_name = "cadence"
    # The reference model as the teacher: the test kit's tiny model has its own tokenizer, which the built-in
    # teachers do not share; DRIFT's whole path runs (the mechanism test runs it with a built-in teacher).
    plugin_settings = {"cadence": {"teacher": "reference"}, "trainer": {"beta": 0.04}}
    refused_settings = [
        ({"teacher": "policy"}, "must name a model other than the policy"),
        ({"absent": "maybe"}, "must be one of error, skip, not 'maybe'"),
        ({"drift_scale": -1.0}, "must be non-negative"),
        ({"weight_clip": 0.0}, "must be positive"),
        ({"beta_start": 1.5}, r"must lie in \[0, 1\]"),
        ({"beta_start": 0.2, "beta_end": 0.5}, r"must not exceed cadence.beta_start"),
        ({"gate": 1.0}, "must be below 1"),
        ({"coverage_decay": 1.0}, r"must lie in \[0, 1\)"),
        ({"anneal_steps": 0}, "must be at least 1"),
        ({"temperature": 0.0}, "must be positive"),
        ({"partial_credit": -0.5}, "must be non-negative"),
    ]


# -- DRIFT ------------------------------------------------------------------------------------------------------------

def test_cosine_beta_goes_from_start_to_end_and_holds():
    assert cosine_beta(0, 10, 1.0, 0.0) == 1.0
    assert cosine_beta(5, 10, 1.0, 0.0) == pytest.approx(0.5)
    assert cosine_beta(10, 10, 1.0, 0.2) == pytest.approx(0.2)
    assert cosine_beta(25, 10, 1.0, 0.2) == pytest.approx(0.2)


def test_cova_beta_is_the_cosine_beta_up_to_the_gate_then_shrinks_with_coverage():
    # gate 0.6, alpha_max 0.5: at coverage 0.8 the excess is (0.8 - 0.6) / 0.4 = 0.5, beta 0.9 * (1 - 0.25).
    assert cova_beta(0.9, 0.6, 0.6, 0.5, 0.0) == 0.9
    assert cova_beta(0.9, 0.3, 0.6, 0.5, 0.0) == 0.9
    assert cova_beta(0.9, None, 0.6, 0.5, 0.0) == 0.9
    assert cova_beta(0.9, 0.8, 0.6, 0.5, 0.0) == pytest.approx(0.675)
    assert cova_beta(0.9, 1.0, 0.6, 0.5, 0.0) == pytest.approx(0.45)
    assert cova_beta(0.9, 1.0, 0.6, 0.5, 0.5) == 0.5  # never below beta_end
    # Monotone: more coverage, smaller beta.
    betas = [cova_beta(1.0, c / 10, 0.5, 0.5, 0.0) for c in range(11)]
    assert betas == sorted(betas, reverse=True) and betas[5] == 1.0 and betas[10] == pytest.approx(0.5)


def test_coverage_is_the_teachers_top_k_mass_the_student_gives_more_than_tau():
    teacher = torch.tensor([0.5, 0.3, 0.15, 0.05]).log()
    student = torch.tensor([0.9, 0.0005, 0.0995, 0.0]).clamp_min(1e-12).log()
    # Top 3 of the teacher: tokens 0, 1, 2 with mass 0.95; the student covers 0 and 2 (0.0005 < tau = 1e-3).
    assert coverage(student, teacher, 3, 1e-3).item() == pytest.approx((0.5 + 0.15) / 0.95)
    assert coverage(student, teacher, 1, 1e-3).item() == pytest.approx(1.0)
    assert coverage(student, teacher, 3, 1e-4).item() == pytest.approx(1.0)


def test_entropy_in_nats():
    assert entropy(torch.full((4,), 0.25).log()).item() == pytest.approx(math.log(4))


def test_drift_is_the_mixture_of_the_reverse_log_ratio_and_the_self_normalised_weights():
    student = torch.tensor([[math.log(0.5), math.log(0.2), math.log(0.9)], [math.log(0.4), 0.0, 0.0]])
    teacher = torch.tensor([[math.log(0.25), math.log(0.4), math.log(0.9)], [math.log(0.8), 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    k = log_ratio(student, teacher, mask)
    assert k[0].tolist() == pytest.approx([math.log(2), math.log(0.5), 0.0])
    # w = exp(-k) = (0.5, 2, 1) on row 0, mean-one over its 3 tokens: 3 * w / 3.5; row 1's single token: 1.
    fwd = forward_surrogate(k, mask, clip=10.0)
    assert fwd[0].tolist() == pytest.approx([3 * 0.5 / 3.5, 3 * 2 / 3.5, 3 * 1 / 3.5], rel=1e-6)
    assert fwd[1].tolist() == pytest.approx([1.0, 0.0, 0.0], rel=1e-6)
    beta = 0.25
    drift = drift_advantages(k, mask, beta, clip=10.0)
    by_hand = [0.75 * -math.log(2) + 0.25 * 3 * 0.5 / 3.5, 0.75 * math.log(2) + 0.25 * 3 * 2 / 3.5, 0.25 * 3 / 3.5]
    assert drift[0].tolist() == pytest.approx(by_hand, rel=1e-6)
    assert drift[1].tolist() == pytest.approx([0.75 * math.log(2) + 0.25, 0.0, 0.0], rel=1e-6)
    # beta 0: the reverse KL's surrogate alone; beta 1: the forward one alone.
    assert torch.allclose(drift_advantages(k, mask, 0.0, 10.0), -k)
    assert torch.allclose(drift_advantages(k, mask, 1.0, 10.0), fwd)


def test_forward_weights_are_clipped_at_c():
    k = torch.tensor([[-5.0, 0.0]])  # exp(5) = 148 is clipped to 10
    fwd = forward_surrogate(k, torch.ones(1, 2), clip=10.0)
    assert fwd[0].tolist() == pytest.approx([2 * 10 / 11, 2 * 1 / 11], rel=1e-6)


def test_forking_boost_grows_with_teacher_entropy_up_to_the_reference():
    mask = torch.ones(1, 3)
    boost = forking_boost(torch.tensor([[0.0, 1.0, 3.0]]), mask, boost=0.5, reference=2.0)
    assert boost[0].tolist() == pytest.approx([1.0, 1.25, 1.5])


# -- CCD and LAP ------------------------------------------------------------------------------------------------------

def test_proximity_credit_decays_with_the_relative_distance():
    assert proximity_credit("43", "42", 0.5, 0.1) == pytest.approx(0.5 * math.exp(-1 / 4.2))
    assert proximity_credit("60", "42", 0.5, 0.1) == pytest.approx(0.5 * math.exp(-18 / 4.2))
    assert proximity_credit("3", "2", 0.5, 0.1) == pytest.approx(0.5 * math.exp(-1 / 0.2))
    assert proximity_credit("0", "0.5", 0.5, 0.1) == pytest.approx(0.5 * math.exp(-0.5 / 0.1))  # scale max(1, |ref|)
    assert proximity_credit("43", "42", 0.5, 0.1) > proximity_credit("45", "42", 0.5, 0.1)  # closer earns more
    assert proximity_credit(None, "42", 0.5, 0.1) == 0.0 and proximity_credit("x+1", "42", 0.5, 0.1) == 0.0
    assert number("1,234") == 1234.0 and number("nan") is None


def test_brevity_bonus_goes_to_the_shorter_right_completions_of_the_group():
    assert brevity_bonus([10, 20, 5, 40], [True, True, False, False], 0.1) == pytest.approx([0.05, 0.0, 0.0, 0.0])
    assert brevity_bonus([10, 20], [False, False], 0.1) == [0.0, 0.0]


def test_dense_rewards_of_two_groups_by_hand():
    completions = ["The answer is 42.", "The answer is 43.", "no answer here", "The answer is 42.",
                   "The answer is 7.", "The answer is 9."]
    references = ["42", "42", "42", "42", "7", None]
    lengths = [6, 6, 3, 12, 6, 6]
    rewards, beyond = dense_rewards(completions, references, lengths, 4, lambda c, a: c.endswith(f" {a}."),
                                    partial_credit=0.5, tolerance=0.1, brevity=0.1)
    assert rewards[:4] == pytest.approx([1.0 + 0.1 * (1 - 6 / 12), 0.5 * math.exp(-1 / 4.2), 0.0, 1.0])
    assert rewards[4] == 1.0 and rewards[5] is None  # alone right in its group: no bonus; no reference: unscored
    assert beyond == [True, True, False, False, False, False]


# -- checks and state -------------------------------------------------------------------------------------------------

def facts(**extra) -> RunFacts:
    base = dict(max_steps=30, group_size=4, groups_per_step=2, columns=("prompt", "answer"), builtin_columns=(),
                chat=False, reference=False, source="arithmetic", components=("cadence",))
    return RunFacts(**{**base, **extra})


def test_a_run_without_the_teacher_is_refused_or_noted_as_absent_says():
    with pytest.raises(ConfigError, match="cadence.teacher: 'teacher' names no model of this run"):
        make_plugin("cadence").check_run(facts())
    assert make_plugin("cadence").check_run(facts(aux_models=("teacher",), max_steps=300)) is None
    notes = make_plugin("cadence", absent="skip").check_run(facts())
    assert any("DRIFT is left out" in note for note in notes)
    assert any("anneal_steps" in note for note in make_plugin("cadence").check_run(facts(aux_models=("teacher",))))
    assert make_plugin("cadence", drift_scale=0.0).check_run(facts(max_steps=300)) is None  # no teacher needed
    with pytest.raises(ConfigError, match="cadence.answer_column"):
        make_plugin("cadence", absent="skip").check_run(facts(columns=("prompt",)))


def test_coverage_average_survives_a_resume(tmp_path):
    plugin = make_plugin("cadence", gate=0.5, alpha_max=0.5, anneal_steps=10)
    plugin.coverage_ema = 0.9
    torch.save(plugin.state_dict(), tmp_path / "state.pt")
    resumed = make_plugin("cadence", gate=0.5, alpha_max=0.5, anneal_steps=10)
    assert resumed.beta(0) == (1.0, 1.0)  # no coverage yet: the cosine schedule's beta
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    assert resumed.coverage_ema == 0.9
    assert resumed.beta(0) == plugin.beta(0) == (pytest.approx(1.0 - 0.5 * 0.8), 1.0)
