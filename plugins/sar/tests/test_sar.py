"""SAR: the reward's numbers on hand-built log-probs, the question-free prompt, and the question's effect on the
built-in model."""

import math

import pytest
import torch

from stackrl import RewardContext, Rollout
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.heldout import completion_logits
from stackrl_sar import SAR, SARConfig
from stackrl_sar.plugin import answer_only_prompt, self_aligned_reward


class TestConformance(PluginConformance):
    plugin_name = "sar"
    refused_settings = [({"floor": 0.5}, "sar.floor must be 0 or below")]


def by_perplexity(with_question, answer_only, floor=-1.0):
    """The paper's form, computed the long way: perplexities first."""
    ppl_qa = math.exp(-sum(with_question) / len(with_question))
    ppl_a = math.exp(-sum(answer_only) / len(answer_only))
    return max((ppl_a - ppl_qa) / ppl_a, floor)


def test_the_reward_is_the_relative_perplexity_drop_the_question_brings_floored():
    # Row 0: the question helps (NLL 0.5 vs 1.0). Row 1: it hurts a little. Row 2: it hurts a lot (floored).
    # Row 3 has two tokens of padding whose junk values must not count.
    with_question = torch.tensor([[-0.5, -0.5, 0, 0], [-1.2, -0.8, -1.0, 0], [-4.0, -4.0, 0, 0], [-0.1, -0.3, 9, 9]])
    answer_only = torch.tensor([[-1.0, -1.0, 0, 0], [-0.9, -0.9, -0.9, 0], [-1.0, -1.0, 0, 0], [-2.0, -2.2, 9, 9]])
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 0, 0]])
    rewards = self_aligned_reward(with_question, answer_only, mask)
    expected = [by_perplexity(q[m.bool()].tolist(), a[m.bool()].tolist()) for q, a, m in zip(with_question, answer_only, mask)]
    assert rewards.tolist() == pytest.approx(expected, abs=1e-12)
    assert rewards[0] == pytest.approx(1 - math.exp(-0.5)) and rewards[2] == -1.0
    assert rewards[1] < 0 < rewards[0] < rewards[3] < 1
    assert self_aligned_reward(with_question, answer_only, mask, floor=-30.0)[2] == pytest.approx(1 - math.exp(3.0))
    # The two passes are not interchangeable: swapped, the helpful question becomes a harmful one.
    assert self_aligned_reward(answer_only, with_question, mask)[0] == pytest.approx(1 - math.exp(0.5))


def test_a_long_unlikely_completion_does_not_overflow():
    tokens = torch.full((1, 4000), -30.0)
    assert self_aligned_reward(tokens, tokens - 1.0, torch.ones(1, 4000)).item() == pytest.approx(1 - math.exp(-1.0))


def test_the_question_free_prompt_keeps_the_system_turn_and_empties_the_user_turn(tiny_model_dir):
    from transformers import AutoTokenizer

    chat = [{"role": "system", "content": "Reason well."}, {"role": "user", "content": "What is 2 + 2?"}]
    assert answer_only_prompt(chat, None) == [{"role": "system", "content": "Reason well."}, {"role": "user", "content": ""}]
    assert answer_only_prompt(chat[1:], None) == [{"role": "user", "content": ""}]
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    assert answer_only_prompt("What is 2 + 2?\n", tokenizer) == [start]


OWN, OTHER = "What is (3 + 4) * 2?\n", "What is (9 * 5) + 16?\n"
SOLUTION = "3 + 4 = 7\n7 * 2 = 14\nThe answer is 14."


def _reward(trainer):
    """The plugin's rewards of the solution to OWN after OWN and after OTHER, and what it logged."""
    tokenizer = trainer.processing_class
    ids = tokenizer(SOLUTION, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    rollout = Rollout(prompts=[OWN, OTHER], completions=[SOLUTION] * 2,
                      prompt_ids=[tokenizer(p)["input_ids"] for p in (OWN, OTHER)], completion_ids=[ids, ids],
                      columns={}, group_size=2)
    logs = {}
    ctx = RewardContext(step=0, tokenizer=tokenizer, policy=trainer._shared_policy, _log=logs.__setitem__,
                        _plugin="sar", rollout=rollout)
    return SAR(SARConfig()).reward(ctx), logs, rollout


def test_an_answer_earns_more_under_its_own_question_on_the_built_in_model(built_in_trainer):
    """The built-in model's worked solution of one question reads far likelier after that question than after
    another one, and about as likely as alone after another: SAR rewards the match, not the text."""
    (matched, mismatched), logs, _ = _reward(built_in_trainer(["sar"]))
    assert matched > 0.8 and mismatched < 0.3  # measured: 0.91 and 0.08
    assert set(logs) == {"sar/floored", "sar/ppl_with_question", "sar/ppl_answer_only"}


def test_both_perplexities_are_read_at_the_sampling_temperature(built_in_trainer):
    """The completion is scored as the policy sampled it, its logits over the run's sampling temperature, after
    the prompt and after the question-free one; at temperature 1 the rewards would differ."""
    temperature = 1.5
    trainer = built_in_trainer(["sar"], trainer={"temperature": temperature})
    rewards, _, rollout = _reward(trainer)

    def nll(context, completion, scale):
        logps = (completion_logits(trainer.model, context, completion) / scale).log_softmax(-1)
        return -logps.gather(-1, torch.tensor(completion)[:, None]).mean().item()

    def by_hand(scale):
        bare = answer_only_prompt(OWN, trainer.processing_class)
        return [max(1 - math.exp(nll(context, completion, scale) - nll(bare, completion, scale)), -1.0)
                for context, completion in zip(rollout.prompt_ids, rollout.completion_ids)]

    assert rewards == pytest.approx(by_hand(temperature), abs=1e-5)
    assert rewards != pytest.approx(by_hand(1.0), abs=1e-3)
