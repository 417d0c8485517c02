"""Self-instruction's rules by hand: ROUGE-L, reading a numbered list, each rejection rule, the requests, and the
pool's prompt format for written rows. The rounds in a real run: plugins/serl and plugins/selfjudge."""

import random

import pytest
from datasets import Dataset

from stackrl.blocks.selfinstruct import (
    SelfInstruct,
    SelfInstructSettings,
    SimilarityIndex,
    lcs_length,
    review,
    rouge_l,
    rouge_tokens,
    rule_rejection,
)
from stackrl.config import DataSection
from stackrl.data import format_prompt
from stackrl.errors import ConfigError, PluginError
from stackrl.pool import POOL_ROW, Pool, PoolAccess
from stackrl.tasks.posing import parse_problems

SETTINGS = SelfInstructSettings()


# -- ROUGE-L --------------------------------------------------------------------------------------------------------


def test_rouge_tokens_are_lower_case_letters_and_digits():
    assert rouge_tokens("What is (12+3)*Two?") == ["what", "is", "12", "3", "two"]


def test_rouge_l_is_the_f_measure_of_the_longest_common_subsequence():
    # LCS "the cat on the mat": 5 of 6 tokens each way.
    assert rouge_l("The cat sat on the mat.", "the cat lay on the mat") == pytest.approx(5 / 6)
    # Unequal lengths: P = 5/5, R = 5/8, F = 2PR / (P + R) = 10/13, not the mean of P and R (13/16).
    assert rouge_l("what is 2 plus 3", "what is 2 plus 3 times 4 then") == pytest.approx(10 / 13)
    # Order matters: a subsequence, not a bag of words.
    assert rouge_l("a b c d", "d c b a") == pytest.approx(2 / 8)
    assert rouge_l("a b", "c d") == 0.0 and rouge_l("", "a b") == 0.0


def test_the_bit_parallel_lcs_equals_the_textbook_table():
    def table(a, b):
        row = [0] * (len(b) + 1)
        for x in a:
            prev, row = row, [0]
            for j, y in enumerate(b):
                row.append(prev[j] + 1 if x == y else max(prev[j + 1], row[j]))
        return row[-1]

    rng = random.Random(0)
    for _ in range(300):
        a = [rng.choice("abcd") for _ in range(rng.randint(0, 70))]
        b = [rng.choice("abcd") for _ in range(rng.randint(0, 70))]
        assert lcs_length(a, b) == table(a, b) == lcs_length(b, a)


# -- reading a numbered list -------------------------------------------------------------------------------------


def test_a_text_request_is_continued_after_its_last_number():
    text = " What is 2 + 2?\n10. What is\n   3 + 3?\n11.  Find x if x + 1 = 4.\n12."
    assert parse_problems(text, continued=True) == ["What is 2 + 2?", "What is 3 + 3?", "Find x if x + 1 = 4."]


def test_a_chat_answer_is_read_from_its_own_numbers_only():
    text = "Here are new problems:\n1. What is 2.5 + 1?\n 2. Share 3. 5 apples among 2\n"
    assert parse_problems(text, continued=False) == ["What is 2.5 + 1?", "Share 3. 5 apples among 2"]
    assert parse_problems("No list at all.", continued=False) == []


# -- the rules ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("problem", "reason"),
    [
        ("What is 2 + 2?", None),  # four words: the shortest kept
        ("What is 2+2?", "length"),  # three words
        (" ".join(["word"] * 150), None),
        (" ".join(["word"] * 151), "length"),
        ("Draw a square of side 3 cm.", "banned"),
        ("How many drawers hold 12 socks each?", None),  # a whole word only
        ("Look at the GRAPH and find its slope.", "banned"),  # any case
        ("Go to the shop and buy 3 pens.", "banned"),
        ("Write a program that adds 2 and 3.", "banned"),
        ("(a) What is 2 + 2 then?", "form"),
        ("Évaluez 2 + 2 puis 3 + 3.", "form"),
    ],
)
def test_each_rule_refuses_what_it_names(problem, reason):
    assert rule_rejection(problem, SETTINGS) == reason


