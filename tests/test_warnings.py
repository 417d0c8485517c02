"""ctx.warn: a plugin's warning is a metric in the step's log, a logged warning once, and a total in the summary."""

import json
import logging

from stackrl.cli import main
from stackrl.plots import METRICS_FILE


def test_warnings_are_logged_and_totalled_in_the_run_summary(make_config, tmp_path, capsys, caplog):
    make_config(["digit_reward", "warns"], trainer={"max_steps": 3}, eval={"before_and_after": False})
    run = tmp_path / "run"
    with caplog.at_level(logging.WARNING, logger="stackrl.trainer"):
        assert main(["train", str(tmp_path / "tiny.yaml")]) == 0
    # One rollout per step (a warning from a stage hook), two after each step (from a lifecycle hook).
    out = capsys.readouterr().out
    assert "warning: warns/rollout occurred 3 times" in out and "warning: warns/step occurred 6 times" in out
    records = [json.loads(line) for line in (run / METRICS_FILE).read_text().splitlines()]
    assert [r["warnings/warns/step"] for r in records if "warnings/warns/step" in r] == [2, 2, 2]
    assert [r["warnings/warns/rollout"] for r in records if "warnings/warns/rollout" in r] == [1, 1, 1]
    first_time = [r.message for r in caplog.records if "warns/" in r.message]
    assert len(first_time) == 2, "the log says it once per warning, not at every step"
