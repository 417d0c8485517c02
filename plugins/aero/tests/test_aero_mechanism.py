"""AERO's mechanism on the built-in posing model (stackrl/arith-skills): in a short run of the CPU recipe, every
`ctx.generate` call of the plugin is recorded at the policy, and a monitor redoes the rules by hand from those
generations (plugins/aero/benchmarks/mechanism.py): the generator's reward is 1 exactly for the questions whose
normalised answer entropy lies in [0.3, 0.7]; the questions kept for the solver are exactly those of them whose two
independent corrections (retries of the first attempt of the two largest answer clusters) agree, labelled with
that answer, with the attempts of the clusters that differ from it as the refiner's rows; the solver's rows earn 1
for reaching their label, and no labelled row is drawn before `stagger` + 1 steps have passed. Broken on purpose,
each fails it: the band inverted, the correction skipped (the majority as label), unanswered samples counted as a
cluster of their own, and the stagger ignored (plugins/aero/README.md)."""

from pathlib import Path

import pytest

from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = load_script(Path(__file__).parents[1] / "benchmarks" / "mechanism.py")


def test_kept_questions_rewards_and_labels_are_the_rules_by_hand():
    figures, monitor = BENCHMARK.run(seed=0, steps=6, overrides=["trainer.per_device_train_batch_size=8",
                                                                 "aero.proposer_share=0.5"])
    counts = monitor.counts
    assert figures["mismatches"] == 0, monitor.notes
    # Not vacuous: questions in every zone, corrections that converged and some that did not, labelled rows drawn.
    assert counts["zpd"] >= 3 and counts["mastery"] >= 3 and counts["chaos"] >= 3, dict(counts)
    assert 1 <= counts["converged"] < counts["corrected"], dict(counts)
    assert counts["solver_rows"] >= 4, dict(counts)
