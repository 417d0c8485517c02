"""beta-OPSD: the target is the logit mix of reference and teacher that beta selects, the divergence runs from the
student to it, and the return-to-go makes the gradient that of the whole completion's divergence."""

import itertools

import pytest
import torch

from stackrl import ConfigError, LossContext, Rollout
from stackrl.blocks.teacher import forward_kl, reverse_kl, teacher_prompts
from stackrl.policy import _SNAPSHOTS
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import train_steps
from stackrl.testing.heldout import completion_logits, written_rollout
from stackrl_betaopsd import BetaOpsd, BetaOpsdConfig, target_divergence, trajectory_divergence


class TestConformance(PluginConformance):
    plugin_name = "betaopsd"
    plugin_settings = {"betaopsd": {"teacher_template": REFERENCE_TEMPLATE}}


# -- the return-to-go, on a tabular policy whose every completion can be enumerated ------------------------------

V = 3  # completions are two tokens from a vocabulary of three


def _tabular(seed):
    """First-token logits (V,) and second-token logits given the first (V, V)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(V, generator=generator) * 1.5, torch.randn(V, V, generator=generator) * 1.5


def _completions(first, second):
    """Every completion (a, b) with its probability and its packed (2, V) next-token log-probs."""
    for a, b in itertools.product(range(V), repeat=2):
        logps = torch.stack([first.log_softmax(-1), second[a].log_softmax(-1)])
        yield (a, b), logps[0, a].exp() * logps[1, b].exp(), logps


def _exact_gradient(divergence):
    """d/dtheta of E_{y ~ student}[D_0 + D_1], summed over the completions exactly."""
    first, second = (t.clone().requires_grad_(True) for t in _tabular(0))
    target_first, target_second = _tabular(1)
    total = 0.0
    for (a, b), probability, logps in _completions(first, second):
        target = torch.stack([target_first.log_softmax(-1), target_second[a].log_softmax(-1)])
        total = total + probability * divergence(logps, target).sum()
    total.backward()
    return first.grad, second.grad


def _estimated_gradient(**options):
    """The expectation over completions of the gradient of trajectory_divergence's sum, each weighted by its
    (detached) probability: what sampling completions and averaging the loss estimates."""
    first, second = (t.clone().requires_grad_(True) for t in _tabular(0))
    target_first, target_second = _tabular(1)
    total = 0.0
    for (a, b), probability, logps in _completions(first, second):
        target = torch.stack([target_first.log_softmax(-1), target_second[a].log_softmax(-1)])
        per_token = trajectory_divergence(logps, target, torch.tensor([a, b]), [2], **options)
        total = total + probability.detach() * per_token.sum()
    total.backward()
    return first.grad, second.grad


@pytest.mark.parametrize("divergence", ["reverse_kl", "forward_kl"])
def test_return_to_go_gives_the_gradient_of_the_whole_completions_divergence(divergence):
    exact = _exact_gradient({"reverse_kl": reverse_kl, "forward_kl": forward_kl}[divergence])
    estimated = _estimated_gradient(divergence=divergence)
    for got, want in zip(estimated, exact):
        assert torch.allclose(got, want, atol=1e-6)
    # Token by token, the first token's gradient misses what it does to the second state's divergence.
    token_level = _estimated_gradient(divergence=divergence, return_to_go=False)
    assert not torch.allclose(token_level[0], exact[0], atol=1e-3)


def test_the_return_to_go_adds_gradient_but_no_value():
    student = torch.log_softmax(torch.randn(5, V), -1)
    target = torch.log_softmax(torch.randn(5, V), -1)
    tokens, lengths = torch.tensor([0, 2, 1, 1, 0]), [3, 2]
    assert torch.allclose(trajectory_divergence(student, target, tokens, lengths), reverse_kl(student, target))
    assert torch.allclose(trajectory_divergence(student, target, tokens, lengths, divergence="forward_kl"),
                          forward_kl(student, target))


def test_the_return_to_go_credits_each_token_with_the_later_tokens_divergence_only():
    """On one sampled completion: the added gradient at token t is G_t times that of log student_t(y_t), G_t the
    sum of D over the later tokens (0 at the last). A G_t that counted D_t too has the same expectation (D_t does
    not depend on y_t), so only the per-sample gradient tells the two apart."""
    logits = torch.randn(3, V, generator=torch.Generator().manual_seed(2), requires_grad=True)
    target = torch.log_softmax(torch.randn(3, V, generator=torch.Generator().manual_seed(3)), -1)
    tokens = torch.tensor([2, 0, 1])
    student = logits.log_softmax(-1)
    added = trajectory_divergence(student, target, tokens, [3]) - reverse_kl(student, target)
    (got,) = torch.autograd.grad(added.sum(), logits, retain_graph=True)
    divergence = reverse_kl(student, target).detach()
    later = torch.stack([divergence[1:].sum(), divergence[2], torch.tensor(0.0)])
    (sampled,) = torch.autograd.grad((later * student.gather(-1, tokens[:, None]).squeeze(-1)).sum(), logits)
    assert torch.allclose(got, sampled, atol=1e-6)


# -- the target, on the built-in model --------------------------------------------------------------------------

SAMPLING_TEMPERATURE = 1.5


@pytest.fixture
def trainer(make_config):
    """The built-in model; its initial weights kept as the reference, then the live policy moved away from them."""
    trainer = build_trainer(make_config(["betaopsd"], model={"name_or_path": "stackrl/arith-tiny"},
                                        betaopsd={"teacher_template": REFERENCE_TEMPLATE},
                                        trainer={"temperature": SAMPLING_TEMPERATURE}))
    trainer._shared_policy.update_snapshot("initial")
    trainer.plugins.plugins["betaopsd"].train_begin(_ctx(trainer))  # the plugin's own snapshot, as training takes it
    torch.manual_seed(1)
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return trainer


def _ctx(trainer, rollout=None) -> LossContext:
    return LossContext(step=0, tokenizer=trainer.processing_class, policy=trainer._shared_policy,
                       _log=lambda *_: None, _plugin="betaopsd", training=False, rollout=rollout)


def _rollout(tokenizer) -> Rollout:
    """A wrong first step, then a right completion: teacher and student disagree on the first, not the second."""
    return written_rollout(tokenizer, ["(4 * 2) + 3", "(3 + 5) - 2"],
                           ["4 * 2 = 9\n9 + 3 = 12\nThe answer is 12.", "3 + 5 = 8\n8 - 2 = 6\nThe answer is 6."])


def direct(trainer, rollout, mix: float, *, reverse=True, reference="initial") -> torch.Tensor:
    """Per token, in float64 from the raw logits at the sampling temperature: the target softmax((1 - mix) z_ref +
    mix z_T), z_ref the logits of snapshot ``reference`` (or of the live policy, "policy") after the student
    prompt, z_T the live policy's after the teacher prompt; then KL(student || target) (or KL(target || student))."""
    teacher_ids = trainer._tokenize_prompts(teacher_prompts(rollout.prompts, rollout.columns, REFERENCE_TEMPLATE))[0]
    initial = trainer.model if reference == "policy" else _SNAPSHOTS[trainer][reference].model
    values = []
    for student_ids, teacher_context, completion in zip(rollout.prompt_ids, teacher_ids, rollout.completion_ids):
        z_s = completion_logits(trainer.model, student_ids, completion)
        z_ref = completion_logits(initial, student_ids, completion)
        z_t = completion_logits(trainer.model, list(teacher_context), completion)
        p = (z_s / SAMPLING_TEMPERATURE).softmax(-1)
        q = (((1 - mix) * z_ref + mix * z_t) / SAMPLING_TEMPERATURE).softmax(-1)
        values.append((p * (p / q).log()).sum(-1) if reverse else (q * (q / p).log()).sum(-1))
    return torch.cat(values)


