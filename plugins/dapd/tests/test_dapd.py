"""DAPD: its loss is the six anchored, clipped forward KLs written out by hand on the built-in model's logits."""

import math

import pytest
import torch

from stackrl import Rollout
from stackrl.policy import PolicyAccess
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_dapd import DapdConfig, clipped_forward_kl, dapd_loss, dapd_terms, reference_ids, view_contexts

# The built-in model's reference layout, with the plugin's field: the worked text, then the question.
TEMPLATE = "{reference}\n\n{prompt}"


class TestConformance(PluginConformance):
    plugin_name = "dapd"
    plugin_settings = {"dapd": {"teacher_template": TEMPLATE}}
    refused_settings = [
        ({"teacher": "policy"}, "must be one of initial, reference, not 'policy'"),
        ({"snapshot_interval": 0}, "must be at least 1, not 0"),
        ({"component_clip": 0.0}, "must be positive"),
        ({"privileged_reference": -1.0}, "must be non-negative"),
        ({"teacher_template": "{solution}\n\n{prompt}"}, "must contain {reference}"),
        ({"max_reference_tokens": 0}, "must be at least 1"),
    ]


def test_clipped_forward_kl_clips_each_vocabulary_term_above():
    anchor = torch.tensor([[0.5, 0.5, 0.0]]).log()
    student = torch.tensor([[0.9, 0.05, 0.05]]).log()
    # terms q_v log(q_v / p_v): 0.5 ln(0.5/0.9) = -0.29389, 0.5 ln(10) = 1.15129, 0 (q = 0)
    exact = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(10.0)
    assert clipped_forward_kl(student, anchor, None).item() == pytest.approx(exact, rel=1e-5)
    assert clipped_forward_kl(student, anchor, 0.05).item() == pytest.approx(0.5 * math.log(0.5 / 0.9) + 0.05, rel=1e-5)
    # the direction: KL(anchor || student), not KL(student || anchor)
    assert clipped_forward_kl(anchor.clamp_min(-30), student, None).item() != pytest.approx(exact, rel=1e-2)


def test_reference_ids_end_with_eos_and_are_cut(built_in_trainer):
    tokenizer = built_in_trainer(["dapd"], dapd={"teacher_template": TEMPLATE}).processing_class
    plain = tokenizer("2 + 3 = 5", add_special_tokens=False)["input_ids"]
    assert reference_ids(tokenizer, ["2 + 3 = 5"], [7, 8], None) == [plain + [7]]
    assert reference_ids(tokenizer, ["2 + 3 = 5"], [7], 2) == [plain[:2]]


def _rollout(tokenizer):
    prompts = ["What is 2 + 3?\n", "What is 4 * 2?\n"]
    completions = ["2 + 3 = 6\nThe answer is 6.", "4 * 2 = 8\nThe answer is 8."]
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    return Rollout(
        prompts=prompts, completions=completions,
        prompt_ids=[encode(p) for p in prompts], completion_ids=[encode(c) for c in completions],
        columns={"solution": ["2 + 3 = 5\nThe answer is 5.", "4 * 2 = 8\nThe answer is 8."], "answer": ["5", "8"]},
        group_size=2,
    )


def test_views_carry_the_other_completion_in_cross_and_their_own_in_self():
    rollout = Rollout(prompts=["Q"], completions=["y"], prompt_ids=[[1, 2]], completion_ids=[[3]],
                      columns={"solution": ["s"]}, group_size=1)
    view = lambda completion, name: view_contexts(rollout, completion, name, TEMPLATE, "solution")  # noqa: E731
    assert view("rollout", "none") == view("reference", "none") == [[1, 2]]
    assert view("rollout", "cross") == view("reference", "self") == ["s\n\nQ"]
    assert view("reference", "cross") == ["y\n\nQ"]
    assert view("rollout", "self") == [[1, 2, 3]]


SAMPLING_TEMPERATURE = 1.5
CLIP = 0.05


def perturb(model, scale: float, seed: int):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=generator))


@pytest.fixture
def three_models(built_in_trainer):
    """The built-in trainer whose base copy, refreshed snapshot and live policy are three different models."""
    trainer = built_in_trainer(["dapd"], dapd={"teacher_template": TEMPLATE},
                               trainer={"temperature": SAMPLING_TEMPERATURE})
    policy = PolicyAccess(trainer, sharded=False, model=trainer.model)
    policy.update_snapshot("dapd.initial")
    perturb(trainer.model, 0.02, seed=1)
    policy.update_snapshot("dapd.snapshot")
    perturb(trainer.model, 0.02, seed=2)
    return trainer, policy


