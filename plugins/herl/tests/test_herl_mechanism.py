"""HeRL on the built-in model through the real trainer, short (the full figures come from benchmarks/mechanism.py):
the rubric a failed response missed guides its regeneration, the bonus ranks it by what that guidance gained, and
the guided rows join their groups trained on that guidance at the authors' off-policy weight."""

from pathlib import Path

import pytest

from stackrl.rewards import exact_match
from stackrl.tasks import checked_retry_prompt
from stackrl.tasks.roles import judge_reply
from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "mechanism.py"
ALPHA, WEIGHT = 0.05, 0.25  # the CPU recipe's alpha, and gamma / (1 + gamma)^2 at its gamma 1


def test_guidance_by_the_unmet_rubric_raises_regenerations_and_the_bonus_ranks_responses_by_it():
    figures, seen = load_script(BENCHMARK).run(seed=0, steps=3, controls=True, eval_size=0)
    assert len(seen.regenerated) >= 20 and seen.guided, "too few groups failed: the test is void"
    # the check's unmet items are what lifts the regeneration: far above a fresh sample and a bare retry
    assert figures["guided_right"] >= figures["resample_right"] + 0.2, figures
    assert figures["guided_right"] >= figures["retry_right"] + 0.2, figures
    for record in seen.regenerated:
        # only groups without a right sample are regenerated, each response after its own per-line check
        assert not record["group_had_a_right_sample"], record
        assert not exact_match(record["response"], record["answer"]), record
        assert record["check"] == judge_reply(record["response"].strip()), record
        # the bonus GRPO saw: alpha times what the guided regeneration gained over the response
        assert record["bonus"] == pytest.approx(ALPHA * exact_match(record["reply"], record["answer"])), record
    # within a group, a response whose guided regeneration is right gets the larger advantage
    by_group = {}
    for record in seen.regenerated:
        by_group.setdefault((record["step"], record["row"] // 4), []).append(record)
    ranked = 0
    for records in by_group.values():
        gained = [r["advantage"] for r in records if r["bonus"] > 0]
        flat = [r["advantage"] for r in records if r["bonus"] == 0]
        if gained and flat:
            assert min(gained) > max(flat), records
            ranked += 1
    assert ranked, "no group held both kinds of response: the ranking was not tested"
    for row in seen.guided:
        # trained on the guidance: the question, a failed response of its group and that response's check
        assert row["trained_on"].startswith(row["question"]) and "\nCheck:\n" in row["trained_on"], row
        attempt = row["trained_on"][len(row["question"]) :].split("\nCheck:\n")[0]
        assert row["trained_on"] == checked_retry_prompt(row["question"], attempt, judge_reply(attempt)), row
        assert not exact_match(attempt, row["answer"])
        assert row["advantage"] == pytest.approx(WEIGHT * row["advantage_before"], abs=1e-6), row
