"""Role Anchor's mechanism on stackrl/arith-roles' decomposer, through the plugin's own loss: a pull toward planted
decompositions (the shortcut the pipeline's reward pays for) raises the held-out planted margin and moves the role
shift; the anchor holds both down. Fails with the anchor's sign flipped (the role shift runs away), the neutral prompt
equal to the role prompt, or the anchor taken against the live policy (both: no effect at all)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "mechanism.py"


def test_anchor_holds_the_decomposer_to_its_role():
    mechanism = load_script(BENCHMARK)
    short = dict(steps=6, seed=0, problems=8, heldout=8, share=False)
    alone = mechanism.run(strength=0.0, **short)
    anchored = mechanism.run(strength=10.0, **short)
    assert alone["margin_rise"] > 10.0, alone  # the pull makes the decomposer prefer planting
    # the anchor keeps much of that preference from forming ...
    assert anchored["margin_rise"] < 0.6 * alone["margin_rise"], (anchored, alone)
    # ... by keeping the role shift near the start's, where the pull alone moves it
    assert anchored["role_drift"] < 0.8 * alone["role_drift"], (anchored, alone)
