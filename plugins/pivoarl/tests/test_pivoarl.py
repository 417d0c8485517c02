"""PivoARL: failed first attempts retried from their pivotal step, the prefix kept; the credit split at the pivot."""

import itertools
import random
from pathlib import Path

import pytest
import torch

from stackrl import AdvantageContext, Generation, Rollout, SampleContext
from stackrl.blocks.roles import split_steps
from stackrl.rewards import RESET, SOLVE
from stackrl.tasks import first_wrong_line
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin, train_steps
from stackrl_pivoarl.credit import pivotal_credit, prefix_end
from stackrl_pivoarl.retries import assign, reflected_pivot, retry_slots

QUESTION = "What is (3 + 4) * 2 - 1?\n"
RIGHT = "3 + 4 = 7\n7 * 2 = 14\n14 - 1 = 13\nThe answer is 13."
WRONG = "3 + 4 = 7\n7 * 2 = 15\n15 - 1 = 14\nThe answer is 14."  # the pivot: line 1
PREFIX = "3 + 4 = 7\n"
SUFFIX_RIGHT = "7 * 2 = 14\n14 - 1 = 13\nThe answer is 13."
SUFFIX_WRONG = "7 * 2 = 16\n16 - 1 = 15\nThe answer is 15."


class TestConformance(PluginConformance):
    plugin_name = "pivoarl"
    refused_settings = [
        ({"pivot": "random"}, "pivoarl.pivot: must be one of oracle, self"),
        ({"retry_share": 1.0}, r"pivoarl.retry_share: must be in \(0, 1\)"),
        ({"retry_share": 0.0}, r"pivoarl.retry_share: must be in \(0, 1\)"),
        ({"prefix_credit": "all"}, "pivoarl.prefix_credit: must be one of retry, zero, outcome"),
        ({"metric": "pivoarl"}, "pivoarl.metric: must be a built-in outcome reward"),
    ]


def test_retry_rows_and_their_sources():
    assert [retry_slots(g, 0.5) for g in (2, 4, 8)] == [1, 2, 4]
    assert retry_slots(8, 0.01) == 1 and retry_slots(8, 0.99) == 7  # at least one row of each kind
    assert assign([None, 1, None, 0], 5) == [1, 3, 1, 3, 1]  # the attempts with a pivot in turn
    assert assign([None, None], 2) == [None, None]  # none: fresh attempts


def test_a_reflection_gives_the_step_its_check_stopped_at():
    steps = split_steps(WRONG)
    assert reflected_pivot("3 + 4 = 7 | 7 yes\n7 * 2 = 14 | 15 no\nVerdict: wrong", steps) == 1
    assert reflected_pivot("3 + 4 = 7 | 7 yes\nVerdict: correct", steps) is None
    assert reflected_pivot("3 + 4 = 7 | 7 yes", steps) is None
    assert first_wrong_line(steps) == 1


def _credit(mode, advantages=(0.5, -1.0, 1.2, -0.4), pivots=(-1, 1, -1, -1), retry_of=(-1, -1, 1, 1)):
    """Four rows of six tokens: a success, a failure whose lines are tokens 0-1, 2-3, 4-5 (pivot: line 1, so the
    prefix is tokens 0-1), and its two retries."""
    mask = torch.ones(4, 6)
    spans = [[], [(0, 2), (2, 4), (4, 6)], [], []]
    return pivotal_credit(torch.tensor(advantages), mask, spans, list(pivots), list(retry_of), mode)


def test_the_prefix_of_a_retried_failure_takes_its_retries_mean_advantage_floored_at_zero():
    out, changed = _credit("retry")
    assert out[1].tolist() == pytest.approx([0.4, 0.4, -1.0, -1.0, -1.0, -1.0])  # (1.2 - 0.4) / 2 on the prefix
    assert out[0].tolist() == [0.5] * 6 and out[2].tolist() == pytest.approx([1.2] * 6)  # other rows: their own
    assert changed == 2
    floored, _ = _credit("retry", advantages=(0.5, -1.0, -0.2, -0.4))
    assert floored[1, :2].tolist() == [0.0, 0.0] and floored[1, 2:].tolist() == [-1.0] * 4  # never blamed


def test_zero_isolates_the_prefix_and_outcome_keeps_plain_grpo():
    zero, _ = _credit("zero")
    assert zero[1].tolist() == [0.0, 0.0, -1.0, -1.0, -1.0, -1.0]
    outcome, changed = _credit("outcome")
    assert outcome[1].tolist() == [-1.0] * 6 and changed == 0


