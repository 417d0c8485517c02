"""Tests of the `sws` plugin: the conformance suite, the weakness rule and the budget by hand, a round with
scripted writing (the answer check, the categories, the difficulty filter), and a resume."""

import pytest
from datasets import Dataset

from stackrl import ConfigError
from stackrl.plugin import RunFacts
from stackrl.pool import POOL_ROW, Pool, PoolAccess
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_sws.weakness import budgets, failure_ratios, is_failure, slope


class TestConformance(PluginConformance):
    plugin_name = "sws"
    refused_settings = [
        ({"every_steps": 0}, "must be at least 1"),
        ({"max_pass_rate": 0.0}, r"must lie in \(0, 1\]"),
        ({"min_agreement": 9}, r"must lie in 1\.\.answer_samples"),
        ({"min_pass_rate": 0.9, "max_kept_pass_rate": 0.5}, "0 <= min <= max <= 1"),
    ]


# -- the weakness rule and the budget, by hand ------------------------------------------------------------------------



def test_slope_is_the_least_squares_slope():
    assert slope([0.3]) == 0.0
    assert slope([0.0, 0.25]) == pytest.approx(0.25)
    assert slope([1.0, 0.5, 0.0]) == pytest.approx(-0.5)
    assert slope([0.0, 0.5, 0.0, 0.5]) == pytest.approx(0.1)  # (-1.5*-.25 -.5*.25 +.5*-.25 +1.5*.25) / 5


def test_a_failure_case_never_reaches_the_threshold_and_does_not_improve():
    assert is_failure([0.0, 0.0], 0.5, 1)
    assert is_failure([0.25, 0.0], 0.5, 1)
    assert not is_failure([0.0, 0.25], 0.5, 1)  # improving
    assert not is_failure([0.5], 0.5, 1)  # reached the threshold
    assert not is_failure([0.75, 0.0], 0.5, 1)  # passed once
    assert not is_failure([0.0], 0.5, 2)  # too few records


# Rows 0-3 category A, 4-7 category B. Two batches of records:
BATCHES = [([0, 1, 3, 4, 5], [0.0, 0.25, 0.0, 0.75, 0.0]),
           ([0, 2, 3, 4, 6], [0.0, 0.25, 0.25, 1.0, 0.5])]
# Failure cases: 0 [0, 0], 1 [.25], 2 [.25], 5 [0]; not 3 [0, .25] (improving), 4 (passed), 6 (reached 0.5).
# A: 3 of 4 recorded fail (0.75); B: 1 of 3 (1/3). Of 8 problems A gets int(8 * .75 / (13/12)) = 5,
# B int(8 * (1/3) / (13/12)) = 2 (rounded down: 7 in all).
RATIOS = {"A": 0.75, "B": 1 / 3}
BUDGETS = {"A": 5, "B": 2}


def test_failure_ratios_and_budgets_by_hand():
    records = {}
    for rows, rates in BATCHES:
        for row, rate in zip(rows, rates):
            records.setdefault(row, []).append(rate)
    categories = {row: "A" if row < 4 else "B" for row in range(8)}
    ratios = failure_ratios(records, categories, 0.5, 1)
    assert ratios == pytest.approx(RATIOS)
    assert budgets(ratios, 8) == BUDGETS
    assert budgets({}, 8) == {}
    assert budgets({"A": 0.01, "B": 1.0}, 8) == {"B": 7}  # a zero share is left out


# -- a round, with the writing and the answers scripted -----------------------------------------------------------


class Generated:
    def __init__(self, text):
        self.text = text


class Context:
    """A post_step context over a real pool, its generation scripted: each pose request is answered with a new
    question (What is 100 + 1?, then 101 + 1, ...), a question with ``answers[question]`` if given, else its right
    answer ``samples`` times."""

    def __init__(self, pool, step, answers):
        self.pool, self.step, self.answers = PoolAccess(pool, "sws", step), step, answers
        self.requests, self.logged, self.acted_on, self.models = [], {}, None, set()

    def generate(self, prompts, model="policy", **sampling):
        self.models.add(model)
        replies = []
        for prompt in prompts:
            if prompt.startswith("Continue this list"):
                replies.append(f" What is {100 + len(self.requests)} + 1?\n")
                self.requests.append(prompt)
            else:
                queue = self.answers.setdefault(prompt, [str(int(prompt.split()[2]) + 1)] * 8)
                replies.append(f"The answer is {queue.pop(0)}.")
        return [Generated(text) for text in replies]

    def log(self, key, value):
        self.logged[key] = self.logged.get(key, 0) + value

    def acted(self, n, of):
        self.acted_on = (n, of)


