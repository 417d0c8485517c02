"""sirlc: the conformance suite, what its defaults ask and read (the judge's general rules, the likelihood score
among them: tests/test_judges.py), and its mechanism on the built-in judging model, stackrl/arith-skills, with
the CPU recipe's generated grades: the grades of its own answers rank right above wrong within each question's
group (stackrl.testing.judging.JudgingMechanism)."""

from transformers import AutoTokenizer

from stackrl.judges import Mode, Scale
from stackrl.tasks import arith_tiny_path
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.heldout import written_rollout
from stackrl.testing.judging import JudgingMechanism
from stackrl_sirlc import SIRLC


class TestConformance(PluginConformance):
    plugin_name = "sirlc"
    plugin_settings = {"sirlc": {"max_new_tokens": 8}}


class TestMechanism(JudgingMechanism):
    plugin_name = "sirlc"


def test_it_asks_whether_the_answer_is_correct_and_scores_the_yes_no_likelihood():
    settings = SIRLC().config
    rollout = written_rollout(AutoTokenizer.from_pretrained(arith_tiny_path()), ["(4 * 2) + 3"], ["4 * 2 = 8"],
                              group_size=1)
    [prompt] = SIRLC()._judge.prompts(rollout)
    assert prompt.startswith("Here is a question and an answer to it.\nQuestion: What is (4 * 2) + 3?")
    assert prompt.endswith("Answer: 4 * 2 = 8\nIs the answer to the question correct? Reply yes or no.\nReply:")
    assert (settings.mode, settings.scale) == (Mode.likelihood, Scale.yes_no)
