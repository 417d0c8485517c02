"""The prompt pool: the training rows the host draws each generation batch from, which plugins may steer.

Until a plugin changes it, the pool only watches: TRL's sampler chooses the rows, exactly as in a run without a
pool, and the pool keeps each row's statistics (times drawn, last pass rate, last mean |advantage|). From the
first change on (category or row weights, added or retired rows, a switch to another stage's rows), the pool draws
every training batch itself:

- each of the batch's ``B`` problems (``B`` = generation batch / ``num_generations``) is drawn in turn; with
  category weights, a category first (probability proportional to its weight, among categories that still have
  a row to draw), then a row of that category; without them, a row of the whole pool;
- a row is drawn among the rows not yet drawn in the current cycle, with probability proportional to its weight
  (default 1); when none is left (in the category, or in the pool), a new cycle begins there;
- each drawn row is repeated ``num_generations`` times in a row, and each process takes its slice, as from TRL's
  sampler.

Every process holds the same pool and makes the same draws: plugins change it from ``train_begin`` and
``post_step``, which see the same gathered rollout on every process, and the draws come from the pool's own
generator. The pool's state (rows added, weights, retirements, statistics, generator) rides in checkpoints.
Evaluation never draws from it.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from dataclasses import dataclass
from typing import Any, Callable

import torch

from stackrl.errors import PluginError

CATEGORY_COLUMN = "category"  # the dataset column whose values are the pool's categories
POOL_ROW = "stackrl_pool_row"  # each row's pool id, a dataset column that hooks do not see
POOL_STATE_FILE = "stackrl_pool.pt"
ADDED_FILE = "pool_added.jsonl"  # in the run folder: every row a plugin added, so a user can read them


@dataclass(frozen=True)
class RowStats:
    """What the pool knows of one row. ``last_pass_rate``: the share of the completions of the row's last group
    that every built-in outcome reward scored 1 (``None``: never drawn, or no completion scored);
    ``last_abs_advantage``: the mean over that group of each completion's token-mean |advantage|."""

    id: int
    category: str | None
    stage: int
    label_free: bool
    retired: bool
    weight: float
    times_drawn: int
    last_pass_rate: float | None
    last_abs_advantage: float | None


