"""Self-rewarding correction on the built-in judging model (stackrl/arith-skills), short: stage 1's collection and
fine-tuning on its own samples, then one RL step of the CPU recipe. The held-out self-correction after training,
against plain GRPO, comes from benchmarks/mechanism.py."""

from pathlib import Path

import pytest

from stackrl.rewards import exact_match, extract_answer
from stackrl.run import build_trainer
from stackrl.tasks import JUDGE_MARKER, RETRY_INSTRUCTION, parse_verdict
from stackrl.tasks.arithmetic import read_problem
from stackrl.testing.heldout import recipe_config
from stackrl.testing.judging import verified_rows
from stackrl.testing.repository import load_script
from stackrl_selfcorrect.plugin import START

pytestmark = pytest.mark.mechanism

PLUGIN = Path(__file__).resolve().parents[1]
RECIPE = PLUGIN.parents[1] / "configs" / "recipes" / "selfcorrect-cpu.yaml"


def recipe_trainer(tmp_path, steps: int, *overrides: str):
    return build_trainer(recipe_config(RECIPE, plugins=True, seed=0, steps=steps, output_dir=tmp_path,
                                       overrides=["trainer.disable_tqdm=true", *overrides]))


def test_stage_one_fine_tunes_the_start_on_right_verdicts_and_right_answers_only_then_rl_runs_the_trajectory(tmp_path):
    trainer = recipe_trainer(tmp_path, 2, "trainer.per_device_train_batch_size=16", "selfcorrect.collect_steps=1",
                             "selfcorrect.verdict_tries=2", "selfcorrect.revision_tries=2", "selfcorrect.told_wrong_tries=1")
    phases = []

    def watched(plugin, name, contexts, completion_ids, **options):  # the host's phase, watched
        phases.append((contexts, completion_ids, options))
        return phase(plugin, name, contexts, completion_ids, **options)

    phase, trainer._supervised_phase = trainer._supervised_phase, watched
    trainer.train()
    (contexts, completions, options), = phases
    assert options["restore"] == START
    decode = trainer.processing_class.decode
    trained = {"verdicts": 0, "answers": 0}
    for context, completion in zip(contexts, completions):
        question, rest = decode(context).split("\n", 1)
        truth, text = read_problem(question)["answer"], decode(completion, skip_special_tokens=True)
        if parse_verdict(text) is not None:  # a trained verdict says what the answer it checks is
            checked = rest.rsplit(JUDGE_MARKER, 1)[0]
            assert parse_verdict(text) == (extract_answer(checked) == truth), decode(context + completion)
            trained["verdicts"] += 1
        else:  # a trained answer is right
            assert extract_answer(text) == truth, decode(context + completion)
            trained["answers"] += 1
    assert trained["verdicts"] and trained["answers"], trained
    rollout = trainer._rollouts["train"]
    assert set(rollout.columns["selfcorrect_stage"]) == {2}
    kinds = verified_rows(rollout, trainer.processing_class, verify="\n" + JUDGE_MARKER + "\n",
                          revise="\n" + RETRY_INSTRUCTION + "\n", answers=2)
    assert all(row in (["answer", "verify"], ["answer", "verify", "answer"]) for row in kinds)


def test_rl_pays_a_right_verdict_beside_the_final_answer_and_punishes_stopping_on_a_wrong_correct(tmp_path):
    trainer = recipe_trainer(tmp_path, 1, "trainer.per_device_train_batch_size=128", "selfcorrect.collect_steps=0")
    trainer.train()
    rollout = trainer._rollouts["train"]
    by_case: dict[tuple, list[float]] = {}
    for i, segments in enumerate(rollout.columns["segments"]):
        answer = rollout.columns["answer"][i]
        right = [exact_match(s.text, answer) == 1.0 for s in segments if s.kind == "answer"]
        by_case.setdefault((right[0], parse_verdict(segments[1].text), right[-1]), []).append(rollout.advantages[i].item())

    def mean(*case) -> float:
        values = by_case.get(case, [])
        assert len(values) >= 5, f"too few rows {case}: { {k: len(v) for k, v in by_case.items()} }"
        return sum(values) / len(values)

    # A right answer ends right either way; only the verdict's own reward tells "correct" (stop) from "wrong".
    assert mean(True, True, True) > mean(True, False, True) + 0.3, by_case
    # "correct" to a wrong answer stops the row on it: below a right "wrong", even one whose revision stays wrong.
    assert mean(False, False, False) > mean(False, True, False) + 0.3, by_case


def test_the_benchmark_measures_the_self_correction_trajectory_on_held_out_problems(tmp_path):
    figures = load_script(PLUGIN / "benchmarks" / "mechanism.py").run("selfcorrect", 0, 0, tmp_path, [], 32)
    assert 0 < figures["first"] < 1 and 0 < figures["final"] < 1 and 0 < figures["revised"] < 1
