"""ssr: the conformance suite, what its defaults ask and read (the judge's general rules: tests/test_judges.py),
and its mechanism on the built-in judging model, stackrl/arith-skills: the live policy's judgements of its own
outputs rank right above wrong within each prompt's group (stackrl.testing.judging.JudgingMechanism), with the
verdict standing in for the 0-100 score. Its claim is about translation, which the built-in task cannot show."""

from transformers import AutoTokenizer

from stackrl.judges import Mode, parse_judgement
from stackrl.tasks import arith_tiny_path
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.heldout import written_rollout
from stackrl.testing.judging import JudgingMechanism
from stackrl_ssr import SSR


class TestConformance(PluginConformance):
    plugin_name = "ssr"
    plugin_settings = {"ssr": {"max_new_tokens": 8}}


class TestMechanism(JudgingMechanism):
    plugin_name = "ssr"


def test_it_asks_for_a_score_out_of_100_with_zero_for_the_wrong_language_and_reads_it():
    settings = SSR().config
    rollout = written_rollout(AutoTokenizer.from_pretrained(arith_tiny_path()), ["(4 * 2) + 3"], ["4 * 2 = 8"],
                              group_size=1)
    [prompt] = SSR()._judge.prompts(rollout)
    assert "What is (4 * 2) + 3?" in prompt and "4 * 2 = 8" in prompt
    assert "0 to 100" in prompt and "not in the requested language" in prompt
    assert settings.mode is Mode.generate
    read = lambda text: parse_judgement(text, settings.scale, settings.verdict_prefix)  # noqa: E731
    assert read("Fluent, one slip.\nScore: 85") == 0.85
    assert read("Wrong language.\nScore: 0") == 0.0
    assert read("Score: 140") is None  # off the scale: malformed, not 1