class Pool:
    """The rows of one run: the training dataset's (ids ``0..N-1``), then those plugins add (ids from ``N``).

    ``dataset`` is a map-style dataset whose rows carry their id in :data:`POOL_ROW`; ``added_file`` is where
    added rows are written (``None`` on every process but the first); ``format_prompt`` makes a row's prompt from
    its columns as the run's data section does (``stackrl.data.format_prompt``), for :meth:`format_row`.
    """

    def __init__(self, dataset, *, seed: int, answer_column: str, added_file: str | None = None,
                 format_prompt: Callable[[dict], Any] | None = None):
        self._base = dataset
        self._format_prompt = format_prompt
        self._answer_column = answer_column
        self._added_file = added_file
        self._columns = [c for c in dataset.column_names if c != POOL_ROW]
        self._chat = bool(len(dataset)) and not isinstance(dataset[0]["prompt"], str)
        base_categories = dataset[CATEGORY_COLUMN] if CATEGORY_COLUMN in self._columns else [None] * len(dataset)
        self._category: list[str | None] = [None if c is None else str(c) for c in base_categories]
        self._stage: list[int] = [0] * len(dataset)
        # A label-free run hides the answer column from the pool too (stackrl.truth): its rows are label-free.
        self._label_free: list[bool] = [answer_column not in self._columns] * len(dataset)
        self._added: list[dict] = []  # {"id", "step", "plugin", "stage", "label_free", "row"}
        self._retired: set[int] = set()
        self._row_weights: dict[int, float] = {}
        self._category_weights: dict[str, float] | None = None
        self._used: set[int] = set()  # drawn in the current cycle
        self._times_drawn: dict[int, int] = {}
        self._pass_rate: dict[int, float | None] = {}
        self._abs_advantage: dict[int, float] = {}
        self._stage_now = 0
        self._steered = False
        self._changed_by: tuple[str, int] | None = None  # (plugin, step) of the last change, for error messages
        self._batches = 0
        self._last_batch: list[int] = []
        self._generator = torch.Generator().manual_seed(seed)

    # -- reading ------------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._category)

    @property
    def steered(self) -> bool:
        """Whether a plugin has changed the pool, so that the pool, not TRL's sampler, draws the batches."""
        return self._steered

    @property
    def batches(self) -> int:
        """How many training batches the pool has recorded statistics for (drawn by it or by TRL's sampler)."""
        return self._batches

    @property
    def last_batch(self) -> list[int]:
        """The row ids of the last training batch, one per group, in order."""
        return list(self._last_batch)

    @property
    def stage(self) -> int:
        return self._stage_now

    @property
    def chat(self) -> bool:
        """Whether the run's prompts are chat messages (else text)."""
        return self._chat

    @property
    def category_weights(self) -> dict[str, float] | None:
        return None if self._category_weights is None else dict(self._category_weights)

    def categories(self) -> list[str | None]:
        """The categories of the rows that can be drawn, in order of first appearance."""
        return list(dict.fromkeys(self._category[i] for i in self.active_rows()))

    def active_rows(self) -> list[int]:
        """The ids of the rows that are not retired."""
        return [i for i in range(len(self)) if i not in self._retired]

    def stats(self, row: int, plugin: str | None = None, step: int | None = None) -> RowStats:
        self._check_id(row, "stats", plugin, step)
        return RowStats(
            id=row,
            category=self._category[row],
            stage=self._stage[row],
            label_free=self._label_free[row],
            retired=row in self._retired,
            weight=self._row_weights.get(row, 1.0),
            times_drawn=self._times_drawn.get(row, 0),
            last_pass_rate=self._pass_rate.get(row),
            last_abs_advantage=self._abs_advantage.get(row),
        )

    def row(self, row: int, plugin: str | None = None, step: int | None = None) -> dict:
        """Row ``row`` as the trainer hands it to TRL: every column of the pool (``None`` where the row has none)."""
        self._check_id(row, "row", plugin, step)
        base = len(self._base)
        values = self._base[row] if row < base else self._added[row - base]["row"]
        return {**{c: values.get(c) for c in self._columns}, POOL_ROW: row}

    def format_row(self, columns: dict, plugin: str, step: int) -> dict:
        """``columns`` and the prompt the run's data section makes of them: a row for :meth:`add_rows`."""
        if self._format_prompt is None:
            raise PluginError(f"plugin '{plugin}' formatted a row at step {step}, but this run has no prompt format")
        try:
            prompt = self._format_prompt(columns)
        except KeyError as exc:
            raise PluginError(
                f"plugin '{plugin}' formatted a row at step {step} without the column {exc} that data.prompt_template "
                f"names; the row has: {', '.join(columns) or 'no column'}"
            ) from None
        return {**columns, "prompt": prompt}

    # -- changing (through PoolAccess, which names the plugin and the step) -------------------------------------

    def set_category_weights(self, weights: dict | None, plugin: str, step: int) -> None:
        if weights is not None:
            known = set(self._category[i] for i in self.active_rows())
            for name, weight in weights.items():
                if name not in known:
                    raise PluginError(
                        f"plugin '{plugin}' set a weight for category {name!r} at step {step}, which no active "
                        f"row of the pool has; categories: {', '.join(map(repr, self.categories())) or 'none'}"
                    )
                self._check_weight(weight, f"category {name!r}", plugin, step)
            weights = {name: float(w) for name, w in weights.items()}
        self._category_weights = weights
        self._changed(plugin, step)

    def set_row_weights(self, weights: dict, plugin: str, step: int) -> None:
        for row, weight in weights.items():
            self._check_id(row, "set_row_weights", plugin, step)
            self._check_weight(weight, f"row {row}", plugin, step)
        self._row_weights.update({int(row): float(w) for row, w in weights.items()})
        self._changed(plugin, step)

    def retire(self, rows, plugin: str, step: int) -> None:
        rows = list(rows)
        for row in rows:
            self._check_id(row, "retire", plugin, step)
        self._retired.update(int(row) for row in rows)
        self._changed(plugin, step)

    def add_rows(self, rows, plugin: str, step: int) -> list[int]:
        """Add ``rows`` (dicts with a ``prompt`` and any other columns); returns their ids."""
        if isinstance(rows, dict) or not hasattr(rows, "__iter__"):
            raise PluginError(f"plugin '{plugin}' added rows at step {step} as {type(rows).__name__}; expected a list of dicts")
        rows = [self._checked_row(row, i, plugin, step) for i, row in enumerate(rows)]
        ids = []
        for row in rows:
            for column in row:
                if column not in self._columns:
                    self._columns.append(column)
            row_id = len(self)
            label_free = row.get(self._answer_column) is None
            category = row.get(CATEGORY_COLUMN)
            self._category.append(None if category is None else str(category))
            self._stage.append(self._stage_now)
            self._label_free.append(label_free)
            record = {"id": row_id, "step": step, "plugin": plugin, "stage": self._stage_now,
                      "label_free": label_free, "row": row}
            self._added.append(record)
            ids.append(row_id)
            if self._added_file:
                with open(self._added_file, "a") as f:
                    f.write(json.dumps(record) + "\n")
        self._changed(plugin, step)
        return ids

    def switch_dataset(self, rows, plugin: str, step: int) -> list[int]:
        """Start a new stage on ``rows``: new rows (dicts, added) or the ids of rows the pool holds (an earlier
        stage's, drawn again). Every other row retires and category weights are cleared; returns the stage's ids."""
        rows = list(rows)
        if not rows:
            raise PluginError(f"plugin '{plugin}' switched the pool to an empty dataset at step {step}")
        old = self.active_rows()
        if all(isinstance(row, numbers.Integral) and not isinstance(row, bool) for row in rows):
            for row in rows:
                self._check_id(row, "switch_dataset", plugin, step)
            ids = [int(row) for row in rows]
            self._stage_now += 1
        else:
            self._stage_now += 1
            try:
                ids = self.add_rows(rows, plugin, step)
            except PluginError:
                self._stage_now -= 1
                raise
        self._retired.update(old)
        self._retired.difference_update(ids)
        self._category_weights = None
        self._used.clear()
        self._changed(plugin, step)
        return ids

    # -- drawing and recording (the trainer's) ------------------------------------------------------------------

    def draw(self, count: int, step: int) -> list[int]:
        """The ids of the next batch's ``count`` problems, drawn as the module docstring says."""
        drawable = [i for i in self.active_rows() if self._row_weights.get(i, 1.0) > 0]
        by_category: dict[str | None, list[int]] = {}
        for i in drawable:
            by_category.setdefault(self._category[i], []).append(i)
        return [self._draw_one(drawable, by_category, step) for _ in range(count)]

    def record(self, rows: list[int], pass_rates: list[float | None], abs_advantages: list[float]) -> None:
        """The statistics of one training batch: per group, its row, pass rate and mean |advantage|."""
        for row, pass_rate, advantage in zip(rows, pass_rates, abs_advantages, strict=True):
            self._times_drawn[row] = self._times_drawn.get(row, 0) + 1
            self._pass_rate[row] = pass_rate
            self._abs_advantage[row] = advantage
        self._batches += 1
        self._last_batch = list(rows)

    def _draw_one(self, drawable: list[int], by_category: dict, step: int) -> int:
        if self._category_weights is not None:
            weights = self._category_weights
            choices = [c for c, w in weights.items() if w > 0 and c in by_category]
            if not choices:
                self._dry(step, "no category with a positive weight has a row left to draw")
            drawable = by_category[choices[self._pick([weights[c] for c in choices])]]
        if not drawable:
            self._dry(step, "every row is retired or weighs 0")
        unused = [i for i in drawable if i not in self._used]
        if not unused:  # a new cycle, in this category or in the whole pool
            self._used.difference_update(drawable)
            unused = drawable
        row = unused[self._pick([self._row_weights.get(i, 1.0) for i in unused])]
        self._used.add(row)
        return row

    def _pick(self, weights: list[float]) -> int:
        if len(weights) == 1:
            return 0
        return int(torch.multinomial(torch.tensor(weights, dtype=torch.float64), 1, generator=self._generator))

    # -- checkpoints --------------------------------------------------------------------------------------------

    def state_dict(self) -> dict:
        return {
            "added": [dict(record) for record in self._added],
            "columns": list(self._columns),
            "retired": sorted(self._retired),
            "row_weights": dict(self._row_weights),
            "category_weights": self.category_weights,
            "used": sorted(self._used),
            "times_drawn": dict(self._times_drawn),
            "pass_rate": dict(self._pass_rate),
            "abs_advantage": dict(self._abs_advantage),
            "stage": self._stage_now,
            "steered": self._steered,
            "changed_by": None if self._changed_by is None else list(self._changed_by),
            "batches": self._batches,
            "last_batch": list(self._last_batch),
            "generator": self._generator.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        base = len(self._base)
        del self._category[base:], self._stage[base:], self._label_free[base:]
        self._added = [dict(record) for record in state["added"]]
        for record in self._added:
            category = record["row"].get(CATEGORY_COLUMN)
            self._category.append(None if category is None else str(category))
            self._stage.append(record["stage"])
            self._label_free.append(record["label_free"])
        self._columns = list(state["columns"])
        self._retired = set(state["retired"])
        self._row_weights = dict(state["row_weights"])
        self._category_weights = state["category_weights"]
        self._used = set(state["used"])
        self._times_drawn = dict(state["times_drawn"])
        self._pass_rate = dict(state["pass_rate"])
        self._abs_advantage = dict(state["abs_advantage"])
        self._stage_now = state["stage"]
        self._steered = state["steered"]
        self._changed_by = None if state["changed_by"] is None else tuple(state["changed_by"])
        self._batches = state["batches"]
        self._last_batch = list(state["last_batch"])
        self._generator.set_state(state["generator"])
        if self._added_file:  # rows added after the checkpoint were never added in this run's history
            with open(self._added_file, "w") as f:
                f.writelines(json.dumps(record) + "\n" for record in self._added)

    def forget_added_rows_file(self) -> None:
        if self._added_file and os.path.exists(self._added_file):
            os.remove(self._added_file)

    # -- checks -------------------------------------------------------------------------------------------------

    def _changed(self, plugin: str, step: int) -> None:
        self._steered = True
        self._changed_by = (plugin, step)

    def _dry(self, step: int, reason: str):
        by = "" if self._changed_by is None else f" (last changed by plugin '{self._changed_by[0]}' at step {self._changed_by[1]})"
        raise PluginError(f"the prompt pool has nothing to draw at step {step}: {reason}{by}")

    def _check_id(self, row, what: str, plugin: str | None, step: int | None) -> None:
        if isinstance(row, bool) or not isinstance(row, numbers.Integral) or not 0 <= row < len(self):
            who = f"plugin '{plugin}' called {what} at step {step} with" if plugin else f"{what}:"
            raise PluginError(f"{who} row {row!r}, which is not a pool row id (0..{len(self) - 1})")

    @staticmethod
    def _check_weight(weight, what: str, plugin: str, step: int) -> None:
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real) or not math.isfinite(weight) or weight < 0:
            raise PluginError(
                f"plugin '{plugin}' gave {what} the weight {weight!r} at step {step}; expected a finite number >= 0"
            )

    def _checked_row(self, row, index: int, plugin: str, step: int) -> dict:
        where = f"plugin '{plugin}' added a malformed row at step {step} (row {index} of the call)"
        if not isinstance(row, dict):
            raise PluginError(f"{where}: {type(row).__name__}, expected a dict with a 'prompt'")
        if POOL_ROW in row:
            raise PluginError(f"{where}: the column '{POOL_ROW}' is the pool's own")
        prompt = row.get("prompt")
        if self._chat:
            good = isinstance(prompt, list) and prompt and all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in prompt
            )
            expected = "chat messages (a list of {'role', 'content'} dicts), as the run's prompts are"
        else:
            good = isinstance(prompt, str) and bool(prompt)
            expected = "a non-empty string, as the run's prompts are"
        if not good:
            raise PluginError(f"{where}: its 'prompt' is {prompt!r}; expected {expected}")
        try:
            json.dumps(row)
        except (TypeError, ValueError) as exc:
            raise PluginError(f"{where}: its values must be plain JSON values ({exc})") from None
        return json.loads(json.dumps(row))