def test_a_pivot_at_the_first_line_has_no_prefix_and_per_token_advantages_are_read_per_row():
    assert prefix_end([(0, 2), (2, 4)], 0) == 0 and prefix_end([(0, 2), (2, 4)], 2) == 4
    out, changed = _credit("retry", pivots=(-1, 0, -1, -1))
    assert out[1].tolist() == [-1.0] * 6 and changed == 0
    per_token = torch.tensor([0.5, -1.0, 1.2, -0.4])[:, None].repeat(1, 6)
    per_token[2] = torch.tensor([2.0, 2.0, 2.0, 0.4, 0.4, 0.4])  # a row mean of 1.2
    out, _ = pivotal_credit(per_token, torch.ones(4, 6), [[], [(0, 2), (2, 4), (4, 6)], [], []],
                            [-1, 1, -1, -1], [-1, -1, 1, 1], "retry")
    assert out[1, :2].tolist() == pytest.approx([0.4, 0.4]) and out[2].tolist() == per_token[2].tolist()


class ScriptedPolicy:
    """Answers each prompt with its scripted texts in turn (one character a token); ``asked`` keeps each call."""

    def __init__(self, replies: dict[str, list[str]]):
        self.replies = {p: itertools.cycle(t) for p, t in replies.items()}
        self.asked: list[tuple[list, dict]] = []

    eos_token_ids = [9]

    def generate(self, prompts, model="policy", caller=None, **sampling):
        prompts = [p if isinstance(p, str) else "".join(map(chr, p)) for p in prompts]
        self.asked.append((list(prompts), sampling))
        out = []
        for p in prompts:
            text = next(self.replies[p])
            out.append(Generation([ord(c) for c in p], [ord(c) for c in text], text))
        return out


class CharTokenizer:
    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids):
        return "".join(map(chr, ids))


def _sample(policy, size=4, groups=1, answers=("13",), **settings):
    ctx = SampleContext(step=0, tokenizer=CharTokenizer(), policy=policy, _log=lambda *_: None, _plugin="pivoarl",
                        rollout_columns={"answer": [a for a in answers for _ in range(size)]}, group_size=size)
    plugin = make_plugin("pivoarl", **settings)
    prompts = [QUESTION] * size if groups == 1 else [q for q in (QUESTION, "Q2\n") for _ in range(size)]
    return plugin, plugin.generate_rollout(prompts, ctx)


def test_a_failed_attempt_is_retried_from_its_first_wrong_line_the_prefix_kept_verbatim():
    policy = ScriptedPolicy({QUESTION: [RIGHT, WRONG], QUESTION + PREFIX: [SUFFIX_RIGHT, SUFFIX_WRONG]})
    _, samples = _sample(policy)
    assert policy.asked[0][0] == [QUESTION] * 2, "two first attempts"
    assert policy.asked[1][0] == [QUESTION + PREFIX] * 2, "two retries from the question and the kept prefix"
    columns = samples.columns
    assert columns["role"] == [SOLVE, SOLVE, RESET, RESET]
    assert columns["pivoarl_pivot"] == [-1, 1, 1, 1]
    assert columns["pivoarl_retry_of"] == [-1, -1, 1, 1]
    assert columns["pivoarl_prefix"] == ["", "", PREFIX, PREFIX]
    # a retry is trained on the question and the prefix: its completion is the suffix alone
    assert "".join(map(chr, samples.prompt_ids[2])) == QUESTION + PREFIX
    assert "".join(map(chr, samples.completion_ids[2])) == SUFFIX_RIGHT


def test_without_a_failure_the_retry_rows_attempt_afresh():
    policy = ScriptedPolicy({QUESTION: [RIGHT]})
    _, samples = _sample(policy)
    assert policy.asked[1][0] == [QUESTION] * 2
    assert samples.columns["role"] == [SOLVE] * 4 and samples.columns["pivoarl_retry_of"] == [-1] * 4


def test_a_failure_whose_every_line_holds_has_no_pivot_and_a_row_without_answer_none_either():
    operand = "3 + 5 = 8\n8 * 2 = 16\n16 - 1 = 15\nThe answer is 15."  # a wrong operand: no line shows it
    policy = ScriptedPolicy({QUESTION: [operand, WRONG], QUESTION + PREFIX: [SUFFIX_RIGHT]})
    _, samples = _sample(policy)
    assert samples.columns["pivoarl_pivot"] == [-1, 1, 1, 1]
    policy = ScriptedPolicy({QUESTION: [WRONG]})
    _, samples = _sample(policy, answers=(None,))
    assert samples.columns["role"] == [SOLVE] * 4


