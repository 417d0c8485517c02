"""Self-verification RL's mechanism on the built-in judging model, short (stackrl.testing.judging.VerifyMechanism):
one step of the CPU recipe on stackrl/arith-skills, six of its eight groups verifying. The held-out figures come
from RISE's benchmark (plugins/rise/benchmarks/mechanism.py --plugin selfverify)."""

import pytest

from stackrl.testing.judging import VerifyMechanism

pytestmark = pytest.mark.mechanism


class TestMechanism(VerifyMechanism):
    plugin_name = "selfverify"