def test_a_problem_too_close_to_a_known_one_is_refused_also_within_a_round():
    known = SimilarityIndex(["a b c d e f g h i j"])
    exactly = "a b c d e f g x y z"  # LCS 7 of 10 each: ROUGE-L 0.7, not above it
    above = "a b c d e f g h y z"  # 0.8
    kept, rejected = review([exactly, above, exactly, "What is 7 times 8 plus 9?"], known, SETTINGS)
    assert kept == [exactly, "What is 7 times 8 plus 9?"]  # the second copy repeats the first kept one
    assert rejected == {"similar": 2}
    assert len(known) == 3


def test_the_index_gives_each_similarity_in_order_and_the_closest():
    known = SimilarityIndex(["a b c d e f g h i j", "a b x y"])
    # Against "a b c d": LCS 4 of 4 and 10 tokens (8/14); LCS 2 of 4 and 4 (4/8).
    assert known.similarities("a b c d") == [8 / 14, 0.5]
    assert known.closest("a b c d") == 8 / 14
    assert SimilarityIndex().similarities("a b") == [] and SimilarityIndex().closest("a b") == 0.0


def test_review_counts_every_reason():
    problems = ["Hi there", "Plot y = x squared now.", "- What is 2 + 2?", "What is 2 + 2?", "What is 2 + 2?"]
    kept, rejected = review(problems, SimilarityIndex(), SETTINGS)
    assert kept == ["What is 2 + 2?"] and rejected == {"length": 1, "banned": 1, "form": 1, "similar": 1}


# -- requests and settings ------------------------------------------------------------------------------------------


def test_a_text_request_lists_the_examples_and_opens_the_next_number():
    instruct = SelfInstruct(SelfInstructSettings(system_prompt="Teach.", request="More:\n"), "serl")
    prompt = instruct.request_prompt(["What is\n 2 + 2?", "Solve this:"], chat=False)
    lines = prompt.split("\n")
    assert lines[:2] == ["Teach.", "More:"] and lines[-1] == "3."
    assert sorted(lines[2:4]) == ["1. What is 2 + 2?", "2. Solve this"]  # spaces collapsed, a trailing colon cut
    [system, user] = instruct.request_prompt(["What is 2 + 2?"], chat=True)
    assert system == {"role": "system", "content": "Teach."}
    assert user == {"role": "user", "content": "More:\n1. What is 2 + 2?\n2."}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"every_steps": -1}, r"serl\.self_instruct\.every_steps must be 0"),
        ({"written_examples": 9}, r"serl\.self_instruct\.written_examples must lie in 0\.\.serl\.self_instruct\.exa"),
        ({"min_words": 5, "max_words": 4}, r"serl\.self_instruct\.min_words"),
        ({"max_similarity": 1.5}, r"serl\.self_instruct\.max_similarity"),
    ],
)
def test_settings_that_cannot_work_are_refused_naming_the_key(settings, message):
    with pytest.raises(ConfigError, match=message):
        SelfInstruct(SelfInstructSettings(**settings), "serl")


# -- written rows get the run's prompt format ------------------------------------------------------------------------


def pool_of(section: DataSection) -> Pool:
    rows = [{"question": "What is 1 + 1?", "answer": "2", "unit": "cm"}]
    dataset = Dataset.from_list([{**r, "prompt": format_prompt(section, r), POOL_ROW: 0} for r in rows])
    return Pool(dataset, seed=0, answer_column="answer", format_prompt=lambda columns: format_prompt(section, columns))


def test_a_written_row_gets_the_prompt_the_data_section_makes():
    text = PoolAccess(pool_of(DataSection(prompt_template="Q: {question}\n")), "serl", 4)
    row = text.format_row({"question": "What is 2 + 2?"})
    assert row == {"question": "What is 2 + 2?", "prompt": "Q: What is 2 + 2?\n"}
    assert not text.chat
    chat = PoolAccess(pool_of(DataSection(chat=True, system_prompt="Be brief.")), "serl", 4)
    assert chat.chat
    assert chat.format_row({"question": "What is 2 + 2?"})["prompt"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2 + 2?"},
    ]
    [row] = chat.add_rows([chat.format_row({"question": "What is 2 + 2?"})])
    assert chat.stats(row).label_free


def test_a_row_lacking_a_column_the_template_names_is_an_error_naming_plugin_and_step():
    access = PoolAccess(pool_of(DataSection(prompt_template="{question} ({unit})")), "serl", 4)
    with pytest.raises(PluginError, match=r"plugin 'serl' formatted a row at step 4 without the column 'unit' that "
                                          r"data.prompt_template names; the row has: question"):
        access.format_row({"question": "What is 2 + 2?"})