def _got(trainer, rollout, **settings):
    config = BetaOpsdConfig(teacher_template=REFERENCE_TEMPLATE, **settings)
    return target_divergence(trainer._shared_policy, rollout, config, teacher="policy", reference="initial",
                             grad=False).double()


@pytest.mark.parametrize("beta", [1.0, 4.0, 0.8])
def test_the_target_mixes_reference_and_teacher_logits_by_one_over_beta(trainer, beta):
    rollout = _rollout(trainer.processing_class)
    got = _got(trainer, rollout, beta=beta)
    expected = direct(trainer, rollout, 1 / beta)
    assert torch.allclose(got, expected, rtol=1e-4, atol=1e-5)  # float32 KL sums: about 1e-6 absolute
    # Another mixing rule or direction gives other values: the weight beta itself, the weights swapped, the
    # teacher alone, or KL(target || student).
    others = [1 - 1 / beta, 1 / beta] + ([beta, 1.0] if beta != 1 else [])
    for other in [direct(trainer, rollout, mix) for mix in others[:1] + others[2:]]:
        assert not torch.allclose(other, expected, rtol=1e-2)
    assert not torch.allclose(direct(trainer, rollout, 1 / beta, reverse=False), expected, rtol=1e-2)


def test_forward_kl_runs_from_the_target(trainer):
    rollout = _rollout(trainer.processing_class)
    got = _got(trainer, rollout, beta=2.0, divergence="forward_kl")
    assert torch.allclose(got, direct(trainer, rollout, 0.5, reverse=False), rtol=1e-4, atol=1e-5)


