"""SDRL: debate groups answer after a context of candidates with distinct answers; both turns are trained."""

from types import SimpleNamespace

import pytest
import torch

from stackrl import Rollout
from stackrl.answers import make_extractor
from stackrl.errors import PluginHookError
from stackrl.rewards import RETRY, SOLVE, exact_match, extract_answer
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import train_steps
from stackrl_sdrl import Sdrl, SdrlConfig, debate_prompt, diverse_candidates
from stackrl_sdrl.config import CANDIDATE_TEMPLATE

READ = make_extractor("auto")


class TestConformance(PluginConformance):
    plugin_name = "sdrl"
    refused_settings = [({"debate_share": 0.0}, r"must be in \(0, 1\]"), ({"candidates": 0}, "must be at least 1"),
                        ({"context_size": 3}, r"must be between 1 and sdrl.candidates \(2\)"),
                        ({"candidate_template": "{answer}"}, r"must contain \{candidate\}")]


def test_the_context_takes_distinct_answers_first():
    texts = ["The answer is 4.", "The answer is 4", "no answer", "The answer is 5.", "The answer is 6."]
    assert diverse_candidates(texts, 3, READ, math_verify=False) == [0, 3, 4]
    assert diverse_candidates(texts, 5, READ, math_verify=False) == [0, 3, 4, 2, 1]  # then unanswered, then repeats
    assert diverse_candidates(["The answer is 1.", "The answer is 1.0"], 2, READ, math_verify=True) == [0, 1]


def test_the_debate_prompt_shows_each_candidate_as_an_earlier_attempt():
    prompt = debate_prompt("Q?\n", ["A1", "A2"], CANDIDATE_TEMPLATE)
    assert prompt == "Q?\nA1\nTry again.\nA2\nTry again.\n"


def test_a_debate_groups_candidates_and_replies_are_normalised_apart():
    # One debate group: two candidates (one right) and two replies (both right). Apart, the replies' shared reward
    # is their own baseline (advantage 0) and the candidates split; pooled, the replies would be pushed up.
    rollout = Rollout(["q"] * 4, ["c"] * 4, [[1]] * 4, [[2, 3]] * 4, {"role": [SOLVE, SOLVE, RETRY, RETRY]},
                      group_size=4)
    ctx = SimpleNamespace(rollout=rollout, total_reward=torch.tensor([1.0, 0.0, 1.0, 1.0]))
    advantages = Sdrl(SdrlConfig()).estimate_advantages(ctx)[:, 0]
    assert advantages[0] > 0 > advantages[1] and advantages[0] == -advantages[1]
    assert advantages[2:].tolist() == [0.0, 0.0]


def test_debate_groups_answer_after_diverse_candidates_and_both_turns_are_scored(make_config):
    config = make_config(
        ["sdrl"],
        model={"name_or_path": "stackrl/arith-skills"},
        data={"options": {"categories": ["2 steps, 1-digit", "3 steps, 1-digit"]}},
        sdrl={"candidates": 6, "context_size": 2, "debate_share": 0.75, "train_candidates": False},
        trainer={"per_device_train_batch_size": 32, "max_completion_length": 40},
    )
    trainer = train_steps(config, steps=1)
    rollout, decode, size = trainer._rollouts["train"], trainer.processing_class.decode, 4
    assert rollout.columns["role"] == [SOLVE] * 8 + [RETRY] * 24
    assert not rollout.rewards["exact_match"].isnan().any()  # both turns are solutions, scored alike
    distinct_contexts = 0
    for i, role in enumerate(rollout.columns["role"]):
        prompt, answer, trained_on = rollout.prompts[i], rollout.columns["answer"][i], decode(rollout.prompt_ids[i])
        assert rollout.rewards["exact_match"][i] == exact_match(rollout.completions[i], answer)
        if role == SOLVE:
            assert trained_on == prompt and rollout.columns["context_correct"][i] is None
            continue
        assert trained_on.startswith(prompt) and trained_on == decode(rollout.prompt_ids[i - i % size])
        shown = trained_on[len(prompt) :].split("\nTry again.\n")[:-1]
        assert len(shown) == 2
        assert rollout.columns["context_correct"][i] == [exact_match(c, answer) == 1.0 for c in shown]
        pool = rollout.columns["candidate_answers"][i]
        distinct = list(dict.fromkeys(a for a in pool if a is not None))  # in the order sampled
        assert len(pool) == 6 and extract_answer(shown[0]) == (distinct[0] if distinct else None)
        if len(distinct) > 1:  # the pool disagrees: the context shows its first two answers
            assert [extract_answer(c) for c in shown] == distinct[:2]
            distinct_contexts += pool[:2] != distinct[:2]  # a context the first two samples would not give
    assert distinct_contexts, "no pool began with a repeat: the diversity check is void"
    assert torch.isfinite(rollout.advantages).all()


