"""Loading the prompt dataset from a config's ``data`` section."""

from __future__ import annotations

import re
import string
from pathlib import Path

from datasets import Dataset, load_dataset
from datasets.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

from stackrl.config import DataSection
from stackrl.errors import ConfigError
from stackrl.truth import TRUTH_COLUMN

LOCAL_FORMATS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}


def _raw(section: DataSection, split: str, size: int | None) -> Dataset:
    from stackrl.tasks import TASKS

    if section.source in TASKS:
        options = dict(section.options)
        if size is not None:
            options["size"] = size
        return TASKS[section.source](split=split, seed=section.seed, **options)
    suffix = Path(section.source).suffix
    if suffix in LOCAL_FORMATS:
        if not Path(section.source).is_file():
            raise ConfigError(f"data.source: file not found: {section.source}")
        return load_dataset(LOCAL_FORMATS[suffix], data_files=section.source, split="train")
    try:
        return load_dataset(section.source, split=split)
    except Exception as exc:
        raise ConfigError(f"data.source: cannot load dataset '{section.source}' (split {split}): {exc}") from exc


def first_row(section: DataSection, split: str, split_key: str = "data.split") -> dict | None:
    """One row of ``split`` (the value of the config key ``split_key``), read without loading the dataset: a
    built-in task's first problem or a local file's first record; None for a hub dataset, whose rows are known
    only once it is downloaded."""
    from stackrl.tasks import TASKS

    if section.source in TASKS:
        try:
            return _raw(section, split, 1)[0]
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"data.source: the built-in task '{section.source}' cannot make problems for {split_key}={split} "
                f"with data.options {dict(section.options)}: {exc}"
            ) from exc
    suffix = Path(section.source).suffix
    if suffix not in LOCAL_FORMATS:
        return None
    if not Path(section.source).is_file():
        raise ConfigError(f"data.source: file not found: {section.source}")
    try:
        rows = load_dataset(LOCAL_FORMATS[suffix], data_files=section.source, split="train", streaming=True)
        return next(iter(rows))
    except StopIteration:
        raise ConfigError(f"data.source: {section.source} holds no rows") from None
    except Exception as exc:  # each format's reader raises its own errors for a malformed file
        raise ConfigError(f"data.source: cannot read {section.source}: {type(exc).__name__}: {exc}") from exc


def answer_format(section: DataSection) -> str:
    """The run's answer format: ``data.answer_format``, else the built-in task's own, else ``auto``."""
    from stackrl.answers import Extractor
    from stackrl.tasks import ANSWER_FORMATS

    chosen = section.answer_format or ANSWER_FORMATS.get(section.source, Extractor.auto.value)
    runs = [kind.value for kind in Extractor if kind is not Extractor.regex]
    if chosen not in runs:
        raise ConfigError(
            f"data.answer_format: '{chosen}' is none of {', '.join(runs)} (a pattern is a plugin's answer_regex)"
        )
    return chosen


def local_file(section: DataSection) -> bool:
    """Whether ``data.source`` names a local file (not a built-in task or a hub dataset)."""
    from stackrl.tasks import TASKS

    return section.source not in TASKS and Path(section.source).suffix in LOCAL_FORMATS


def load_rows(section: DataSection) -> Dataset:
    """Every row of the local file ``data.source``, its columns typed across all rows (a row without a column
    holds None in it)."""
    quiet = not are_progress_bars_disabled()  # a check prints nothing of its own
    if quiet:
        disable_progress_bars()
    try:
        return _raw(section, section.split, None)
    except ConfigError:
        raise
    except Exception as exc:  # each format's reader raises its own errors for a malformed file
        raise ConfigError(f"data.source: cannot read {section.source}: {type(exc).__name__}: {exc}") from exc
    finally:
        if quiet:
            enable_progress_bars()


def template_columns(template: str) -> list[str]:
    """The dataset columns ``template`` formats in (``{question}``, ``{row[0]}`` -> ``row``)."""
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(template) if field is not None]
    except ValueError as exc:
        raise ConfigError(f"data.prompt_template is not a format string: {exc}") from None
    columns = [re.split(r"[.\[]", field)[0] for field in fields]
    positional = [field for field, column in zip(fields, columns) if not column or column.isdigit()]
    if positional:
        raise ConfigError(f"data.prompt_template: '{{{positional[0]}}}' must name a dataset column")
    return list(dict.fromkeys(columns))


def check_columns(section: DataSection, columns: list[str], answer_needed: bool) -> None:
    """The dataset has the answer column (where needed) and every column the prompt template names."""
    if answer_needed and section.answer_column not in columns:
        raise ConfigError(
            f"data.answer_column: data.source ({section.source}) has no column '{section.answer_column}'; "
            f"columns: {', '.join(columns)}"
        )
    lacking = [column for column in template_columns(section.prompt_template) if column not in columns]
    if lacking:
        raise ConfigError(
            f"data.prompt_template names column '{lacking[0]}', which data.source ({section.source}) lacks; "
            f"columns: {', '.join(columns)}"
        )


def format_prompt(section: DataSection, row: dict):
    """The prompt of ``row`` (a dict of columns) as the run gives it to the policy: ``prompt_template`` formatted with
    the row's columns, as text or, with ``chat``, as chat messages (the system prompt first)."""
    text = section.prompt_template.format(**row)
    if not section.chat:
        return text
    system = [{"role": "system", "content": section.system_prompt}] if section.system_prompt else []
    return [*system, {"role": "user", "content": text}]


def load_prompts(section: DataSection, split: str | None = None, size: int | None = None, keep_answer=False):
    """The dataset with a ``prompt`` column built from ``prompt_template`` (as chat messages with ``chat``).

    With ``label_free`` the answer column is hidden unless ``keep_answer`` (evaluation keeps it): renamed to
    ``TRUTH_COLUMN``, which only the host reads (:mod:`stackrl.truth`), where the data has it.
    """
    split = split or section.split
    size = size if size is not None else section.size
    dataset = _raw(section, split, size)
    if size is not None and len(dataset) > size:
        dataset = dataset.select(range(size))
    answer_needed = not section.label_free or keep_answer
    check_columns(section, dataset.column_names, answer_needed)

    dataset = dataset.map(lambda row: {"prompt": format_prompt(section, row)}, load_from_cache_file=False)
    if not answer_needed and section.answer_column in dataset.column_names:
        dataset = dataset.rename_column(section.answer_column, TRUTH_COLUMN)
    return dataset
