"""RRPO: reset groups continue a failed attempt from the chosen step, trained on the suffix alone."""

from pathlib import Path

import itertools
import random

import pytest

from stackrl import Generation, SampleContext
from stackrl.blocks.roles import split_steps
from stackrl.rewards import RESET, SOLVE
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import train_steps
from stackrl.testing.repository import load_script
from stackrl_rrpo import Rrpo, RrpoConfig, first_wrong_line
from stackrl.tasks import judged_wrong_step

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


class TestConformance(PluginConformance):
    plugin_name = "rrpo"
    refused_settings = [
        ({"reset": "first"}, "rrpo.reset: must be one of random, self, oracle"),
        ({"reset_share": 0.0}, r"rrpo.reset_share: must be in \(0, 1\]"),
        ({"attempts": 0}, "rrpo.attempts: must be at least 1"),
        ({"correct_reward": "rrpo"}, "rrpo.correct_reward: first attempts are judged in the sample stage"),
    ]


@pytest.mark.parametrize(
    "attempt, wrong",
    [
        ("3 + 4 = 7\n7 * 2 = 15\nThe answer is 15.", 1),  # a step's result
        ("3 + 4 = 8\n8 * 2 = 16\nThe answer is 16.", 0),  # the first step, carried on correctly
        ("3 + 4 = 7\n7 * 2 = 14\nThe answer is 15.", 2),  # the final line against the last step
        ("3 + 4 = 7\nseven times two\nThe answer is 14.", 1),  # a line that is no step
        ("3 + 4 = 7\n7 * 2 = 14\nThe answer is 14.", None),  # every line holds
        ("3 + 5 = 8\n8 * 2 = 16\nThe answer is 16.", None),  # wrong operand, right arithmetic: no line shows it
        ("12 - 5 = 7\n7 - 9 = -2\nThe answer is -2.", None),
    ],
)
def test_the_oracle_finds_the_first_wrong_line(attempt, wrong):
    assert first_wrong_line(split_steps(attempt)) == wrong


def test_a_judge_reply_marks_the_step_it_stopped_at():
    """The step a perfect judge's reply marks wrong is the oracle's first wrong line, on slipped solutions."""
    from stackrl.tasks.arithmetic import CATEGORIES, make_problem
    from stackrl.tasks.roles import judge_reply, slip

    rng = random.Random(0)
    for _ in range(200):
        solution = make_problem(rng, rng.choice(CATEGORIES))["solution"]
        attempt = slip(solution, rng)
        steps = split_steps(attempt)
        assert judged_wrong_step(judge_reply(attempt), len(steps)) == first_wrong_line(steps), attempt
        assert judged_wrong_step(judge_reply(solution), len(steps)) is None  # "correct": no reset point
    assert judged_wrong_step("3 + 4 = 7\n", 3) is None  # no verdict
    assert judged_wrong_step("1 + 1 = 2\n2 + 2 = 4\n4 + 4 = 8\nVerdict: wrong", 2) is None  # more lines than steps


class ScriptedAttempts:
    """A policy that answers each scripted question with its scripted texts in turn, over and over, and any other
    prompt (a reset prompt) with an empty continuation. ``asked`` keeps each call's prompts."""

    def __init__(self, attempts: dict[str, list[str]]):
        self.attempts, self.asked = {q: itertools.cycle(texts) for q, texts in attempts.items()}, []

    def generate(self, prompts, model="policy", **sampling):
        self.asked.append(list(prompts))
        texts = [next(self.attempts[p]) if p in self.attempts else "" for p in prompts]
        return [Generation([len(p)], [len(t)], t) for p, t in zip(prompts, texts)]