def a_pool():
    rows = [{"question": f"What is {i} + {i}?\n", "answer": str(2 * i), "category": "A" if i < 4 else "B",
             "prompt": f"What is {i} + {i}?\n", POOL_ROW: i} for i in range(8)]
    return Pool(Dataset.from_list(rows), seed=0, answer_column="answer", format_prompt=lambda row: row["question"])


def shown_rows(request):
    """The dataset rows a pose request lists (their questions are "What is i + i?")."""
    return {int(line.split()[3]) for line in request.splitlines()[1:-1]}


def run_round(**settings):
    """Two recorded batches, then the round at step 2 (every_steps 2); returns the plugin, the pool and the
    contexts. Question 101 + 1 gets answers 102, 7, 102, 102 (3 of 4 agree: kept with 102); 103 + 1 gets 1, 2, 3, 4
    (no answer reaches 3: dropped)."""
    sws = make_plugin("sws", **{"every_steps": 2, "problems_per_round": 8, "answer_samples": 4, "min_agreement": 3,
                                "math_verify": False, "max_similarity": 1.0, **settings})
    pool = a_pool()
    answers = {"What is 101 + 1?\n": ["102", "7", "102", "102"], "What is 103 + 1?\n": ["1", "2", "3", "4"]}
    contexts = []
    for step, (rows, rates) in enumerate(BATCHES, start=1):
        pool.record(rows, rates, [0.0] * len(rows))
        contexts.append(Context(pool, step, answers))
        sws.post_step(ctx=contexts[-1])
    return sws, pool, contexts


def test_a_round_writes_for_the_weak_categories_from_their_failures_and_keeps_checked_answers():
    sws, pool, (first, second) = run_round()
    assert first.acted_on == (4, 5) and first.requests == []  # 0, 1, 3, 5 fail on one record; no round at step 1
    assert second.acted_on == (2, 5)  # 0 and 2; 3 now improves, 4 passed, 6 reached 0.5
    assert sws.last_round["ratios"] == pytest.approx(RATIOS) and sws.last_round["budgets"] == BUDGETS
    # Five requests for A, each listing A's failure cases (0, 1, 2, not the improving 3), two for B (5 alone).
    assert [shown_rows(r) for r in second.requests] == [{0, 1, 2}] * 5 + [{5}] * 2
    assert [(c, set(shown)) for c, shown in sws.last_round["requests"]] == [("A", {0, 1, 2})] * 5 + [("B", {5})] * 2
    assert sws.last_round["answers"][1] == ["102", "7", "102", "102"]
    candidates = sws.last_round["candidates"]
    assert [c for _, c in candidates] == ["A"] * 5 + ["B"] * 2
    added = sws.last_round["added"]
    assert added == list(range(8, 14))
    rows = [pool.row(i) for i in added]
    assert [(r["question"], r["answer"], r["category"]) for r in rows] == [
        ("What is 100 + 1?\n", "101", "A"), ("What is 101 + 1?\n", "102", "A"), ("What is 102 + 1?\n", "103", "A"),
        ("What is 104 + 1?\n", "105", "A"), ("What is 105 + 1?\n", "106", "B"), ("What is 106 + 1?\n", "107", "B")]
    assert all(not pool.stats(i).label_free for i in added) and second.models == {"policy"}
    assert second.logged["added"] == 6 and second.logged["posed"] == 7 and second.logged["weak_categories"] == 2
    assert sws.rounds == 1


def test_only_max_rounds_rounds_and_none_without_failures():
    sws, pool, (first, second) = run_round(every_steps=1)  # a round at step 1 already: max_rounds 1 stops step 2's
    assert len(first.requests) == 7 and second.requests == []
    sws, pool, (first, second) = run_round(max_pass_rate=0.1)  # only 0 and 5 fail: A 1/4, B 1/3
    assert sws.last_round["budgets"] == {"A": 3, "B": 4}
    sws, pool, (first, second) = run_round(max_pass_rate=0.01, min_records=3)  # no failure case: nothing asked
    assert second.requests == [] and sws.last_round["added"] == []


