"""SPC's mechanism on the built-in roles model, short: one step of the CPU recipe on stackrl/arith-roles
(benchmarks/mechanism.py's ``signal``). Every row's reward is the game's outcome from a validity and truth worked
out apart from the plugin (stackrl.tasks.wrong_lines): a valid corruption +1 when the critic did not call it wrong,
-1 when it did, an invalid one -1; a critic row +1 when its verdict is the truth. GRPO then pushes up the corruptions
that fooled and the checks that caught."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism


def test_the_winner_of_each_confrontation_gains_and_the_loser_loses(tmp_path):
    benchmark = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py")
    found = benchmark.signal(0, tmp_path)
    sneaky, critic = found["sneaky"], found["critic"]
    # every kind of game present, so that each broken rule shows (an invalid corruption the critic let pass among them)
    assert min(sneaky.values()) >= 2 and min(critic.values()) >= 2, found
    assert found["game_rule_holds"], found
    assert found["sneaky_advantage_fooled"] > 0.5 > 0 > found["sneaky_advantage_caught"], found
    assert found["sneaky_advantage_invalid"] < 0, found
    assert found["critic_advantage_caught"] > 0 > found["critic_advantage_deceived"], found
    assert found["critic_advantage_accepted"] > 0 > found["critic_advantage_rejected"], found
