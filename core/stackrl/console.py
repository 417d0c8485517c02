"""What a run prints while it trains: the progress bar, and each log line as one row of a short table.

Every figure of a log line goes to ``metrics.jsonl``; the terminal gets the few a reader follows.
"""

from __future__ import annotations

from tqdm.auto import tqdm
from transformers import ProgressCallback


class LogTable(ProgressCallback):
    """transformers' progress bar (hidden with ``disable_tqdm``); a log line becomes a row of ``columns``.

    ``columns`` maps a heading to the log key it shows; a log line with none of them (TRL's end-of-training
    summary) prints nothing.
    """

    def __init__(self, columns: dict[str, str]):
        super().__init__()
        self.columns = columns
        self._widths = [max(len(heading), 8) for heading in columns]
        self._header_printed = False

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.training_bar = tqdm(total=state.max_steps, dynamic_ncols=True, disable=args.disable_tqdm)
        self.current_step = 0

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not any(key in logs for key in self.columns.values()):
            return
        if not self._header_printed:
            tqdm.write(self._line(["step", *self.columns]))
            self._header_printed = True
        cells = [f"{logs[key]:.3f}" if isinstance(logs.get(key), (int, float)) else "" for key in self.columns.values()]
        tqdm.write(self._line([str(state.global_step), *cells]))

    def _line(self, cells: list[str]) -> str:
        return "  ".join(cell.rjust(width) for cell, width in zip(cells, [6, *self._widths]))


def log_columns(components: list[str], accuracy_key: str | None) -> dict[str, str]:
    """The table's columns: each reward component, the total where there are several, held-out accuracy where the
    run measures it, and the time a step took."""
    columns = {name: f"rewards/{name}/mean" for name in components}
    if len(components) > 1:
        columns["reward"] = "reward"
    if accuracy_key:
        columns[accuracy_key.removeprefix("eval/")] = accuracy_key
    columns["s/step"] = "step_time"
    return columns


def quiet_library_bars() -> None:
    """Turn off the libraries' own bars (transformers' "Loading weights" and "Writing model shards", datasets'
    "Map"), which would print between the table's rows; the run's own bar stays."""
    import datasets
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    datasets.disable_progress_bars()
