"""The capabilities hooks get: score is batched yet equal to one-at-a-time scoring; generate obeys overrides."""

import pytest
import torch

from stackrl import StackrlError
from stackrl.run import build_trainer


@pytest.fixture
def policy(make_config):
    return build_trainer(make_config(["digit_reward"]))._shared_policy


def test_batched_scores_equal_one_by_one(policy):
    contexts = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]]
    continuations = [[20, 21], [22, 23, 24, 25], [26]]
    batched = policy.score(contexts, continuations, topk=3, full_vocab=True, batch_size=3)
    for i, (context, continuation) in enumerate(zip(contexts, continuations)):
        alone = policy.score([context], [continuation])
        n = len(continuation)
        assert torch.allclose(batched.logprobs[i, :n], alone.logprobs[0, :n], atol=1e-5)
        assert batched.mask[i].sum() == n
    vocab = batched.vocab_logprobs
    assert torch.allclose(batched.logprobs, vocab.gather(-1, torch.tensor(
        [c + [0] * (4 - len(c)) for c in continuations]).unsqueeze(-1)).squeeze(-1) * batched.mask)
    assert torch.allclose(batched.topk_logprobs[..., 0], vocab.max(-1).values)


def test_hidden_states_are_a_direct_forwards_at_each_position(policy):
    """Token features come from the scoring forward itself, and equal the model's own last hidden states at the
    position that predicts each continuation token, batched or at chosen positions."""
    contexts = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]]
    continuations = [[20, 21], [22, 23, 24, 25], [26]]
    batched = policy.score(contexts, continuations, hidden_states=True, batch_size=3)
    chosen = policy.score(contexts, continuations, hidden_states=True, positions=[[1], [0, 3], [0]])
    model = policy._trainer.model
    direct = []
    for i, (context, continuation) in enumerate(zip(contexts, continuations)):
        with torch.no_grad():
            states = model(torch.tensor([context + continuation]), output_hidden_states=True).hidden_states[-1][0]
        features = states[len(context) - 1 : len(context) + len(continuation) - 1]
        assert torch.allclose(batched.hidden_states[i, : len(continuation)], features, atol=1e-5)
        direct.append(features)
    expected = torch.stack([direct[0][1], direct[1][0], direct[1][3], direct[2][0]])
    assert torch.allclose(chosen.hidden_states, expected, atol=1e-5)
    head = model.get_output_embeddings()
    logits = head(batched.hidden_states).log_softmax(-1)
    targets = torch.tensor([c + [0] * (4 - len(c)) for c in continuations])
    assert torch.allclose(logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) * batched.mask, batched.logprobs, atol=1e-5)
    assert policy.score(contexts, continuations).hidden_states is None


def test_score_accepts_prompts_as_text(policy):
    tokenizer = policy._trainer.processing_class
    text = "What is 2 + 3?\n"
    continuation = tokenizer("2 + 3 = 5", add_special_tokens=False)["input_ids"]
    by_text = policy.score([text], [continuation])
    by_ids = policy.score([tokenizer(text)["input_ids"]], [continuation])
    assert torch.equal(by_text.logprobs, by_ids.logprobs)


def test_generate_one_completion_per_prompt_with_overrides(policy):
    prompts = ["What is 1 + 1?\n", "What is 2 * 3?\n", "What is 4 - 1?\n"]
    generations = policy.generate(prompts, max_new_tokens=3, do_sample=False)
    assert len(generations) == 3 and all(len(g.completion_ids) <= 3 for g in generations)
    assert generations[0].text == policy._trainer.processing_class.decode(
        generations[0].completion_ids, skip_special_tokens=True
    )
    assert policy._trainer.generation_config.max_new_tokens != 3, "overrides last for one call"


def test_unknown_sampling_setting(policy):
    with pytest.raises(StackrlError, match="generate\\(\\): unknown sampling setting\\(s\\) temprature"):
        policy.generate(["x"], temprature=0.5)


def test_reference_needs_lora_or_a_reference_model(policy):
    with pytest.raises(StackrlError) as error:
        policy.score([[5, 6]], [[7]], model="reference")
    assert str(error.value) == (
        "score(model='reference'): this run has no reference model; use LoRA (model.lora) or set trainer.beta > 0 "
        "so TRL loads one"
    )


def test_reference_is_the_base_model_under_lora(make_config):
    trainer = build_trainer(make_config(["digit_reward"], model={"lora": {"r": 4}}))
    policy = trainer._shared_policy
    with torch.no_grad():  # move the adapter away from its zero init so policy and base differ
        for name, p in trainer.model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.1)
    contexts, continuations = [[5, 6, 7]], [[8, 9]]
    reference = policy.score(contexts, continuations, model="reference")
    live = policy.score(contexts, continuations)
    with trainer.model.disable_adapter():
        base = policy.score(contexts, continuations)
    assert torch.equal(reference.logprobs, base.logprobs)
    assert not torch.allclose(reference.logprobs, live.logprobs)
