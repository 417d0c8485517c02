"""Operations on the policy's state: sampling the reference or a snapshot, a scratch update of a copy, and a
supervised phase that restarts from a snapshot with a fresh optimizer, exact across a resume."""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from stackrl import StackrlError
from stackrl.plots import METRICS_FILE
from stackrl.policy import snapshots_of
from stackrl.policy_ops import scratch_update, token_losses
from stackrl.run import build_trainer
from stackrl.testing.fixtures import StopAt, train_steps

PROMPTS = ["What is 12 + 7?\n", "What is 3 * 4?\n", "What is 9 - 5?\n", "What is 6 + 6?\n"] * 2
CONTEXTS = [[5, 6, 7, 8], [9, 10], [11, 12, 13]]
COMPLETIONS = [[20, 21, 22], [23], [24, 25]]


def sample(policy, model="policy"):
    torch.manual_seed(0)
    return [g.completion_ids for g in policy.generate(PROMPTS, model=model)]


def parameters(module):
    return {name: p.detach().clone() for name, p in module.named_parameters()}


def test_a_snapshot_samples_as_the_policy_right_after_a_copy_and_as_the_copy_after_training(make_config):
    trainer = build_trainer(make_config(["digit_reward"], trainer={"learning_rate": 0.05, "max_steps": 2}))
    policy = trainer._shared_policy
    untrained = sample(policy)
    policy.update_snapshot("start")
    assert sample(policy, "start") == untrained
    trainer.train()
    assert sample(policy) != untrained, "training moved the live policy"
    assert sample(policy, "start") == untrained, "the snapshot still samples the weights it copied"


def test_the_reference_samples_as_the_base_model_under_lora(make_config):
    trainer = build_trainer(make_config(["digit_reward"], model={"lora": {"r": 4}}))
    policy = trainer._shared_policy
    with torch.no_grad():  # move the adapter away from its zero init so policy and base differ
        for name, p in trainer.model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.3)
    with trainer.model.disable_adapter():
        base = sample(policy)
    assert sample(policy, "reference") == base
    assert sample(policy) != base


def test_generating_from_an_unknown_model_names_the_models(make_config):
    policy = build_trainer(make_config(["digit_reward"]))._shared_policy
    with pytest.raises(StackrlError, match=r"generate\(\): model must be one of 'policy', 'reference' \(snapshots"):
        policy.generate(PROMPTS, model="teacher")


def test_each_objective_loss_moves_a_tokens_log_prob_its_way():
    """On hand-built log-probs: each objective's value and its gradient in log p, whose sign a descent step
    follows. unlikelihood, -log(1 - p), lowers every token, with a slope p / (1 - p) that is steepest where p is
    near 1; ascent lowers every token alike; likelihood raises them."""
    p = torch.tensor([0.01, 0.5, 0.99], dtype=torch.float64)
    for objective, value, slope in [
        ("likelihood", -p.log(), -torch.ones(3)),
        ("ascent", p.log(), torch.ones(3)),
        ("unlikelihood", -(1 - p).log(), p / (1 - p)),  # d/d log p of -log(1 - p)
    ]:
        logprobs = p.log().requires_grad_()
        loss = token_losses(logprobs, objective)
        loss.sum().backward()
        torch.testing.assert_close(loss.detach(), value, msg=objective)
        torch.testing.assert_close(logprobs.grad, slope.double(), msg=objective)


def hand_loss(model, objective):
    """The token-mean objective over the pairs, one unpadded forward per pair."""
    total, tokens = 0.0, 0
    for context, completion in zip(CONTEXTS, COMPLETIONS):
        logits = model(torch.tensor([context + completion])).logits[0, len(context) - 1 : -1]
        logp = logits.log_softmax(-1).gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)
        per_token = {"likelihood": -logp, "ascent": logp, "unlikelihood": -torch.log1p(-logp.exp())}[objective]
        total = total + per_token.sum()
        tokens += len(completion)
    return total / tokens


@pytest.mark.parametrize("objective", ["likelihood", "unlikelihood", "ascent"])
def test_a_scratch_update_moves_only_the_copy_by_minus_lr_times_the_objective_gradient(make_config, objective):
    config = make_config(["digit_reward"])
    trainer = build_trainer(config)
    policy = trainer._shared_policy
    live_before = parameters(trainer.model)
    by_hand = AutoModelForCausalLM.from_pretrained(config.host.model.name_or_path).eval()  # the same start weights
    hand_loss(by_hand, objective).backward()

    losses = scratch_update(policy, "scratch", CONTEXTS, COMPLETIONS, objective=objective, learning_rate=0.5)

    assert all(torch.equal(p, live_before[n]) for n, p in trainer.model.named_parameters()), "live weights untouched"
    moved = snapshots_of(trainer)["scratch"].own
    for name, p in by_hand.named_parameters():
        grad = torch.zeros_like(p) if p.grad is None else p.grad  # a weight the pairs do not reach stays put
        torch.testing.assert_close(moved[name], p.detach() - 0.5 * grad, atol=1e-6, rtol=1e-4, msg=name)
    assert losses == pytest.approx([hand_loss(by_hand, objective).item()], rel=1e-5)
    live = policy.score(CONTEXTS, COMPLETIONS).logprobs.sum()
    copied = policy.score(CONTEXTS, COMPLETIONS, model="scratch").logprobs.sum()
    assert (copied > live) == (objective == "likelihood"), "likelihood raises the pairs' log-probs, the others lower them"


