"""DelTA on the built-in model, short (the full figures come from benchmarks/mechanism.py): in real groups, the
shared formatting words of the final line get lower coefficients than the result's digits."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_formatting_tokens_get_lower_coefficients_than_the_result_digits():
    figures, _ = load_script(BENCHMARK).run(seed=0, steps=2)
    assert figures["rows"] >= 16, figures  # rows of groups with both right and wrong answers
    assert figures["format"] < 1.0 < figures["result"], figures
    for side in ("right", "wrong"):  # the side-specific digits of a wrong answer count as much as a right one's
        assert figures[f"format_{side}"] < figures[f"result_{side}"], figures
    assert figures["result_wins"] >= 0.6, figures  # 0.88, 0.77, 0.68 at seeds 0, 1, 2
