"""PAG: answer, self-verify, revise only after a "wrong" verdict; every segment rewarded and credited on its own."""

import pytest
import torch

from stackrl.blocks.turns import segment_advantages
from stackrl.rewards import exact_match
from stackrl.tasks import JUDGE_MARKER, RETRY_INSTRUCTION, parse_verdict
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import train_steps
from stackrl.testing.judging import verified_rows
from stackrl_pag import segment_rewards

A, V = "answer", "verify"


class TestConformance(PluginConformance):
    plugin_name = "pag"
    refused_settings = [({"turns": 0}, "must be at least 1"), ({"shaping": -1.0}, "must be 0 or more"),
                        ({"metric": "pag"}, "must be a built-in outcome reward"),
                        ({"verify_instruction": " "}, "must hold the instruction")]


@pytest.mark.parametrize(
    "kinds, outcomes, rewards",
    [
        ([A, V], [True, True], [1.0, 1.0]),  # a right answer judged correct
        ([A, V], [True, False], [1.0, 0.0]),  # ... judged wrong: the verdict is wrong
        ([A, V], [False, None], [0.0, 0.0]),  # no verdict earns nothing
        ([A, V, A], [False, False, True], [0.0, 1.0, 1.0 + 0.5]),  # a fix: the shaping adds its gain
        ([A, V, A], [True, False, False], [1.0, 0.0, 0.0 - 0.5]),  # a break: the shaping takes its loss
        ([A, V, A], [False, False, False], [0.0, 1.0, 0.0]),
        # the second check is judged against the answer it checks, the revised one
        ([A, V, A, V, A], [False, False, True, False, True], [0.0, 1.0, 1.5, 0.0, 1.0]),
        ([A], [True], [1.0]),
    ],
)
def test_segment_rewards(kinds, outcomes, rewards):
    assert segment_rewards(kinds, outcomes, shaping=0.5) == rewards


def test_only_answers_judged_wrong_are_revised_and_each_segment_is_credited_alone(make_config):
    config = make_config(
        ["pag"],
        model={"name_or_path": "stackrl/arith-skills"},
        data={"options": {"categories": ["2 steps, 1-digit", "3 steps, 1-digit", "4 steps, 1-digit"]}},
        rewards={"exact_match": None},
        pag={"turns": 3},
        trainer={"per_device_train_batch_size": 16, "max_completion_length": 48},
    )
    trainer = train_steps(config, steps=1)
    rollout = trainer._rollouts["train"]
    kinds = verified_rows(rollout, trainer.processing_class, verify="\n" + JUDGE_MARKER + "\n",
                          revise="\n" + RETRY_INSTRUCTION + "\n", answers=3)
    values, revised = [], 0
    for i, (segments, row) in enumerate(zip(rollout.columns["segments"], kinds)):
        assert row == [A, V, A, V, A][: len(row)]  # at most three answers, each but the last checked
        revised += row.count(A) > 1
        answer = rollout.columns["answer"][i]
        outcomes = [exact_match(s.text, answer) == 1.0 if s.kind == A else parse_verdict(s.text) for s in segments]
        values.append(segment_rewards(row, outcomes, 1.0))
        final = [o for s, o in zip(segments, outcomes) if s.kind == A][-1]
        assert rollout.rewards["pag"][i] == float(final)  # the component is the final answer's correctness
    assert revised, "no answer was judged wrong: the check is void"
    expected = segment_advantages(values, rollout.columns["segments"], rollout.group_size, rollout.advantages.size(1))
    assert torch.allclose(rollout.advantages, expected) and rollout.advantages.abs().sum() > 0
