"""InT on the built-in model: fine-tuning on the kept interventions raises how often the policy, continuing one of
the run's failed rollouts from the step before its first error, reaches the answer."""

from pathlib import Path

import pytest

from stackrl.testing.fixtures import train_steps
from stackrl.testing.heldout import recipe_config
from stackrl.testing.repository import load_script

MECHANISM = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py")
RECIPE, recovery, run_prefixes = MECHANISM.RECIPE, MECHANISM.recovery, MECHANISM.run_prefixes

pytestmark = pytest.mark.mechanism


def test_fine_tuning_on_interventions_raises_recovery_from_the_failed_prefixes(tmp_path):
    config = recipe_config(RECIPE, plugins=True, seed=0, steps=2, output_dir=tmp_path,
                           overrides=["trainer.disable_tqdm=true", "intrl.every=2", "intrl.proposer=reference",
                                          "trainer.learning_rate=1e-12"])
    seen = []
    trainer = train_steps(config, monitor=lambda hook, plugin, kwargs, result: hook == "post_step"
                          and seen.append(kwargs["ctx"].rollout))
    prefixes = run_prefixes(seen)
    before = recovery(*base_model(), prefixes, samples=8, seed=0)
    after = recovery(trainer.model, trainer.processing_class, prefixes, samples=8, seed=0)
    assert after > before + 0.1, (before, after, len(prefixes))


def base_model():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from stackrl.modeling import resolve_model_path

    path = resolve_model_path("stackrl/arith-skills")
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
