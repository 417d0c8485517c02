"""RISE's mechanism on the built-in judging model, short (stackrl.testing.judging.VerifyMechanism): one step of the
CPU recipe on stackrl/arith-skills, six of its eight groups verifying. The held-out figures (judging and solving
after training, against plain GRPO) come from benchmarks/mechanism.py."""

import pytest

from stackrl.testing.judging import VerifyMechanism

pytestmark = pytest.mark.mechanism


class TestMechanism(VerifyMechanism):
    plugin_name = "rise"