def test_a_scratch_update_refuses_an_unknown_objective_and_sharded_weights(make_config, monkeypatch):
    trainer = build_trainer(make_config(["digit_reward"]))
    policy = trainer._shared_policy
    with pytest.raises(StackrlError, match="objective must be one of likelihood, unlikelihood, ascent, not 'nll'"):
        scratch_update(policy, "s", CONTEXTS, COMPLETIONS, objective="nll", learning_rate=0.1)
    assert "s" not in snapshots_of(trainer)
    monkeypatch.setattr(type(trainer._dist), "is_zero3", property(lambda self: True))
    with pytest.raises(StackrlError, match=r"update_snapshot\(\): the policy's weights are sharded \(ZeRO-3/FSDP\)"):
        scratch_update(policy, "s", CONTEXTS, COMPLETIONS, objective="likelihood", learning_rate=0.1)
    with pytest.raises(StackrlError, match=r"generate\(model='reference'\): the policy's weights are sharded"):
        policy.generate(PROMPTS, model="reference")


def test_a_phase_restores_the_snapshot_and_fine_tunes_with_a_fresh_optimizer_and_schedule(make_config, tmp_path):
    trainer = build_trainer(make_config(["digit_reward"], trainer={"max_steps": 2, "lr_scheduler_type": "linear"}))
    trainer._shared_policy.update_snapshot("start")
    start = parameters(trainer.model)
    trainer.train()
    optimizer = trainer.optimizer.optimizer
    assert optimizer.state and trainer.lr_scheduler.last_epoch == 2

    # Fresh Adam moves each weight by the learning rate on its first step, whatever its gradient (unless that is
    # as small as Adam's epsilon): from the restored start, nearly every weight is exactly 1e-4 away.
    figures = trainer._supervised_phase("test", "rft", CONTEXTS, COMPLETIONS, restore="start", learning_rate=1e-4)
    assert figures["optimizer_steps"] == 1 and figures["pairs"] == 3
    steps = torch.cat([(p.detach() - start[name]).abs().flatten() for name, p in trainer.model.named_parameters()])
    moved = steps[steps > 0]
    assert ((moved - 1e-4).abs() < 1e-6).float().mean() > 0.9 and moved.max() < 1.01e-4
    assert not optimizer.state, "RL resumes with a fresh optimizer"
    assert trainer.lr_scheduler.last_epoch == 0
    assert {g["lr"] for g in optimizer.param_groups} == {trainer.args.learning_rate}

    longer = trainer._supervised_phase("test", "rft", CONTEXTS, COMPLETIONS, learning_rate=1e-2, epochs=5)
    assert longer["loss_last"] < longer["loss_first"], "the phase fits the pairs"
    logged = [json.loads(line) for line in (tmp_path / "run" / METRICS_FILE).read_text().splitlines()]
    assert [r["phase/rft/optimizer_steps"] for r in logged if "phase/rft/optimizer_steps" in r] == [1, 5]


def test_a_run_resumed_before_its_phase_matches_an_uninterrupted_one(make_config, tmp_path):
    sections = dict(trainer={"save_strategy": "steps", "save_steps": 2, "max_steps": 5},
                    restart_phase={"at_step": 3, "learning_rate": 0.01})
    straight = train_steps(make_config(["restart_phase"], output_dir=str(tmp_path / "straight"), **sections))
    config = make_config(["restart_phase"], output_dir=str(tmp_path / "resumed"), **sections)
    train_steps(config, callbacks=[StopAt(2)])
    resumed = train_steps(config, resume=True)

    want, got = parameters(straight.model), parameters(resumed.model)
    assert all(torch.equal(want[n], got[n]) for n in want)
    assert torch.equal(snapshots_of(resumed)["start"].own["model.embed_tokens.weight"],
                       snapshots_of(straight)["start"].own["model.embed_tokens.weight"])
    phases = [r for r in map(json.loads, (tmp_path / "resumed" / METRICS_FILE).read_text().splitlines())
              if "phase/restart/loss_first" in r]
    assert [r["step"] for r in phases] == [3]