def test_by_default_a_debate_groups_candidates_are_trained_rows_and_each_turn_has_its_own_baseline(make_config):
    """The abstract optimises the candidates and the replies of the same prompt: a debate group's first rows are
    its candidates, answering the bare question, the others reply to a context of them, and GRPO's mean and std
    are taken over each kind apart."""
    config = make_config(
        ["sdrl"],
        model={"name_or_path": "stackrl/arith-skills"},
        data={"options": {"categories": ["2 steps, 1-digit", "3 steps, 1-digit"]}},
        sdrl={"candidates": 4, "context_size": 2, "debate_share": 0.5},
        trainer={"per_device_train_batch_size": 48, "num_generations": 8, "max_completion_length": 48},
    )
    trainer = train_steps(config, steps=1)
    rollout, decode, size = trainer._rollouts["train"], trainer.processing_class.decode, 8
    roles, rewards = rollout.columns["role"], rollout.rewards["exact_match"]
    assert roles == [SOLVE] * 24 + ([SOLVE] * 4 + [RETRY] * 4) * 3
    turns_apart = 0
    for start in range(0, len(roles), size):
        group = range(start, start + size)
        kinds = [[i for i in group if roles[i] == role] for role in (SOLVE, RETRY)]
        for i in group:
            assert rollout.rewards["exact_match"][i] == exact_match(rollout.completions[i], rollout.columns["answer"][i])
        if kinds[1]:  # a debate group: its replies are trained on a context of its own trained candidates
            candidates = [rollout.completions[i] for i in kinds[0]]
            assert rollout.columns["candidate_answers"][kinds[1][0]] == [extract_answer(c) for c in candidates]
            context = decode(rollout.prompt_ids[kinds[1][0]])[len(rollout.prompts[start]) :].split("\nTry again.\n")[:-1]
            assert len(context) == 2 and set(context) <= set(candidates)
            assert all(decode(rollout.prompt_ids[i]) == rollout.prompts[i] for i in kinds[0])
            turns_apart += rewards[kinds[0]].mean() != rewards[kinds[1]].mean()
        for rows in filter(None, kinds):
            r = rewards[rows]
            expected = (r - r.mean()) / (r.std() + 1e-4)
            for i, value in zip(rows, expected.tolist()):
                row = rollout.advantages[i]  # per token from the plugin's estimator, one value from TRL's
                assert (row if row.dim() == 0 else row[: len(rollout.completion_ids[i])]) == pytest.approx(value, abs=1e-5)
    assert turns_apart, "no debate group whose candidates and replies score apart: one baseline would pass"


def test_trained_candidates_leave_room_for_two_replies(make_config):
    config = make_config(["sdrl"], model={"name_or_path": "stackrl/arith-skills"}, sdrl={"candidates": 3})
    with pytest.raises(PluginHookError, match=r"ConfigError: sdrl.candidates: with sdrl.train_candidates .* at most 2, not 3"):
        train_steps(config, steps=1)
