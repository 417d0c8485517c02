"""The self-play block: the question a proposer's reply poses, the solver's prompt in the run's format, the majority
of the solver's answers (unanswered ones voting as the authors count them), the proposer's rewards and the solver's
reward against a pseudo-label."""

from types import SimpleNamespace

import pytest

from stackrl import Generation, Rollout
from stackrl.answers import answer_after_phrase, group_answers
from stackrl.blocks.selfplay import (QuestionPrompts, SelfPlayPool, band_reward, common_ending, labelled_rewards,
                                     majority, posed_question, solutions, solve, topic_prompt, uncertainty_reward)


def test_the_posed_question_is_the_first_item_of_the_continued_list_or_the_whole_reply():
    assert posed_question(" What is (5 * 6) + 2?\n4. What is 8 - 1?\n") == "What is (5 * 6) + 2?"
    assert posed_question("  \n") is None
    assert posed_question("Compute\n 345 * 12.", numbered=False) == "Compute 345 * 12."
    assert posed_question(" \n", numbered=False) is None


def test_the_solver_prompt_is_the_runs_format_with_the_problems_ending():
    class Pool:
        chat = False

        def __init__(self, template):
            self.template = template

        def active_rows(self):
            return [0, 1]

        def row(self, i):
            return {"question": ["What is 1 + 2?\n", "What is 3 * 4?\n"][i]}

        def format_row(self, columns):
            return {**columns, "prompt": self.template(columns["question"])}

    prompts = QuestionPrompts(Pool(lambda q: f"Q: {q}A:"), "question")
    assert prompts.ending == "\n" and prompts.text("What is 2 + 2?") == "What is 2 + 2?\n"
    assert prompts("What is 2 + 2?") == "Q: What is 2 + 2?\nA:"
    chat = QuestionPrompts(Pool(lambda q: [{"role": "system", "content": "s"}, {"role": "user", "content": q}]),
                           "question", ending="")
    assert chat("What is 2 + 2?") == [{"role": "system", "content": "s"}, {"role": "user", "content": "What is 2 + 2?"}]
    assert common_ending(["a\n", "b \n"]) == "\n" and common_ending(["a\n", "b"]) == "" and common_ending([]) == ""


def test_the_majority_counts_unanswered_rows_as_one_more_answer_when_asked():
    # 3 twice, no answer twice, the unanswered first: the authors' Counter makes "none" the majority.
    group = group_answers([None, "3", None, "3", "4"], math_verify=False)
    assert majority(group) == majority(group, True)
    vote = majority(group)
    assert (vote.answer, vote.votes, vote.agrees) == (None, 0, (False,) * 5) and vote.agreement == 0.0
    plain = majority(group, unanswered_votes=False)
    assert (plain.answer, plain.votes, plain.agrees) == ("3", 2, (False, True, False, True, False))
    assert plain.agreement == pytest.approx(0.4)
    # The answer written first wins a tie with the unanswered rows; more answers than unanswered rows always do.
    assert majority(group_answers(["3", None, None, "3"], math_verify=False)).votes == 2
    assert majority(group_answers(["3", None, "3", "3"], math_verify=False)).agreement == 0.75
    assert majority(group_answers([None, None], math_verify=False)).answer is None


def test_the_band_rewards_questions_neither_unanimous_nor_without_a_shared_answer():
    # Four samples: 2 or 3 agreeing earns 1 (the authors' 1 < k < n); 1 (no answer shared), 4 (unanimous), 0 do not.
    assert [band_reward(k, 4) for k in range(5)] == [0.0, 0.0, 1.0, 1.0, 0.0]
    assert [band_reward(k, 4, min_votes=0) for k in range(5)] == [0.0, 1.0, 1.0, 1.0, 0.0]
    assert [band_reward(k, 8, min_votes=3) for k in (3, 4, 7, 8)] == [0.0, 1.0, 1.0, 0.0]


def test_the_uncertainty_reward_peaks_at_an_even_split():
    assert [uncertainty_reward(p) for p in (0.0, 0.25, 0.5, 0.75, 1.0)] == [0.0, 0.5, 1.0, 0.5, 0.0]
    assert uncertainty_reward(0.6) == pytest.approx(0.8)  # 1 - 2 * 0.1


