"""Reflect, Retry, Reward: reflections on failed attempts, rewarded by their retry's success, alone trained."""

from types import SimpleNamespace

import torch

from stackrl import Rollout
from stackrl.rewards import REFLECT, SOLVE, exact_match
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import train_steps
from stackrl_rrr import Rrr
from stackrl_rrr.config import REFLECT_TEMPLATE


class TestConformance(PluginConformance):
    plugin_name = "rrr"
    refused_settings = [
        ({"attempts": 0}, "rrr.attempts: must be at least 1"),
        ({"metric": "rrr"}, "rrr.metric: must be a built-in outcome reward"),
        ({"reflect_template": "{prompt}\nReflect:\n"}, r"rrr.reflect_template: must contain \{attempt\}"),
        ({"retry_template": "{prompt}{attempt}\nTry again.\n"}, r"rrr.retry_template: must contain \{reflection\}"),
    ]


def test_a_reflection_earns_its_retrys_success_and_solving_rows_leave_the_loss():
    rollout = Rollout(
        prompts=["q"] * 4, completions=["r"] * 4, prompt_ids=[[1]] * 4, completion_ids=[[2]] * 4,
        columns={"role": [REFLECT, REFLECT, SOLVE, SOLVE], "retry_correct": [True, False, None, None]},
        group_size=2,
    )  # fmt: skip
    logged = {}
    ctx = SimpleNamespace(rollout=rollout, log=lambda name, value: logged.__setitem__(name, value))
    assert Rrr().reward(ctx) == [1.0, 0.0, None, None]
    assert rollout.excluded == {2, 3}
    assert logged == {"retry_success": 0.5}


def test_failed_attempts_are_reflected_on_and_retried(make_config):
    config = make_config(
        ["rrr"],
        model={"name_or_path": "stackrl/arith-tiny"},
        data={"options": {"categories": ["3 steps, 2-digit"]}},
        rewards={"exact_match": None},
        trainer={"per_device_train_batch_size": 16, "max_completion_length": 48},
    )
    trainer = train_steps(config, steps=1)
    rollout, decode, size = trainer._rollouts["train"], trainer.processing_class.decode, 4
    roles, retry_correct, retries = rollout.columns["role"], rollout.columns["retry_correct"], rollout.columns["retry"]
    assert REFLECT in roles, "no failed attempt: the test is void"
    for i, role in enumerate(roles):
        prompt, answer = rollout.prompts[i], rollout.columns["answer"][i]
        if role == SOLVE:
            assert retry_correct[i] is None and retries[i] is None and i in rollout.excluded
            continue
        trained_on = decode(rollout.prompt_ids[i])  # the question and a failed attempt, in the reflect template
        attempt = trained_on[len(prompt) : -len("\nCheck:\n")]
        assert trained_on == REFLECT_TEMPLATE.format(prompt=prompt, attempt=attempt)
        assert not exact_match(attempt, answer)
        assert decode(rollout.prompt_ids[i - i % size]) == trained_on  # one failed attempt per group
        assert i not in rollout.excluded
        assert retry_correct[i] is (exact_match(retries[i], answer) == 1.0)  # judged from the retry's own text
        assert rollout.rewards["rrr"][i] == exact_match(retries[i], answer)
    assert torch.isnan(rollout.rewards["rrr"][[i for i, r in enumerate(roles) if r == SOLVE]]).all()
