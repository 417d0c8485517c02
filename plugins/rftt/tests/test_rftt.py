"""Tests of the `rftt` plugin: the host's conformance suite, then the method's own rules on hand-built rows."""

import json
from types import SimpleNamespace

import pytest

from stackrl.context import Rollout
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_rftt.annotate import annotated, functional_use

TOKENS = {"model": {"add_tokens": ["<verify>", "<refine>"]}}
SOLUTION = "3 + 4 = 7\n7 * 2 = 14\nThe answer is 14."  # of "What is (3 + 4) * 2?"
SLIPPED = "3 + 4 = 8\n8 * 2 = 16\nThe answer is 16."
CHECK_RIGHT = "3 + 4 = 7 | 7 yes\n7 * 2 = 14 | 14 yes\n14 | 14 yes\nVerdict: correct"
CHECK_SLIPPED = "3 + 4 = 7 | 8 no\nVerdict: wrong"


class TestConformance(PluginConformance):
    plugin_name = "rftt"
    plugin_settings = TOKENS
    refused_settings = [
        ({"verify_token": ""}, "rftt.verify_token: must be a non-empty token"),
        ({"refine_token": " <refine>"}, "rftt.refine_token: must be a non-empty token"),
        ({"refine_token": "<verify>"}, "rftt.refine_token: must differ from rftt.verify_token"),
        ({"warmup_step": 0}, "rftt.warmup_step: must be at least 1"),
        ({"sft_epochs": 0}, "rftt.sft_epochs: must be at least 1"),
        ({"sft_learning_rate": 0.0}, "rftt.sft_learning_rate: must be positive"),
        ({"sft_batch_size": 0}, "rftt.sft_batch_size: must be at least 1 or null"),
    ]


def test_a_right_attempt_is_verified_and_a_wrong_one_verified_then_refined():
    assert annotated(SOLUTION, "14", SOLUTION, "<verify>", "<refine>") == f"{SOLUTION}\n<verify>\n{CHECK_RIGHT}"
    assert annotated(SLIPPED + "\n", "14", SOLUTION, "<verify>", "<refine>") == (
        f"{SLIPPED}\n<verify>\n{CHECK_SLIPPED}\n<refine>\n{SOLUTION}")


def test_an_attempt_the_check_cannot_account_for_is_left_out():
    assert annotated("3 + 4 = 7\nseven twos", "14", SOLUTION, "<verify>", "<refine>") is None  # malformed
    misread = "3 + 5 = 8\n8 * 2 = 16\nThe answer is 16."  # every line sound, the answer wrong: no line to point at
    assert annotated(misread, "14", SOLUTION, "<verify>", "<refine>") is None


def test_the_use_of_the_tokens_is_read_in_order():
    assert functional_use("a <verify> b <refine> c", "<verify>", "<refine>") == "refine"
    assert functional_use("a <verify> b", "<verify>", "<refine>") == "verify"
    assert functional_use("a <refine> b <verify>", "<verify>", "<refine>") == "malformed"
    assert functional_use("a b", "<verify>", "<refine>") == "none"


def _reward(completions, answers, added=("<verify>", "<refine>")):
    rollout = Rollout(prompts=["What is (3 + 4) * 2?\n"] * len(completions), completions=completions,
                      completion_ids=[[1]] * len(completions), prompt_ids=[[1]] * len(completions), group_size=1, columns={"answer": answers})
    logged, acted, warned = {}, [], []
    tokenizer = SimpleNamespace(get_added_vocab=lambda: {t: 300 + i for i, t in enumerate(added)})
    ctx = SimpleNamespace(rollout=rollout, tokenizer=tokenizer, log=logged.__setitem__, warn=warned.append,
                          acted=lambda n, of, hint=None: acted.append((n, of)))
    return make_plugin("rftt").reward(ctx), logged, acted, warned


def test_the_reward_is_the_final_answer_after_the_last_refine_and_counts_no_token():
    refined = f"{SLIPPED}\n<verify>\n{CHECK_SLIPPED}\n<refine>\n{SOLUTION}"
    refined_wrong = f"{SOLUTION}\n<verify>\n{CHECK_RIGHT}\n<refine>\n{SLIPPED}"
    verified = f"{SOLUTION}\n<verify>\n{CHECK_RIGHT}"
    rewards, logged, acted, warned = _reward([refined, refined_wrong, verified, SOLUTION, SLIPPED], ["14"] * 4 + [None])
    assert rewards == [1.0, 0.0, 1.0, 1.0, None]  # the authors' outcome reward: no term for the tokens themselves
    assert acted == [(3, 5)]
    assert logged["use_refine"] == pytest.approx(2 / 5) and logged["use_verify"] == pytest.approx(1 / 5)
    assert logged["refine_fixed"] == pytest.approx(1 / 2)  # the first refinement fixed a wrong attempt
    assert not warned


def test_a_token_missing_from_the_vocabulary_is_warned_of_and_read_as_text():
    rewards, _, acted, warned = _reward([f"{SOLUTION}\n<verify>\n{CHECK_RIGHT}"], ["14"], added=("<verify>",))
    assert warned == ["refine_token_not_added"] and rewards == [1.0] and acted == [(1, 1)]


def test_the_reward_waits_for_the_warmup():
    assert make_plugin("rftt", warmup_step=3).reward_weight() == {0: 0.0, 3: 1.0}


def _post_step(plugin, step, completions, phases):
    rollout = Rollout(prompts=["What is (3 + 4) * 2?\n"] * len(completions), completions=completions,
                      completion_ids=[[1]] * len(completions), prompt_ids=[[1]] * len(completions), group_size=1,
                      columns={"answer": ["14"] * len(completions), "solution": [SOLUTION] * len(completions)})
    logged, warned = {}, []
    ctx = SimpleNamespace(step=step, rollout=rollout, tokenizer=_Tokenizer(), log=logged.__setitem__, warn=warned.append,
                          supervised_phase=lambda name, contexts, targets, **options: phases.append((name, contexts, targets, options)))
    plugin.post_step(ctx)
    return logged, warned


class _Tokenizer:
    eos_token_id = 9

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [len(text)]}  # one id a text: enough to tell the targets apart


def test_the_warmup_runs_once_after_its_step_on_the_annotated_attempts_of_the_steps_before():
    plugin, phases = make_plugin("rftt", warmup_step=2, sft_epochs=2), []
    _post_step(plugin, 1, [SOLUTION, SLIPPED, "junk"], phases)
    assert not phases and len(plugin.buffer) == 2
    again = make_plugin("rftt", warmup_step=2, sft_epochs=2)  # a resume between the steps keeps the pairs
    again.load_state_dict(json.loads(json.dumps(plugin.state_dict())))
    logged, _ = _post_step(again, 2, [SOLUTION, SOLUTION], phases)  # the same attempt again: kept once
    (name, contexts, targets, options), = phases
    verified = len(f"{SOLUTION}\n<verify>\n{CHECK_RIGHT}")
    refined = len(f"{SLIPPED}\n<verify>\n{CHECK_SLIPPED}\n<refine>\n{SOLUTION}")
    assert name == "rftt_warmup" and targets == [[verified, 9], [refined, 9]] and options["epochs"] == 2
    assert logged["pairs"] == 2 and again.warmed and not again.buffer.pairs
    _post_step(again, 3, [SLIPPED], phases)
    assert len(phases) == 1 and not again.buffer.pairs  # once only
    assert json.loads(json.dumps(again.state_dict()))["warmed"] is True
