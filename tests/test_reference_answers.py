"""stackrl.rewards.reference_answers: what a plugin that judges by the reference answers reads, and its refusal
of a label-free batch; OutcomeSettings, the config keys that name its reward and column."""

from dataclasses import dataclass
from typing import ClassVar

import pytest

from stackrl import ConfigError, PluginError
from stackrl.rewards import OutcomeSettings, reference_answers


def test_the_answer_column_is_read_and_its_absence_names_the_key_the_purpose_and_the_label_free_run():
    columns = {"answer": ["4", "7"], "solution": ["...", "..."]}
    assert reference_answers(columns, "answer", plugin="rrr", purpose="tell failed attempts by") == ["4", "7"]
    with pytest.raises(PluginError) as refused:
        reference_answers({"solution": ["..."]}, "answer", plugin="rrr", purpose="tell failed attempts by")
    assert str(refused.value) == (
        "rrr.answer_column: the batch has no column 'answer' to tell failed attempts by (a label-free run hides it)"
    )


@dataclass
class _Outcome(OutcomeSettings):
    section: ClassVar[str] = "mine"
    tries: int = 1

    def check(self):
        if self.tries < 1:
            raise ConfigError(f"mine.tries: must be at least 1, not {self.tries}")


def test_outcome_settings_refuse_an_unknown_metric_and_the_subclass_s_own_settings_when_built():
    with pytest.raises(ConfigError, match=r"mine.metric: must be a built-in outcome reward \(exact_match, math_verify\), not 'f1'"):
        _Outcome(metric="f1")
    with pytest.raises(ConfigError, match="mine.tries: must be at least 1, not 0"):
        _Outcome(tries=0)


def test_outcome_settings_judge_a_completion_by_their_metric():
    settings = _Outcome()
    assert settings.is_correct("so the answer is 4.", "4") is True
    assert settings.is_correct("so the answer is 5.", "4") is False
