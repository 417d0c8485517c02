"""OPSD: its loss is the generalized JSD to the privileged self-teacher, on the rows it should touch only."""

import math
from pathlib import Path

import pytest
import torch

from stackrl import ConfigError, Rollout
from stackrl.policy import PolicyAccess
from stackrl.rewards import exact_match
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.teacher import generalized_jsd, teacher_prompts
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import train_steps
from stackrl.testing.repository import load_script
from stackrl_opsd import Opsd, OpsdConfig, distillation_divergence

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


class TestConformance(PluginConformance):
    plugin_name = "opsd"
    plugin_settings = {"opsd": {"teacher_template": REFERENCE_TEMPLATE}}


def _rollout(tokenizer):
    prompts = ["What is 2 + 3?\n", "What is 4 * 2?\n"]
    completions = ["2 + 3 = 5\nThe answer is 5.", "4 * 2 = 9\nThe answer is 9."]
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    return Rollout(
        prompts=prompts,
        completions=completions,
        prompt_ids=[encode(p) for p in prompts],
        completion_ids=[encode(c) for c in completions],
        columns={"solution": ["2 + 3 = 5\nThe answer is 5.", "4 * 2 = 8\nThe answer is 8."], "answer": ["5", "8"]},
        group_size=2,
        rewards={"exact_match": torch.tensor([1.0, 0.0])},
    )


@pytest.fixture
def trainer(make_config):
    return build_trainer(make_config(["opsd"], opsd={"teacher_template": REFERENCE_TEMPLATE}))


def test_divergence_is_the_jsd_of_student_and_teacher_at_every_token(trainer):
    rollout = _rollout(trainer.processing_class)
    config = OpsdConfig(teacher_template=REFERENCE_TEMPLATE, beta=0.3, temperature=1.5)
    policy = trainer._shared_policy
    got = distillation_divergence(policy, rollout, config, teacher="policy", grad=False)
    student = policy.score(rollout.prompt_ids, rollout.completion_ids, full_vocab=True, temperature=1.5)
    teacher = policy.score(
        teacher_prompts(rollout.prompts, rollout.columns, REFERENCE_TEMPLATE), rollout.completion_ids,
        full_vocab=True, temperature=1.5,
    )
    chosen = student.mask.bool()
    expected = generalized_jsd(student.vocab_logprobs[chosen], teacher.vocab_logprobs[chosen], beta=0.3)
    assert got.shape == (sum(len(c) for c in rollout.completion_ids),)
    assert torch.allclose(got, expected, atol=1e-5)


def test_top_k_renormalises_over_the_teachers_top_tokens(trainer):
    rollout = _rollout(trainer.processing_class)
    divergence = lambda **settings: distillation_divergence(  # noqa: E731
        trainer._shared_policy, rollout, OpsdConfig(teacher_template=REFERENCE_TEMPLATE, **settings),
        teacher="policy", grad=False,
    )
    full, top = divergence(), divergence(top_k=5)
    assert top.shape == full.shape and not torch.allclose(top, full)


def test_gradient_descends_the_divergence(trainer):
    """A few optimizer steps on the divergence alone lower it: the student's distribution carries the gradient."""
    rollout = _rollout(trainer.processing_class)
    config = OpsdConfig(teacher_template=REFERENCE_TEMPLATE)
    policy = PolicyAccess(trainer, sharded=False, model=trainer.model)
    optimizer = torch.optim.SGD(trainer.model.parameters(), lr=0.5)
    values = []
    for _ in range(5):
        loss = distillation_divergence(policy, rollout, config, teacher="policy", grad=True).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        values.append(loss.item())
    assert values[-1] < values[0]


def test_correct_only_keeps_the_rows_the_outcome_reward_passes():
    rollout = _rollout_stub()
    plugin = Opsd(OpsdConfig(correct_only=True))
    plugin.name = "opsd"
    assert plugin.rows_to_distill(rollout, step=3) == [0, 2]
    assert Opsd(OpsdConfig()).rows_to_distill(rollout, step=3) == [0, 1, 2]
    plugin.config.correct_reward = "math_verify"
    with pytest.raises(Exception, match="opsd.correct_reward: no reward component 'math_verify' at step 3"):
        plugin.rows_to_distill(rollout, step=3)


def _rollout_stub():
    return Rollout(prompts=["a", "b", "c"], completions=["x", "y", "z"], prompt_ids=[[1]] * 3,
                   completion_ids=[[2]] * 3, columns={}, group_size=3,
                   rewards={"exact_match": torch.tensor([1.0, 0.0, 1.0])})


def test_correct_only_scores_no_incorrect_rollout(make_config, monkeypatch):
    """In a real run on the built-in model, every completion OPSD scores is a correct one."""
    scored = []
    original = PolicyAccess.score

    def spy(self, contexts, continuation_ids, **options):
        if options.get("grad"):  # the student's call: contexts are the prompts' tokens
            scored.extend(zip(contexts, continuation_ids))
        return original(self, contexts, continuation_ids, **options)

    monkeypatch.setattr(PolicyAccess, "score", spy)
    config = make_config(
        ["opsd"], model={"name_or_path": "stackrl/arith-tiny"}, rewards={"exact_match": 0.0},
        opsd={"teacher_template": REFERENCE_TEMPLATE, "correct_only": True},
        trainer={"max_completion_length": 48, "num_generations": 4, "per_device_train_batch_size": 8},
    )
    trainer = train_steps(config, steps=2)
    decode = lambda ids: trainer.processing_class.decode(ids, skip_special_tokens=True)  # noqa: E731
    answers = dict(zip(trainer.train_dataset["prompt"], trainer.train_dataset["answer"]))
    assert scored, "the built-in model gets some rollouts right, so OPSD distils some"
    assert all(exact_match(decode(completion), answers[decode(prompt)]) for prompt, completion in scored)


def test_bad_settings_name_the_key():
    with pytest.raises(ConfigError, match="opsd.teacher: must be one of policy, reference, ema, not 'teacher'"):
        Opsd(OpsdConfig(teacher="teacher"))
    with pytest.raises(ConfigError, match=r"opsd.beta: must lie in \[0, 1\], not 2.0"):
        Opsd(OpsdConfig(beta=2.0))


def test_ema_teacher_is_a_snapshot_updated_every_step(make_config):
    trainer = train_steps(make_config(["opsd"], opsd={"teacher_template": REFERENCE_TEMPLATE, "teacher": "ema",
                                                       "ema_decay": 0.5}), steps=2)
    from stackrl.policy import _SNAPSHOTS

    snapshot = _SNAPSHOTS[trainer]["opsd"].model
    live = trainer.model.get_output_embeddings().weight
    assert not torch.equal(snapshot.get_output_embeddings().weight, live), "an EMA lags the policy"


def test_a_short_run_brings_the_student_to_its_teacher_and_keeps_accuracy():
    """The mechanism on the built-in model, short (the full figures come from benchmarks/mechanism.py)."""
    mechanism = load_script(BENCHMARK)
    heldout = 64
    before, after = mechanism.run(seed=0, steps=10, heldout=heldout)
    assert after["divergence"] < before["divergence"], (before, after)
    # Ten steps move greedy accuracy little: "not lower" up to the sampling noise of the held-out figure.
    p = before["accuracy"]
    assert after["accuracy"] >= p - math.sqrt(p * (1 - p) / heldout), (before, after)
