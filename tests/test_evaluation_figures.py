"""The held-out figures of k samples a problem: pass@1 averages them, pass@k counts a problem some sample solves."""

from stackrl.evaluation import _solve_figures
from stackrl.rewards import exact_match


def test_pass_at_k_is_the_share_of_problems_some_sample_solves():
    completions = [["The answer is 3.", "The answer is 4."], ["The answer is 1.", "The answer is 2."],
                   ["The answer is 5.", "The answer is 5."]]
    figures = _solve_figures(completions, ["4", "7", "5"], ["a", "a", "b"], exact_match, k=2)
    assert figures["pass@2"] == 2 / 3
    assert figures["pass@1"] == (0.5 + 0 + 1) / 3
    assert figures["by_category"] == {"a": 0.25, "b": 1.0}


def test_one_sample_a_problem_reports_no_separate_pass_at_k():
    figures = _solve_figures([["The answer is 4."]], ["4"], None, exact_match, k=1)
    assert figures["pass@1"] == 1.0 and sum(key.startswith("pass@") for key in figures) == 1
