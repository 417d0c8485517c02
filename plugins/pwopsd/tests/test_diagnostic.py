"""The branch-viability diagnostic on the built-in model, short (the full figures: benchmarks/diagnostic.py)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "diagnostic.py"


def test_the_diagnostic_labels_every_teacher_alternative_and_measures_its_predictors():
    diagnostic = load_script(BENCHMARK)
    result = diagnostic.run(seed=0, problems=4, top_k=2)
    assert result["branches"] > 100 and 0.05 < result["viable"] < 0.95, result
    # The alternatives the teacher finds likelier lead to the answer more often: what labels misaligned with their
    # branches, or a forced token the continuation ignores, would turn to chance.
    assert result["teacher_probability"] > 0.6, result
    for name in ("position", "low_entropy", "position_within", "low_entropy_within"):
        assert 0.0 <= result[name] <= 1.0, (name, result)
