"""SCFT + RLERR on the built-in judging model (stackrl/arith-skills), short: one step of the CPU recipe (64 rows) with
its phase at the end of it. The phase trains only critiques that end right with a true verdict, never the answer they
critique; the reflection reward alone pays a critique that corrects a wrong answer above one that does not, and a true
verdict above a false one. The held-out critique trajectory after training, against plain GRPO, comes from
benchmarks/mechanism.py."""

from pathlib import Path

import pytest

from stackrl.rewards import exact_match, extract_answer
from stackrl.run import build_trainer
from stackrl.tasks import JUDGE_MARKER, RETRY_INSTRUCTION, parse_verdict
from stackrl.tasks.arithmetic import read_problem
from stackrl.testing.heldout import recipe_config
from stackrl.testing.repository import load_script

pytestmark = pytest.mark.mechanism

PLUGIN = Path(__file__).resolve().parents[1]
RECIPE = PLUGIN.parents[1] / "configs" / "recipes" / "scft-cpu.yaml"


def test_the_phase_trains_true_critiques_only_and_the_reward_pays_the_correction(tmp_path):
    trainer = build_trainer(recipe_config(RECIPE, plugins=True, seed=0, steps=1, output_dir=tmp_path, overrides=[
        "trainer.disable_tqdm=true", "trainer.per_device_train_batch_size=64", "scft.every=1",
        "scft.rl_after_phase=false", "scft.confirm_per_fix=null", "scft.outcome_weight=0.0", "scft.locate=false"]))
    phases = []

    def watched(plugin, name, contexts, completion_ids, **options):  # the host's phase, watched
        phases.append((contexts, completion_ids))
        return phase(plugin, name, contexts, completion_ids, **options)

    phase, trainer._supervised_phase = trainer._supervised_phase, watched
    trainer.train()
    (contexts, completions), = phases
    decode = trainer.processing_class.decode
    trained = {"verdicts": 0, "corrections": 0}
    for context, completion in zip(contexts, completions):
        question, rest = decode(context).split("\n", 1)
        truth, text = read_problem(question)["answer"], decode(completion, skip_special_tokens=True)
        attempt = rest.split("\n" + JUDGE_MARKER + "\n", 1)[0]
        if rest.endswith("\n" + JUDGE_MARKER + "\n"):  # a check: its verdict says what the answer is
            assert parse_verdict(text) == (extract_answer(attempt) == truth), decode(context + completion)
            trained["verdicts"] += 1
        else:  # a correction, after a true "wrong": right, of a wrong answer
            assert rest.endswith("\n" + RETRY_INSTRUCTION + "\n"), decode(context + completion)
            assert extract_answer(attempt) != truth and extract_answer(text) == truth, decode(context + completion)
            trained["corrections"] += 1
    assert trained["verdicts"] and trained["corrections"], trained

    rollout = trainer._rollouts["train"]
    by_case: dict[tuple, list[float]] = {}
    for i, segments in enumerate(rollout.columns["segments"]):
        answer = rollout.columns["answer"][i]
        right = [exact_match(s.text, answer) == 1.0 for s in segments if s.kind == "answer"]
        by_case.setdefault((right[0], parse_verdict(segments[1].text), right[-1]), []).append(rollout.rewards["scft"][i].item())
    counts = {case: len(values) for case, values in by_case.items()}

    def mean(*case) -> float:
        values = by_case.get(case, [])
        assert len(values) >= 2, f"too few rows {case}: {counts}"
        return sum(values) / len(values)

    # The reflection reward alone (outcome_weight 0, any stop line counting). A wrong answer found wrong: the critique
    # that corrects it is paid above the one that does not (0.7 against 0.4) ...
    assert mean(False, False, True) > mean(False, False, False) + 0.2, counts
    # ... which is paid above a false "correct" (P1: 0.1), as a false "wrong" to a right answer is below a true "correct".
    assert mean(False, False, False) > mean(False, True, False) + 0.2, counts
    assert mean(True, True, True) > mean(True, False, True) + 0.5, counts


def test_the_benchmark_measures_the_critique_trajectory_on_held_out_problems(tmp_path):
    figures = load_script(PLUGIN / "benchmarks" / "mechanism.py").run("scft", 0, 0, tmp_path, [], 32)
    assert 0 < figures["first"] < 1 and 0 < figures["final"] < 1 and figures["err"] is not None