MODELS = {"snapshot": "dapd.snapshot", "base": "dapd.initial"}
TERM_NAMES = ("entangled_rollout", "inference_reference", "privileged_rollout",
              "entangled_reference", "inference_rollout", "privileged_reference")


def computed_and_by_hand(three_models, dapd_by_hand, **settings):
    trainer, policy = three_models
    rollout = _rollout(trainer.processing_class)
    config = DapdConfig(teacher_template=TEMPLATE, **settings)
    references = reference_ids(trainer.processing_class, rollout.columns["solution"], policy.eos_token_ids, None)
    terms = dapd_terms(policy, rollout, references, config, models=MODELS, grad=False)
    clip = math.inf if config.component_clip is None else config.component_clip
    temperature = SAMPLING_TEMPERATURE if config.temperature is None else config.temperature

    cache = {}

    def hand(weights, **changes):
        options = dict(clip=clip, temperature=temperature, snapshot="dapd.snapshot", base="dapd.initial", cache=cache)
        return dapd_by_hand(trainer, rollout, references, weights, **{**options, **changes}).item()

    return terms, dapd_loss(terms, config).item(), hand, config.weights()


def test_loss_is_both_sources_and_both_paths_written_out_by_hand(three_models, dapd_by_hand):
    terms, got, hand, weights = computed_and_by_hand(three_models, dapd_by_hand)
    assert set(terms) == set(TERM_NAMES)
    expected = hand(weights)
    assert got == pytest.approx(expected, rel=1e-5)
    # What the comparison tells apart: either source or any one term left out, the two anchors' weights swapped,
    # no clip, all give other losses.
    for dropped in TERM_NAMES:
        assert hand({n: w for n, w in weights.items() if n != dropped}) != pytest.approx(expected, rel=1e-3), dropped
    assert hand(weights, snapshot="dapd.initial", base="dapd.snapshot") != pytest.approx(expected, rel=1e-3)
    assert hand(weights, clip=math.inf) != pytest.approx(expected, rel=1e-3)


def test_weights_pick_terms_and_a_zero_weight_is_not_computed(three_models, dapd_by_hand):
    weights = dict.fromkeys(TERM_NAMES, 0.0) | {"privileged_reference": 0.7, "inference_rollout": 0.2}
    terms, got, hand, _ = computed_and_by_hand(three_models, dapd_by_hand, **weights)
    assert set(terms) == {"privileged_reference", "inference_rollout"}
    assert got == pytest.approx(hand(weights), rel=1e-5)


def test_no_clip_and_an_explicit_temperature(three_models, dapd_by_hand):
    _, got, hand, weights = computed_and_by_hand(three_models, dapd_by_hand, component_clip=None, temperature=1.0)
    assert got == pytest.approx(hand(weights), rel=1e-5)
    assert got != pytest.approx(hand(weights, clip=CLIP), rel=1e-3)
    assert got != pytest.approx(hand(weights, temperature=SAMPLING_TEMPERATURE), rel=1e-3)


def test_gradient_descends_the_loss(three_models):
    trainer, policy = three_models
    rollout = _rollout(trainer.processing_class)
    config = DapdConfig(teacher_template=TEMPLATE)
    references = reference_ids(trainer.processing_class, rollout.columns["solution"], policy.eos_token_ids, None)
    optimizer = torch.optim.SGD(trainer.model.parameters(), lr=0.5)
    values = []
    for _ in range(3):
        loss = dapd_loss(dapd_terms(policy, rollout, references, config, models=MODELS, grad=True), config)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        values.append(loss.item())
    assert values[-1] < values[0]


class Steps:
    """A step context that records the snapshots it is asked to take."""

    def __init__(self, step):
        self.step, self.taken = step, []

    def update_snapshot(self, name, decay=0.0, *, checkpoint=False):
        self.taken.append((name, decay, checkpoint))


@pytest.mark.parametrize("teacher", ["initial", "reference"])
def test_snapshots_are_taken_at_the_start_and_refreshed_every_interval(teacher):
    plugin = make_plugin("dapd", teacher=teacher, snapshot_interval=3)
    start = Steps(0)
    plugin.train_begin(start)
    expected = [("dapd.snapshot", 0.0, True)] + ([("dapd.initial", 0.0, True)] if teacher == "initial" else [])
    assert start.taken == expected
    assert plugin.models["base"] == ("dapd.initial" if teacher == "initial" else "reference")
    resumed = Steps(5)
    plugin.train_begin(resumed)
    assert resumed.taken == []  # checkpointed copies come back on resume
    refreshed = []
    for step in range(1, 8):
        ctx = Steps(step)
        plugin.post_step(ctx)
        refreshed += [step] * len(ctx.taken)
        assert all(name == "dapd.snapshot" for name, _, _ in ctx.taken)
    assert refreshed == [3, 6]
