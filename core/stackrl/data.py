"""Loading the prompt dataset from a config's ``data`` section."""

from __future__ import annotations

from pathlib import Path

from datasets import Dataset, load_dataset

from stackrl.config import DataSection
from stackrl.errors import ConfigError

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


def load_prompts(section: DataSection, split: str | None = None, size: int | None = None, keep_answer=False):
    """The dataset with a ``prompt`` column built from ``prompt_template`` (as chat messages with ``chat``).

    With ``label_free`` the answer column is dropped unless ``keep_answer`` (evaluation keeps it).
    """
    split = split or section.split
    size = size if size is not None else section.size
    dataset = _raw(section, split, size)
    if size is not None and len(dataset) > size:
        dataset = dataset.select(range(size))
    columns = dataset.column_names
    answer_needed = not section.label_free or keep_answer
    if answer_needed and section.answer_column not in columns:
        raise ConfigError(
            f"data.answer_column: the dataset has no column '{section.answer_column}'; columns: {', '.join(columns)}"
        )

    def prompt(row):
        try:
            text = section.prompt_template.format(**row)
        except KeyError as exc:
            raise ConfigError(
                f"data.prompt_template names column {exc} that the dataset lacks; columns: {', '.join(columns)}"
            ) from None
        if not section.chat:
            return {"prompt": text}
        system = [{"role": "system", "content": section.system_prompt}] if section.system_prompt else []
        return {"prompt": [*system, {"role": "user", "content": text}]}

    dataset = dataset.map(prompt, load_from_cache_file=False)
    if not answer_needed:
        dataset = dataset.remove_columns([section.answer_column])
    return dataset
