"""selfjudge: the conformance suite, what its defaults ask and read (the judge's general rules:
tests/test_judges.py), and its mechanism on the built-in judging model, stackrl/arith-skills: its verdicts on its
own solutions rank right above wrong within each problem's group (stackrl.testing.judging.JudgingMechanism)."""

from transformers import AutoTokenizer

from stackrl.judges import Mode, parse_judgement
from stackrl.tasks import arith_tiny_path
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.heldout import written_rollout
from stackrl.testing.judging import JudgingMechanism
from stackrl_selfjudge import SelfJudge


class TestConformance(PluginConformance):
    plugin_name = "selfjudge"
    plugin_settings = {"selfjudge": {"max_new_tokens": 8}}


class TestMechanism(JudgingMechanism):
    plugin_name = "selfjudge"


def test_it_asks_for_a_check_of_its_own_solution_and_reads_the_verdict_line():
    settings = SelfJudge().config
    rollout = written_rollout(AutoTokenizer.from_pretrained(arith_tiny_path()), ["(4 * 2) + 3"], ["4 * 2 = 9"],
                              group_size=1)
    [prompt] = SelfJudge()._judge.prompts(rollout)
    assert "What is (4 * 2) + 3?" in prompt and "4 * 2 = 9" in prompt and "Verdict: wrong" in prompt
    assert settings.mode is Mode.generate
    read = lambda text: parse_judgement(text, settings.scale, settings.verdict_prefix)  # noqa: E731
    assert read("4 * 2 = 8, not 9.\nVerdict: wrong") == 0.0
    assert read("Each step holds.\nVerdict: correct") == 1.0
    assert read("Each step holds, so it is correct.") is None  # no verdict line: malformed, not 0
