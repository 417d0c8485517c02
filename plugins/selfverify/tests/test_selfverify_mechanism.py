"""Self-verification RL's mechanism on the built-in judging model, short: one step of the CPU recipe on
stackrl/arith-skills, six of its eight groups verifying. The held-out figures come from RISE's benchmark
(plugins/rise/benchmarks/mechanism.py --plugin selfverify)."""

from pathlib import Path

from stackrl.testing.fixtures import train_steps
from stackrl.testing.heldout import recipe_config
from stackrl.testing.judging import verify_signal

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "selfverify-cpu.yaml"


def test_verifications_of_on_policy_attempts_split_and_the_verifier_pushes_right_verdicts_up(tmp_path):
    config = recipe_config(RECIPE, plugins=True, seed=0, steps=1, output_dir=tmp_path,
                           overrides=["trainer.disable_tqdm=true", "selfverify.verify_share=0.75"])
    signal = verify_signal(train_steps(config)._rollouts["train"], "selfverify")
    # The recipe leaves room for a judge's check of a 4-step attempt (about 120 tokens): critiques reach a verdict.
    assert signal["verdict_rate"] > 0.85, signal
    # An informative but imperfect judge: most verify groups disagree among themselves, so GRPO has a signal...
    assert signal["groups_split"] >= 0.5, signal
    # ...and it raises the critiques whose verdict is right, lowers those whose verdict is wrong.
    assert signal["advantage_right"] > 0.2 and signal["advantage_wrong"] < -0.2, signal