def test_the_self_pivot_asks_the_policy_to_judge_each_failure_greedily():
    from stackrl.tasks import judge_prompt

    judged = judge_prompt(QUESTION, WRONG)
    reply = "3 + 4 = 7 | 7 yes\n7 * 2 = 14 | 15 no\nVerdict: wrong"
    policy = ScriptedPolicy({QUESTION: [RIGHT, WRONG], judged: [reply],
                             QUESTION + PREFIX: [SUFFIX_RIGHT]})
    _, samples = _sample(policy, pivot="self", reflection_return=False)
    assert policy.asked[1] == ([judged], {"do_sample": False})
    assert samples.columns["pivoarl_prefix"][2:] == [PREFIX, PREFIX]
    assert samples.loss_mask is None and "pivoarl_reflection" not in samples.columns  # not trained


def test_a_trained_reflection_follows_the_failure_in_its_row_sampled_from_its_exact_tokens():
    from stackrl.tasks import judge_prompt

    reply = "3 + 4 = 7 | 7 yes\n7 * 2 = 14 | 15 no\nVerdict: wrong"
    judged = judge_prompt(QUESTION, WRONG)
    policy = ScriptedPolicy({QUESTION: [RIGHT, WRONG], judged: [reply], QUESTION + PREFIX: [SUFFIX_RIGHT]})
    _, samples = _sample(policy, pivot="self")
    assert policy.asked[1] == ([judged], {}), "sampled at the run's settings, from the attempt and the marker"
    row = "".join(map(chr, samples.completion_ids[1]))
    assert row == WRONG + "\nCheck:\n" + reply
    marker = len(WRONG), len(WRONG) + len("\nCheck:\n")
    assert samples.loss_mask[1] == [1] * marker[0] + [0] * (marker[1] - marker[0]) + [1] * len(reply)
    assert samples.columns["pivoarl_reflection"] == [None, (marker[1], len(row)), None, None]
    assert samples.columns["pivoarl_prefix"][2:] == [PREFIX, PREFIX]  # retried from the line it marked
    assert samples.loss_mask[0] == [1] * len(RIGHT) and samples.completion_ids[0] == [ord(c) for c in RIGHT]


def test_a_reflection_returns_its_retries_success_against_the_groups_other_reflections():
    from stackrl_pivoarl.credit import reflection_returns

    # rows 0 and 1 failed and reflected; 2 and 3 retry row 0 (one succeeds), none retries row 1 (no pivot found)
    returns, values = reflection_returns([(0, 1), (0, 1), None, None], [-1, -1, 0, 0], [False, False, True, False], 4)
    assert returns == {0: 0.5, 1: 0.0}
    spread = torch.tensor([0.5, 0.0]).std().item()
    assert values[0] == pytest.approx(0.25 / (spread + 1e-4)) and values[1] == pytest.approx(-0.25 / (spread + 1e-4))
    _, alone = reflection_returns([(0, 1), None, None, None], [-1, 0, 0, -1], [False, True, True, False], 4)
    assert alone == {0: 0.0}  # no other reflection to compare with


def _advantage_context(completions, columns, advantages, size=4):
    ids = [[ord(c) for c in text] for text in completions]
    rollout = Rollout(prompts=[QUESTION] * len(ids), completions=list(completions), prompt_ids=[[1]] * len(ids),
                      completion_ids=ids, columns=columns, group_size=size, advantages=advantages)
    logged = {}
    ctx = AdvantageContext(step=0, tokenizer=CharTokenizer(), policy=None, _log=logged.__setitem__,
                           _plugin="pivoarl", rollout=rollout, total_reward=torch.zeros(len(ids)))
    return ctx, logged


def test_the_hook_credits_the_failures_prefix_lines_and_leaves_its_suffix_negative():
    columns = {"role": [SOLVE, SOLVE, RESET, RESET], "pivoarl_pivot": [-1, 1, 1, 1],
               "pivoarl_retry_of": [-1, -1, 1, 1], "pivoarl_prefix": ["", "", PREFIX, PREFIX]}
    advantages = torch.tensor([0.8, -1.2, 0.8, -0.4])
    ctx, logged = _advantage_context([RIGHT, WRONG, SUFFIX_RIGHT, SUFFIX_WRONG], columns, advantages)
    out = make_plugin("pivoarl").reshape_advantages(advantages, ctx)
    mask = ctx.rollout.completion_mask().bool()
    cut = len(PREFIX)
    assert out[1, :cut].tolist() == pytest.approx([0.2] * cut)  # the prefix line: (0.8 - 0.4) / 2
    assert (out[1, cut:][mask[1, cut:]] == -1.2).all()  # the pivot and the suffix: the failure's own
    for row in (0, 2, 3):
        assert (out[row][mask[row]] == advantages[row]).all()
    assert logged["pivoarl/prefix_tokens"] == pytest.approx(cut / int(mask.sum()))