def test_the_loss_term_reads_the_reference_from_the_snapshot_taken_when_training_began(trainer):
    """The hook's value is the token mean of KL(student || target) whose z_ref comes from the plugin's own
    snapshot, not from the live policy (which has moved since)."""
    rollout = _rollout(trainer.processing_class)
    got = trainer.plugins.plugins["betaopsd"].loss_term(_ctx(trainer, rollout)).double()
    expected = direct(trainer, rollout, 0.5, reference="betaopsd").mean()
    assert got.item() == pytest.approx(expected.item(), rel=1e-4)
    live = direct(trainer, rollout, 0.5, reference="policy").mean()
    assert abs(live - expected) > 100 * abs(got - expected), "the live policy as reference gives another value"


def test_training_scores_the_reference_with_the_weights_it_began_with(make_config):
    config = make_config(["betaopsd"], model={"name_or_path": "stackrl/arith-tiny"},
                         betaopsd={"teacher_template": REFERENCE_TEMPLATE}, trainer={"learning_rate": 1e-3})
    start = {n: p.detach().clone() for n, p in build_trainer(config).model.named_parameters()}
    trainer = train_steps(config, steps=2)
    kept = dict(_SNAPSHOTS[trainer]["betaopsd"].model.named_parameters())
    moved = max((p.detach() - start[n]).abs().max().item() for n, p in trainer.model.named_parameters())
    assert moved > 1e-4, "the policy moved"
    for name, weights in start.items():
        assert torch.equal(kept[name], weights), name


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"beta": 0.0}, "betaopsd.beta: must be positive"),
        ({"teacher": "ema"}, "betaopsd.teacher: must be one of policy, initial, reference"),
        ({"reference_model": "policy"}, "betaopsd.reference_model: must be one of initial, reference"),
        ({"divergence": "jsd"}, "betaopsd.divergence: must be one of reverse_kl, forward_kl"),
        ({"temperature": -1.0}, "betaopsd.temperature: must be positive"),
    ],
)
def test_bad_settings_name_their_key(settings, message):
    with pytest.raises(ConfigError, match=message):
        BetaOpsd(BetaOpsdConfig(**settings))
