"""DARC's document-augmented teacher on the built-in model, short (the full figures come from benchmarks/mechanism.py):
three real steps of configs/recipes/darc-cpu.yaml, each training rollout read against the truth the plugin never
sees."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"


def test_the_teacher_with_the_document_labels_right_where_the_solver_own_majority_does_not():
    figures = load_script(BENCHMARK).run(seed=0, steps=3)
    # The document-augmented teacher labels most groups, and rightly.
    assert figures["labelled"] >= 0.75, figures
    assert figures["label_accuracy"] >= 0.9, figures
    # The same groups' own majority answer (a self-vote label) is far worse: the asymmetry is what helps (a solver
    # that saw the document too would have its teacher's accuracy).
    assert figures["label_accuracy"] - figures["own_majority_accuracy_labelled"] >= 0.4, figures
    # The solver's reward is agreement with that label, row by row.
    assert figures["reward_is_agreement"] == 1.0, figures