def test_reset_groups_continue_a_failed_attempt_never_a_successful_one():
    """Scripted first attempts: the first question's group is attempted right, wrong, right, wrong, so its reset
    prefix comes from the wrong attempt; the second question is always attempted right, so its group solves."""
    right = "3 + 4 = 7\n7 * 2 = 14\n14 - 1 = 13\nThe answer is 13."
    wrong = "3 + 4 = 8\n8 * 2 = 16\n16 - 1 = 15\nThe answer is 15."
    solved = "2 + 2 = 4\n4 * 3 = 12\n12 - 1 = 11\nThe answer is 11."
    first, second = "What is (3 + 4) * 2 - 1?\n", "What is (2 + 2) * 3 - 1?\n"
    policy = ScriptedAttempts({first: [right, wrong, right, wrong], second: [solved] * 4})
    ctx = SampleContext(step=0, tokenizer=None, policy=policy, _log=lambda *_: None, _plugin="rrpo",
                        rollout_columns={"answer": ["13", "13", "11", "11"]}, group_size=2)
    samples = Rrpo(RrpoConfig(reset="random", reset_share=1.0)).generate_rollout([first] * 2 + [second] * 2, ctx)
    assert policy.asked[0] == [first] * 4 + [second] * 4, "four first attempts per reset group"
    columns = samples.columns
    assert columns["role"] == [RESET, RESET, SOLVE, SOLVE]
    prefix = columns["reset_prefix"][0]
    assert prefix and wrong.startswith(prefix) and not right.startswith(prefix)
    assert columns["reset_prefix"][2] == "" and columns["reset_step"][2] == -1
    assert policy.asked[1] == [first + prefix] * 2 + [second] * 2


def _reset_run(make_config, reset: str, share: float = 1.0):
    config = make_config(
        ["rrpo"],
        model={"name_or_path": "stackrl/arith-tiny"},
        data={"options": {"categories": ["3 steps, 2-digit"]}},
        rrpo={"reset": reset, "reset_share": share},
        trainer={"per_device_train_batch_size": 16, "max_completion_length": 48},
    )
    return train_steps(config, steps=1)


def test_oracle_reset_groups_continue_from_the_first_wrong_line(make_config):
    trainer = _reset_run(make_config, "oracle")
    rollout, decode = trainer._rollouts["train"], trainer.processing_class.decode
    roles, size = rollout.columns["role"], rollout.group_size
    assert roles.count(RESET) >= size, "no reset group: the test is void"
    for group in range(rollout.num_groups):
        rows = range(group * size, (group + 1) * size)
        prefix = rollout.columns["reset_prefix"][group * size]
        assert all(rollout.columns["reset_prefix"][i] == prefix and roles[i] == roles[group * size] for i in rows)
        if roles[group * size] == SOLVE:
            assert prefix == "" and rollout.columns["reset_step"][group * size] == -1
            continue
        steps = split_steps(prefix)
        assert len(steps) == rollout.columns["reset_step"][group * size]
        assert first_wrong_line(steps) is None  # every kept line holds: the reset is at the first wrong one
        for i in rows:  # trained on the question and the prefix: the gradient falls on the suffix alone
            assert decode(rollout.prompt_ids[i]) == rollout.prompts[i] + prefix
        # A suffix is a solution: the built-in reward scores it
        assert not rollout.rewards["exact_match"][list(rows)].isnan().any()


def test_random_resets_share_the_batch_with_solving_groups(make_config):
    trainer = _reset_run(make_config, "random", share=0.5)
    rollout = trainer._rollouts["train"]
    size, roles = rollout.group_size, rollout.columns["role"]
    assert roles[:size] == [SOLVE] * size  # the first half of the groups solve
    for i, role in enumerate(roles):
        if role == SOLVE:
            assert trainer.processing_class.decode(rollout.prompt_ids[i]) == rollout.prompts[i]


@pytest.mark.mechanism
def test_oracle_resets_succeed_more_and_spread_more_than_random_ones(tmp_path):
    """The measured figures (three seeds) are in the README; short here: one seed, three steps."""
    mechanism = load_script(BENCHMARK)
    quiet = ["trainer.disable_tqdm=true"]
    oracle = mechanism.run("oracle", seed=0, steps=3, folder=tmp_path, overrides=quiet)
    random_ = mechanism.run("random", seed=0, steps=3, folder=tmp_path, overrides=quiet)
    assert oracle["spread"] > random_["spread"] + 0.1, (oracle, random_)
    assert oracle["success"] > random_["success"], (oracle, random_)
