"""TriPlay-RL's mechanism on the built-in model that poses, solves and judges (stackrl/arith-skills), one step per
role: attacker, defender, evaluator. Each posed question is solved afresh by the verifier's lights (replies the
plugin never saw): the attacker's reward rises with the defender's failure on its question. The defender's replies
the verifier finds right earn more than the wrong ones (the evaluator's grade is informative), and every evaluator
row earns exactly the agreement of its verdict with the verifier's label. An attacker rewarded for the defender's
success, or an evaluator left unscored, fails it (plugins/triplay/README.md)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = load_script(Path(__file__).parents[1] / "benchmarks" / "mechanism.py")


def test_each_role_is_rewarded_by_its_partners_outcome():
    figures, roles = BENCHMARK.run(seed=0, steps=3, resolve=4, overrides=["triplay.phase_steps=1"])
    assert figures["attacks"] >= 8, figures
    assert figures["attack_vs_failure"] > 0.3, figures
    assert figures["failed_reward"] > figures["held_reward"] + 0.2, figures
    assert figures["right_reward"] > figures["wrong_reward"] + 0.2, figures
    assert len(roles.checks) >= 4 and figures["evaluator_scored"] == 1.0, figures