def test_the_hook_credits_a_trained_reflection_by_its_return():
    reply = "3 + 4 = 7 | 7 yes\n7 * 2 = 14 | 15 no\nVerdict: wrong"
    failed = WRONG + "\nCheck:\n" + reply
    span = (len(failed) - len(reply), len(failed))
    columns = {"role": [SOLVE, SOLVE, RESET, RESET], "pivoarl_pivot": [1, 1, 1, 1],
               "pivoarl_retry_of": [-1, -1, 1, 1], "pivoarl_prefix": ["", "", PREFIX, PREFIX],
               "pivoarl_reflection": [span, span, None, None]}
    advantages = torch.tensor([-0.5, -0.5, 1.5, -0.5])
    ctx, logged = _advantage_context([failed, failed, SUFFIX_RIGHT, SUFFIX_WRONG], columns, advantages)
    ctx.rollout.rewards = {"exact_match": torch.tensor([0.0, 0.0, 1.0, 0.0])}
    out = make_plugin("pivoarl", pivot="self").reshape_advantages(advantages, ctx)
    spread = torch.tensor([0.0, 0.5]).std().item()
    # row 1's reflection led to retries that succeed half the time, row 0's to none
    assert out[1, span[0]:span[1]].tolist() == pytest.approx([0.25 / (spread + 1e-4)] * len(reply))
    assert out[0, span[0]:span[1]].tolist() == pytest.approx([-0.25 / (spread + 1e-4)] * len(reply))
    assert out[1, :len(PREFIX)].tolist() == pytest.approx([0.5] * len(PREFIX))  # its prefix: its retries' mean
    assert out[1, len(PREFIX):span[0]].tolist() == [-0.5] * (span[0] - len(PREFIX))  # the failure's own
    assert logged["pivoarl/reflection_return"] == pytest.approx(0.25)


def test_the_hook_stands_aside_on_a_rollout_it_did_not_generate():
    ctx, _ = _advantage_context([RIGHT] * 4, {"role": [SOLVE] * 4}, torch.zeros(4))
    assert make_plugin("pivoarl").reshape_advantages(torch.zeros(4), ctx) is None


def _run(make_config, **settings):
    config = make_config(
        ["pivoarl"],
        model={"name_or_path": "stackrl/arith-tiny"},
        data={"options": {"categories": ["4 steps, 1-digit", "3 steps, 2-digit"]}},
        pivoarl=settings,
        trainer={"per_device_train_batch_size": 16, "num_generations": 4, "max_completion_length": 40},
    )
    return train_steps(config, steps=1)


def test_on_the_built_in_model_retries_continue_the_verbatim_prefix_before_the_first_wrong_line(make_config):
    trainer = _run(make_config)
    rollout, decode = trainer._rollouts["train"], trainer.processing_class.decode
    size, columns = rollout.group_size, rollout.columns
    retries = [i for i, j in enumerate(columns["pivoarl_retry_of"]) if j >= 0]
    assert retries, "no retry: the test is void"
    for i in retries:
        source = (i // size) * size + columns["pivoarl_retry_of"][i]
        steps = split_steps(rollout.completions[source])
        k = columns["pivoarl_pivot"][i]
        assert k == first_wrong_line(steps) and rollout.rewards["exact_match"][source] == 0
        assert columns["pivoarl_prefix"][i] == "".join(steps[:k])  # verbatim
        assert decode(rollout.prompt_ids[i]) == rollout.prompts[i] + columns["pivoarl_prefix"][i]
        assert not rollout.rewards["exact_match"][i].isnan()  # a retry is a solution: the reward scores it
    # the credit split on the real rollout: a retried failure's prefix is never blamed, its suffix keeps one
    # negative advantage; a retry row's advantage is one value on its suffix
    advantages, mask = rollout.advantages, rollout.completion_mask().bool()
    assert advantages.dim() == 2
    split = 0
    for source in {(i // size) * size + columns["pivoarl_retry_of"][i] for i in retries}:
        values = advantages[source][mask[source]]
        k = columns["pivoarl_pivot"][source]
        prefix = len(trainer.processing_class("".join(split_steps(rollout.completions[source])[:k]),
                                              add_special_tokens=False)["input_ids"])
        assert (values[:prefix] >= 0).all(), values
        assert (values[prefix:] == values[-1]).all() and values[-1] <= 0, values  # 0: its group all failed
        split += prefix > 0 and values[-1] < 0
    assert split, "no retried failure with a prefix: the test is void"
    for i in retries:
        assert (advantages[i][mask[i]] == advantages[i][0]).all()
