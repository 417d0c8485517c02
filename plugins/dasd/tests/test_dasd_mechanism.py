"""DASD's loss form on the built-in task and model, short: one seed, two steps against the same loss with nothing
pushed (OPSD's). The full figures (3 seeds, 30 steps, and the advantage form against GRPO) come from
benchmarks/mechanism.py."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_the_loss_forms_least_sure_tokens_keep_their_entropy_where_opsd_lowers_it():
    mechanism = load_script(BENCHMARK)
    dasd_before, dasd_after = mechanism.run("loss", seed=0, steps=2, heldout=16)
    opsd_before, opsd_after = mechanism.run("opsd", seed=0, steps=2, heldout=16)
    assert dasd_before["fork_entropy"] == opsd_before["fork_entropy"], "both arms start from the same model"
    assert opsd_after["fork_entropy"] < opsd_before["fork_entropy"], (opsd_before, opsd_after)
    assert dasd_after["fork_entropy"] > dasd_before["fork_entropy"], (dasd_before, dasd_after)
