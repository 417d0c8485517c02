"""CoVo's reward on the built-in model: rollouts written by hand or sampled, scored through a real trainer."""

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from stackrl import RewardContext, Rollout
from stackrl.config import load_config
from stackrl.run import build_trainer
from stackrl_covo import CoVo, CoVoConfig

CPU_RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "covo-cpu.yaml"
ARITH = {"answer_extractor": "answer_is", "probe_template": "\nThe answer is {answer}", "math_verify": False}


def recipe(tmp_path, *overrides):
    """The CPU recipe, shrunk for tests."""
    quick = ["data.size=16", "trainer.per_device_train_batch_size=8", "trainer.num_generations=4",
             "trainer.max_completion_length=40", "eval.before_and_after=false", f"output_dir={tmp_path / 'run'}"]
    return load_config([CPU_RECIPE], [*quick, *overrides])


@pytest.fixture(scope="session")
def arith_trainer(tmp_path_factory):
    """A trainer on stackrl/arith-tiny (the CPU recipe); only its policy is used."""
    torch.set_num_threads(1)
    return build_trainer(recipe(tmp_path_factory.mktemp("covo")))


def rollout_of(tokenizer, prompts: list[str], completions: list[str], group_size: int) -> Rollout:
    """A rollout of hand-written completions, tokenized as generation leaves them (eos last)."""
    eos = [tokenizer.eos_token_id]
    completion_ids = [tokenizer(c, add_special_tokens=False)["input_ids"] + eos for c in completions]
    return Rollout(
        prompts=prompts,
        completions=completions,
        prompt_ids=[tokenizer(p)["input_ids"] for p in prompts],
        completion_ids=completion_ids,
        columns={},
        group_size=group_size,
    )


def sampled_rollout(trainer, questions: list[str], group_size: int, seed: int = 0, max_new_tokens: int = 48) -> Rollout:
    prompts = [q for q in questions for _ in range(group_size)]
    torch.manual_seed(seed)
    generations = trainer._shared_policy.generate(prompts, temperature=1.0, max_new_tokens=max_new_tokens)
    return Rollout(
        prompts=prompts,
        completions=[g.text for g in generations],
        prompt_ids=[g.prompt_ids for g in generations],
        completion_ids=[g.completion_ids for g in generations],
        columns={},
        group_size=group_size,
    )


def covo_reward(trainer, rollout: Rollout, training=True, **settings) -> tuple[torch.Tensor, dict[str, float]]:
    """The plugin's rewards for ``rollout`` and what it logged, with ``settings`` over the arithmetic ones."""
    config = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(CoVoConfig), {**ARITH, **settings}))
    logs = {}
    ctx = RewardContext(
        step=0,
        tokenizer=trainer.processing_class,
        policy=trainer._shared_policy,
        _log=logs.__setitem__,
        _plugin="covo",
        rollout=rollout,
        training=training,
    )
    return torch.as_tensor(CoVo(config).reward(ctx)), logs


# The helpers as fixtures: test modules of several packages share one pytest run, so they import no conftest.
@pytest.fixture
def covo():
    """The helpers above: ``covo.reward``, ``covo.rollout_of``, ``covo.sampled``, ``covo.recipe``."""

    class Helpers:
        reward = staticmethod(covo_reward)
        rollout_of = staticmethod(rollout_of)
        sampled = staticmethod(sampled_rollout)
        recipe = staticmethod(recipe)

    return Helpers
