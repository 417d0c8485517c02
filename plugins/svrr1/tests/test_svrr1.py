"""SVR-R1: answer, self-verdict, a rethink only after "no", the final answer's outcome the one reward."""

from types import SimpleNamespace

import pytest
import torch

from stackrl.blocks.turns import Segment
from stackrl.context import Rollout
from stackrl.rewards import exact_match
from stackrl.tasks import JUDGE_MARKER, RETRY_INSTRUCTION
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import train_steps
from stackrl.testing.judging import verified_rows
from stackrl_svrr1 import SvrR1

A, V = "answer", "verify"
SKILLS = {"name_or_path": "stackrl/arith-skills"}
EASY = {"options": {"categories": ["2 steps, 1-digit", "3 steps, 1-digit"]}}
SMALL = {"per_device_train_batch_size": 16, "max_completion_length": 48}


class TestConformance(PluginConformance):
    plugin_name = "svrr1"
    refused_settings = [
        ({"turns": 0}, "svrr1.turns: must be at least 1"),
        ({"metric": "svrr1"}, "svrr1.metric: must be a built-in outcome reward"),
        ({"verify_instruction": " "}, "svrr1.verify_instruction: must hold the instruction"),
        ({"rethink_instruction": ""}, "svrr1.rethink_instruction: must hold the instruction"),
    ]


def test_the_reward_is_the_final_answer_s_correctness_whatever_the_verdicts_said():
    def row(*turns):  # (kind, text) in order; spans do not matter to the reward
        return [Segment(kind, 0, 0, 1, text) for kind, text in turns]

    right, wrong = "The answer is 4.", "The answer is 5."
    segments = [
        row((A, wrong), (V, "Verdict: wrong"), (A, right), (V, "Verdict: correct")),  # a rethink that fixes
        row((A, right), (V, "Verdict: wrong"), (A, wrong), (V, "Verdict: wrong")),  # one that breaks
        row((A, wrong), (V, "Verdict: correct")),  # a "yes" finalises a wrong answer
        row((A, right), (V, "Verdict: correct")),
    ]
    rollout = Rollout(prompts=["q"] * 4, completions=[""] * 4, prompt_ids=[[1]] * 4, completion_ids=[[2]] * 4,
                      columns={"segments": segments, "answer": ["4"] * 4}, group_size=4)
    logged, acted = {}, []
    ctx = SimpleNamespace(rollout=rollout, log=logged.__setitem__, acted=lambda n, of, hint=None: acted.append((n, of)))
    assert SvrR1().reward(ctx) == [1.0, 0.0, 0.0, 1.0]
    assert acted == [(2, 4)] and logged["rethought"] == 0.5 and logged["verifications"] == 1.5
    assert logged["first_answer_correct"] == 0.5 and logged["rethought_net_correction"] == 0.0


def test_only_no_verdicts_buy_a_rethink_and_the_outcome_s_advantage_trains_every_written_token(make_config):
    config = make_config(["svrr1"], model=SKILLS, data=EASY, rewards={"exact_match": None}, trainer=SMALL)
    trainer = train_steps(config, steps=1)
    rollout = trainer._rollouts["train"]
    kinds = verified_rows(rollout, trainer.processing_class, verify="\n" + JUDGE_MARKER + "\n",
                          revise="\n" + RETRY_INSTRUCTION + "\n", answers=2)
    assert all(row in ([A, V], [A, V, A, V]) for row in kinds)  # every answer gets its verdict, the one at the cap too
    rethought = sum(len(row) == 4 for row in kinds)
    final = [exact_match(segments[-2].text, answer)
             for segments, answer in zip(rollout.columns["segments"], rollout.columns["answer"])]
    assert rethought, "no self-verdict said no: the rethink is void"
    final = torch.tensor(final)
    assert torch.equal(rollout.rewards["svrr1"], final)  # the component is the final answer's correctness
    # No advantage of its own for a verdict: GRPO's one advantage per row, on answers and checks alike.
    groups = final.view(-1, rollout.group_size)
    expected = ((groups - groups.mean(1, keepdim=True)) / (groups.std(1, keepdim=True) + 1e-4)).flatten()
    assert rollout.advantages.dim() == 1 and torch.allclose(rollout.advantages, expected, atol=1e-5)