def test_the_difficulty_filter_retires_a_new_problem_whose_first_group_is_too_easy_or_too_hard():
    sws, pool, contexts = run_round()
    # Step 3 draws four new rows: pass rates 0 (too hard), 0.5 (kept), 1 (too easy), 0.125 (kept: bounds inclusive).
    pool.record([8, 9, 10, 11, 0], [0.0, 0.5, 1.0, 0.125, 0.0], [0.0] * 5)
    sws.post_step(ctx=Context(pool, 3, {}))
    assert {i for i in range(8, 14) if pool.stats(i).retired} == {8, 10}
    assert set(sws.records) == set(range(7)) and sws.pending == {12, 13}  # new rows stay out of the record
    off = make_plugin("sws", difficulty_filter=False)
    off.load_state_dict(sws.state_dict())
    off.pending = {9, 11}
    pool.record([9, 11], [1.0, 0.0], [0.0] * 2)
    off.post_step(ctx=Context(pool, 4, {}))
    assert not pool.stats(9).retired and not pool.stats(11).retired and off.pending == set()


def test_state_round_trips():
    sws, pool, contexts = run_round(max_rounds=2)
    resumed = make_plugin("sws", max_rounds=2)
    resumed.load_state_dict(sws.state_dict())
    assert resumed.records == sws.records and resumed.written == sws.written and resumed.rounds == 1
    assert resumed.pending == sws.pending and resumed.batches_seen == 2
    assert resumed._pick(list(range(20)), 5) == sws._pick(list(range(20)), 5)


def test_model_names_a_model_of_the_run_and_an_aux_answerer_takes_one_sample():
    facts = dict(max_steps=4, group_size=4, groups_per_step=2, columns=None, builtin_columns=(), chat=False,
                 reference=False, source="arithmetic", components=("exact_match",))
    with pytest.raises(ConfigError, match="sws.model: 'strong' names no model of this run"):
        make_plugin("sws", model="strong").check_run(RunFacts(**facts))
    with pytest.raises(ConfigError, match="sws.answer_samples: an auxiliary model answers"):
        make_plugin("sws", model="strong").check_run(RunFacts(**facts, aux_models=("strong",)))
    one = make_plugin("sws", model="strong", answer_samples=1, min_agreement=1)
    assert one.check_run(RunFacts(**facts, aux_models=("strong",))) is None


# -- a resumed run ------------------------------------------------------------------------------------------------


def test_a_resumed_run_records_and_writes_what_an_uninterrupted_one_does(tmp_path):
    from stackrl.run import build_trainer
    from stackrl.testing.benchmark import one_thread
    from stackrl.testing.fixtures import StopAt
    from stackrl.testing.tiny import tiny_config

    def train(folder, callbacks=(), resume=None, save="steps"):
        config = tiny_config(
            "unused", ["sws"], tmp_dir=folder / "config", model={"name_or_path": "stackrl/arith-tiny"},
            data={"size": 3}, output_dir=str(folder),
            trainer={"per_device_train_batch_size": 8, "num_generations": 4, "max_completion_length": 24,
                     "max_steps": 2, "seed": 1, "save_strategy": save, "save_steps": 1},
            sws={"every_steps": 2, "problems_per_round": 4, "answer_samples": 2, "min_agreement": 1,
                 "math_verify": False, "max_similarity": 1.0, "max_pass_rate": 1.0,
                 "pose_sampling": {"do_sample": True, "temperature": 1.0, "max_new_tokens": 24},
                 "answer_sampling": {"do_sample": True, "temperature": 1.0, "max_new_tokens": 24}})
        run = build_trainer(config, callbacks=list(callbacks))
        with one_thread():  # the tiny model's small matmuls spin threads on a loaded machine
            run.train(resume_from_checkpoint=resume)
        return run

    straight = train(tmp_path / "straight", save="no")
    train(tmp_path / "resumed", callbacks=[StopAt(1)])
    resumed = train(tmp_path / "resumed", resume=True)
    want, got = straight.plugins.plugins["sws"], resumed.plugins.plugins["sws"]
    assert want.rounds == 1 and any(len(r) == 2 for r in want.records.values())
    assert got.state_dict()["records"] == want.state_dict()["records"]
    assert (got.written, got.pending, got.rounds) == (want.written, want.pending, want.rounds)
    assert [resumed.pool.row(i) for i in got.written] == [straight.pool.row(i) for i in want.written]