class PoolAccess:
    """``ctx.pool``: the run's prompt pool, as one plugin sees it at one step (changes name the plugin and step)."""

    def __init__(self, pool: Pool, plugin: str, step: int):
        self._pool, self._plugin, self._step = pool, plugin, step

    def __len__(self) -> int:
        return len(self._pool)

    batches = property(lambda self: self._pool.batches, doc=Pool.batches.__doc__)
    last_batch = property(lambda self: self._pool.last_batch, doc=Pool.last_batch.__doc__)
    stage = property(lambda self: self._pool.stage, doc="The current stage: 0, plus one per switch_dataset.")
    category_weights = property(lambda self: self._pool.category_weights, doc="The category weights, or None.")
    chat = property(lambda self: self._pool.chat, doc=Pool.chat.__doc__)

    def categories(self) -> list[str | None]:
        """The categories of the rows that can be drawn, in order of first appearance."""
        return self._pool.categories()

    def active_rows(self) -> list[int]:
        """The ids of the rows that are not retired."""
        return self._pool.active_rows()

    def stats(self, row: int) -> RowStats:
        """What the pool knows of row ``row``: see :class:`RowStats`."""
        return self._pool.stats(row, self._plugin, self._step)

    def row(self, row: int) -> dict:
        """The columns of row ``row`` (``None`` where it has none)."""
        return {k: v for k, v in self._pool.row(row, self._plugin, self._step).items() if k != POOL_ROW}

    def set_category_weights(self, weights: dict[str, float] | None) -> None:
        """Draw each problem's category with probability proportional to ``weights`` (categories left out weigh
        0); ``None`` draws rows from the whole pool again."""
        self._pool.set_category_weights(weights, self._plugin, self._step)

    def set_row_weights(self, weights: dict[int, float]) -> None:
        """Weigh these rows (default 1; 0 never draws a row) within their category or the pool."""
        self._pool.set_row_weights(weights, self._plugin, self._step)

    def format_row(self, columns: dict) -> dict:
        """``columns`` with the ``prompt`` the run makes of them (``data.prompt_template``, as text or chat), ready
        for :meth:`add_rows`: ``format_row({"question": "What is 2 + 2?"})``."""
        return self._pool.format_row(columns, self._plugin, self._step)

    def add_rows(self, rows: list[dict]) -> list[int]:
        """Add rows (each a dict with a ``prompt`` in the run's form and any other columns); a row without the
        answer column is label-free. Returns their ids; each is written to the run folder's ``pool_added.jsonl``."""
        return self._pool.add_rows(rows, self._plugin, self._step)

    def retire(self, rows) -> None:
        """Never draw these rows again (their statistics stay readable)."""
        self._pool.retire(rows, self._plugin, self._step)

    def switch_dataset(self, rows: list) -> list[int]:
        """Start a new stage on ``rows``: new rows (dicts, as for :meth:`add_rows`) or ids of rows the pool holds
        (an earlier stage's). Every other row retires and category weights are cleared; returns the stage's ids."""
        return self._pool.switch_dataset(rows, self._plugin, self._step)


def added_file(output_dir: str) -> str:
    return os.path.join(output_dir, ADDED_FILE)
