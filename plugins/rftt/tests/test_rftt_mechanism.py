"""RFTT on the built-in judging model (stackrl/arith-skills), short: four steps of the CPU recipe, the warm-up after
step 2. The warm-up's targets are the policy's attempts annotated as the rule says; the new tokens' rows train; the
policy never writes a functional token before the warm-up and does after it, and the reward stays the outcome of
the final answer. The accuracy against plain GRPO comes from benchmarks/mechanism.py."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

PLUGIN = Path(__file__).resolve().parents[1]


def test_the_warmup_teaches_the_tokens_and_the_policy_samples_them(tmp_path):
    figures = load_script(PLUGIN / "benchmarks" / "mechanism.py").run("rftt", 0, 4, tmp_path, [], heldout=0)
    # The targets: every attempt checked with a true verdict, a right refinement exactly after a wrong attempt.
    assert figures["targets"] >= 20 and 0 < figures["refined_targets"] < figures["targets"], figures
    assert figures["targets_true"] == 1.0, figures
    # The tokens are the model's own, and their new rows train: the input embedding and the output layer's rows of <verify> and <refine>.
    assert figures["added"] == 1.0 and figures["embedding_moved"] > 0.01 and figures["output_moved"] > 0.05, figures
    # Before the warm-up the policy never writes them; after it, it samples them in RL.
    assert figures["use_before"] == 0.0 and figures["use_after"] >= 0.1, figures
    assert figures["reward_is_outcome"] == 1.0, figures
