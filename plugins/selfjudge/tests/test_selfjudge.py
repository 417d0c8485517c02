"""selfjudge: the conformance suite, what its defaults ask and read (the judge's general rules:
tests/test_judges.py), its mechanism on the built-in judging model, stackrl/arith-skills: its verdicts on its own
solutions rank right above wrong (stackrl.testing.judging.JudgingMechanism), and its practice-problem loop in
real runs of that model, with the problem writing scripted (exact counts) and with the model writing them (the
rules of self-instruction: tests/test_selfinstruct.py)."""

from pathlib import Path

import yaml

from stackrl.blocks.judges import Mode
from stackrl.run import build_trainer
from stackrl.tasks import JUDGE_TEMPLATE
from stackrl.tasks.arithmetic import read_problem
from stackrl.testing.fixtures import DrawnGroups
from stackrl.testing.judging import JudgingConformance, JudgingMechanism, judge_prompt, read_judgement
from stackrl.testing.scripted import script_problems
from stackrl.testing.tiny import tiny_config
from stackrl_selfjudge import SelfJudge


class TestConformance(JudgingConformance):
    plugin_name = "selfjudge"


class TestMechanism(JudgingMechanism):
    plugin_name = "selfjudge"


def test_it_asks_for_a_check_of_its_own_solution_and_reads_the_verdict_line():
    plugin = SelfJudge()
    assert "Verdict: wrong" in judge_prompt(plugin, "4 * 2 = 9") and plugin.config.mode is Mode.generate
    assert read_judgement(plugin, "4 * 2 = 8, not 9.\nVerdict: wrong") == 0.0
    assert read_judgement(plugin, "Each step holds.\nVerdict: correct") == 1.0
    assert read_judgement(plugin, "Each step holds, so it is correct.") is None  # no verdict line: malformed, not 0


# -- the practice-problem loop, its writing scripted (exact counts) ---------------------------------------------------

PRACTICE = [" What is 2 + 3 + 4?\n3. What is (5 + 6) * 2?\n4. Plot the points 1 and 2.\n"]


def test_practice_problems_join_the_pool_label_free_and_are_solved_and_judged(make_config):
    config = make_config(
        ["selfjudge"],
        model={"name_or_path": "stackrl/arith-skills"},
        data={"label_free": True, "size": 2},
        rewards={"exact_match": None},
        trainer={"per_device_train_batch_size": 8, "num_generations": 4, "max_completion_length": 40, "max_steps": 3},
        selfjudge={"judge_template": JUDGE_TEMPLATE, "max_new_tokens": 96, "self_instruct": {"every_steps": 1}},
    )
    drawn = DrawnGroups("selfjudge")
    run = build_trainer(config, monitor=drawn)
    writer = script_problems(run, "selfjudge", {1: PRACTICE})
    run.train()
    plugin = run.plugins.plugins["selfjudge"]
    assert plugin.instruct.written == {2: "What is 2 + 3 + 4?", 3: "What is (5 + 6) * 2?"}  # "Plot" is banned
    assert [run.pool.stats(row).label_free for row in (2, 3)] == [True, True]
    assert plugin.instruct.examples == [2, 3]  # every kept problem may be shown again
    logged = next(entry for entry in run.state.log_history if entry.get("step") == 1)
    # The four requests got the same answer: "Plot" banned in each, the first request's two problems repeated in
    # the three others.
    assert logged["selfjudge/instruct/written"] == 12 and logged["selfjudge/instruct/added"] == 2
    assert logged["selfjudge/instruct/rejected/banned"] == 4 and logged["selfjudge/instruct/rejected/similar"] == 6
    # The round after step 2 shows both written problems (two per request) with the two dataset problems.
    for request in writer.requests[2]:
        listed = [line.split(". ", 1)[1] for line in request.splitlines()[2:-1]]
        assert set(plugin.instruct.written.values()) <= set(listed) and len(listed) == 4
    # Steps 2 and 3 draw a cycle of the four rows: each written problem is solved by a group and judged.
    judged = [group for group in drawn.groups if group.step > 1 and group.row in plugin.instruct.written]
    assert {group.row for group in judged} == {2, 3}
    assert all(group.prompt == plugin.instruct.written[group.row] + "\n" for group in judged)  # as the seeds end
    verdicts = [r for group in judged for r in group.rewards if r == r]  # NaN: a malformed judgement
    assert verdicts and set(verdicts) <= {0.0, 1.0}


# -- the practice-problem loop with the problems the model writes (stackrl/arith-skills poses the task's questions) --

PRACTICE_RECIPE = Path(__file__).parents[3] / "configs" / "recipes" / "selfjudge-practice-cpu.yaml"


def test_the_model_writes_practice_problems_then_solves_and_judges_them(tmp_path):
    recipe = yaml.safe_load(PRACTICE_RECIPE.read_text())
    config = tiny_config(
        "stackrl/arith-skills", ["selfjudge"], tmp_dir=tmp_path, data={**recipe["data"], "size": 4},
        rewards=recipe["rewards"],
        selfjudge={**recipe["selfjudge"], "self_instruct": {**recipe["selfjudge"]["self_instruct"], "every_steps": 1}},
        trainer={"per_device_train_batch_size": 16, "num_generations": 4, "max_completion_length": 64, "max_steps": 3,
                 "temperature": 1.0, "learning_rate": 1e-5, "seed": 0},
        output_dir=str(tmp_path / "run"),
    )
    drawn = DrawnGroups("selfjudge")
    run = build_trainer(config, monitor=drawn)
    run.train()
    written = run.plugins.plugins["selfjudge"].instruct.written
    seeds = {run.pool.row(i)["question"].strip() for i in range(4)}
    assert len(written) >= 6 and not seeds & set(written.values())
    assert all(run.pool.stats(row).label_free for row in written)
    questions = {row: read_problem(problem) for row, problem in written.items()}
    assert sum(q is not None for q in questions.values()) > len(written) / 2, written  # most: the task's questions
    # Drawn among the dataset's rows, each is solved by a group prompted with it and judged.
    practice = [group for group in drawn.groups if group.row in written]
    assert len(practice) >= 3
    assert all(group.prompt == run.pool.row(group.row)["prompt"] for group in practice)
    verdicts = [r for group in practice for r in group.rewards if r == r]  # NaN: a malformed judgement
    assert len(verdicts) >= 0.8 * 4 * len(practice) and set(verdicts) == {0.0, 1.0}
    # It solves some of its own questions (their answers read from the question), and its verdicts on those
    # solutions call the right ones correct more often than the wrong ones.
    judged = {True: [], False: []}
    for group in practice:
        if questions[group.row] is not None:
            for right, verdict in zip(group.reaching(questions[group.row]["answer"]), group.rewards):
                judged[right] += [verdict] if verdict == verdict else []
    assert judged[True] and judged[False], judged
    assert sum(judged[True]) / len(judged[True]) > sum(judged[False]) / len(judged[False]) + 0.3, judged