def test_solve_samples_each_prompt_in_one_call_and_clusters_its_answers():
    calls = []

    def generate(prompts, **sampling):
        calls.append((list(prompts), sampling))
        texts = ["The answer is 5.", "The answer is 5.", "The answer is 6.", "none"]
        return [Generation([], [], texts[i % 4]) for i in range(len(prompts))]

    ctx = SimpleNamespace(generate=generate)
    groups = solve(ctx, ["p", "q"], 4, answer_after_phrase, math_verify=False, temperature=1.0)
    assert calls == [(["p"] * 4 + ["q"] * 4, {"temperature": 1.0})]
    assert [(g.distinct, g.counts) for g in groups] == [(["5", "6"], [2, 1])] * 2
    assert solve(ctx, [], 4, answer_after_phrase) == [] and len(calls) == 1
    texts, group = solutions(ctx, ["p"], 4, answer_after_phrase, math_verify=False)[0]
    assert texts == ["The answer is 5.", "The answer is 5.", "The answer is 6.", "none"] and group.counts == [2, 1]


def test_labelled_rows_earn_one_for_reaching_their_label_and_the_rest_are_left_alone():
    declared = []
    completions = ["Q?", "The answer is 7.", "The answer is 8.", "none", "The answer is 7."]
    labels = [None, "7", "7", "7", None]
    rollout = Rollout(["t", "q", "q", "q", "d"], completions, [[1]] * 5, [[2]] * 5, {"lab": labels}, group_size=1)
    ctx = SimpleNamespace(rollout=rollout, declare_pseudo_labels=declared.append)
    rewards = [None] * 5
    scored = labelled_rewards(ctx, rewards, [True, False, False, False, False], "lab", answer_after_phrase, False)
    # The proposer's row and the unlabelled row untouched; 7 right, 8 wrong, no answer wrong.
    assert (scored, rewards) == (3, [None, 1.0, 0.0, 0.0, None])
    assert declared == [[None, "7", "7", "7", None]]


class FakePool:
    """The pool's face a SelfPlayPool uses: rows with a category, retirements, category weights."""

    chat = False

    def __init__(self, questions):
        self.rows_ = [{"question": q, "category": "easy"} for q in questions]
        self.retired, self.category_weights, self.last_batch = set(), None, []

    def active_rows(self):
        return [i for i in range(len(self.rows_)) if i not in self.retired]

    def __len__(self):
        return len(self.rows_)

    def row(self, i):
        return {"question": None, **self.rows_[i]}

    def stats(self, i):
        return SimpleNamespace(category=self.rows_[i].get("category"), retired=i in self.retired)

    def format_row(self, columns):
        return {**columns, "prompt": f"Q: {columns['question']}"}

    def add_rows(self, rows):
        self.rows_.extend(rows)
        return list(range(len(self.rows_) - len(rows), len(self.rows_)))

    def retire(self, rows):
        self.retired.update(rows)

    def set_category_weights(self, weights):
        self.category_weights = weights


def test_the_pool_side_adds_the_topic_once_then_posed_questions_drawn_once_at_their_share():
    pool = FakePool(["What is 1 + 2?\n", "What is 3 * 4?\n"])
    selfplay = SelfPlayPool("m", "question", proposer_share=0.25)
    prompts = selfplay.begin(pool, topic_prompt(pool, None, 4, "question"))
    assert pool.rows_[2] == {"prompt": "Continue this list of problems with new ones, one problem per number:\n"
                                       "1. What is 1 + 2?\n2. What is 3 * 4?\n3.", "category": "m/propose"}
    assert pool.category_weights == {"m/propose": 1.0}  # the topic alone: the dataset weighs 0
    selfplay.begin(pool, "again")  # a resumed run: the topic row is there
    assert len(pool) == 3 and prompts("What is 5 - 1?") == "Q: What is 5 - 1?\n"
    ids = selfplay.after_step(pool, prompts, ["What is 5 - 1?", "What is 5 - 1?", "What is 6 + 6?"],
                              [{"label": "4"}, {"label": "4"}, {"label": "12"}])
    assert ids == [3, 4] and pool.rows_[3] == {"question": "What is 5 - 1?\n", "category": "m/solve", "label": "4",
                                               "prompt": "Q: What is 5 - 1?\n"}
    assert pool.category_weights == {"m/propose": 0.25, "m/solve": 0.75}
    pool.last_batch = [2, 3]  # the topic and one posed question drawn: that one retires, the topic stays
    assert selfplay.after_step(pool, prompts, ["What is 6 + 6?"]) == []  # still waiting: not added again
    assert pool.retired == {3}
    pool.last_batch = [4]
    selfplay.after_step(pool, prompts, [])
    assert pool.retired == {3, 4} and pool.category_weights == {"m/propose": 1.0}  # none waits
    pool.retire([2])  # another plugin switched the data set: nothing is weighed any more
    pool.category_weights = None
    selfplay.after_step(pool, prompts, ["What is 7 + 7?"])
    assert pool.category_weights is None
    rollout = Rollout(["t", "q", "d"], ["", "", ""], [[1]] * 3, [[2]] * 3,
                      {"category": ["m/propose", "m/solve", None]}, group_size=1)
    assert selfplay.proposer_rows(rollout) == [True, False, False]
