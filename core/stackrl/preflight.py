"""What a config points to outside itself, checked before anything loads: the model's folder (or hub name), the
data's file and columns, and the packages of the loggers in ``trainer.report_to``.

Each check raises a ConfigError that names its key, or returns a note where the answer depends on the machine the
run starts on rather than this one.
"""

from __future__ import annotations

import os
from pathlib import Path

from stackrl.config import DataSection, EvalSection, LoadedConfig, ModelSection
from stackrl.data import check_columns, first_row, load_rows, local_file, template_columns
from stackrl.errors import ConfigError, Mistakes, did_you_mean

MODEL_CONFIGS = ("config.json", "adapter_config.json")  # a checkpoint, or a PEFT adapter naming its base
# The files one of which a tokenizer is loaded from (fast, sentencepiece, BPE, WordPiece, or a config naming its class).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "spiece.model", "vocab.json", "vocab.txt")
# Loggers whose pip package is not named like the logger.
LOGGER_PACKAGES = {"tensorboard": "'stackrl[tensorboard]'", "azure_ml": "azureml-core", "flyte": "flytekit"}


def check_inputs(config: LoadedConfig, mistakes: Mistakes) -> tuple[tuple[str, ...] | None, list[str]]:
    """Check the model, the data, the loggers and the run folder, each mistake kept in ``mistakes``; return the
    training data's columns (None where only loading it tells) and notes on what this machine cannot decide or
    the user may not expect."""
    notes, columns = [], None
    with mistakes.check():
        notes.append(check_model(config.host.model))
    for name, aux in config.host.aux_models.items():
        if aux.backend == "hf":
            with mistakes.check():
                notes.append(check_model(ModelSection(name_or_path=aux.name_or_path), f"aux_models.{name}"))
    with mistakes.check():
        columns, data_notes = check_data(config.host.data, config.host.eval)
        notes += data_notes
    with mistakes.check():
        check_loggers(config.host.trainer.get("report_to"))
    with mistakes.check():
        check_output_dir(config.host.output_dir)
    return columns, [note for note in notes if note]


def _is_hub_name(name: str) -> bool:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if name.startswith((".", "/", "~")):
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def check_model(section: ModelSection, key: str = "model") -> str | None:
    """A local path must be a folder holding a model config; a hub name, while the hub is offline, should be in
    the local cache (a note if not: the machine that starts the run may have it). ``key`` is the config section
    named in errors (an auxiliary model's, ``aux_models.<name>``)."""
    from huggingface_hub import constants, try_to_load_from_cache

    from stackrl.tasks import BUILTIN_MODELS

    name = section.name_or_path
    if name in BUILTIN_MODELS:
        return None
    path = Path(name).expanduser()
    if path.exists() or not _is_hub_name(name):
        if not path.is_dir():
            raise ConfigError(f"{key}.name_or_path: no model folder at '{name}'")
        if not any((path / file).is_file() for file in MODEL_CONFIGS):
            raise ConfigError(f"{key}.name_or_path: '{name}' holds no model config ({' or '.join(MODEL_CONFIGS)})")
        # transformers would otherwise pick a tokenizer that does not fit the weights, and generation fails at step 1.
        if (path / "config.json").is_file() and not any((path / file).is_file() for file in TOKENIZER_FILES):
            raise ConfigError(
                f"{key}.name_or_path: '{name}' holds a model but no tokenizer (none of {', '.join(TOKENIZER_FILES)}); "
                "save the tokenizer into it (tokenizer.save_pretrained) or copy the base model's tokenizer files"
            )
        return None
    if not constants.HF_HUB_OFFLINE or isinstance(try_to_load_from_cache(name, "config.json"), str):
        return None
    return (
        f"{key}.name_or_path: '{name}' is not in this machine's Hugging Face cache and the hub is offline "
        "(HF_HUB_OFFLINE); the machine that starts the run needs it cached or the hub reachable"
    )


def check_data(data: DataSection, evaluation: EvalSection) -> tuple[tuple[str, ...] | None, list[str]]:
    """A built-in task or a local file is opened, and its columns must hold what the config reads from them; a
    local file's every row is checked. Returns the training split's columns (None for a hub dataset) and notes."""
    needs_answer = not data.label_free or evaluation.before_and_after
    columns, notes = None, []
    for split_key, split in (("data.split", data.split), ("eval.split", evaluation.split)):
        row = first_row(data, split, split_key)
        if row is None:
            return None, []
        columns = columns or tuple(row)
        if needs_answer and data.label_free and data.answer_column not in row:
            raise ConfigError(
                f"data.answer_column: data.source ({data.source}) has no column '{data.answer_column}'; label-free "
                "training reads no answers, but the evaluation before and after training grades with them: set "
                "eval.before_and_after=false"
            )
        check_columns(data, list(row), needs_answer)
    if local_file(data):
        notes = check_rows(data, needs_answer and not data.label_free)
    return columns, notes


def check_rows(data: DataSection, answers: bool) -> list[str]:
    """Every row of a local file makes a prompt, and has an answer where the run grades with them (a note with the
    count where some have none: they train unscored); a note where ``data.size`` asks for more rows than it has."""
    rows = load_rows(data)
    notes = []
    empty = [i for i, row in enumerate(rows) if not _prompt_text(data, row).strip()]
    if empty:
        raise ConfigError(
            f"data.prompt_template: {len(empty)} of {len(rows)} rows of {data.source} make an empty prompt (first: "
            f"row {empty[0] + 1}); remove them or fill their {', '.join(template_columns(data.prompt_template))}"
        )
    unanswered = rows.data.column(data.answer_column).null_count if answers else 0
    if unanswered:
        notes.append(
            f"data.answer_column: {unanswered} of {len(rows)} rows of {data.source} have no '{data.answer_column}'; "
            "the outcome rewards leave them unscored, so they train with no reward from those components"
        )
    if data.size is not None and data.size > len(rows):
        notes.append(f"data.size: {data.size} rows asked for, but {data.source} has {len(rows)}; the run uses {len(rows)}")
    return notes


def _prompt_text(data: DataSection, row: dict) -> str:
    """The text of the row's prompt, where each column it uses has a value ("" where one has none)."""
    if any(row.get(column) is None for column in template_columns(data.prompt_template)):
        return ""
    return data.prompt_template.format(**row)


def check_loggers(report_to) -> None:
    """Each logger in ``trainer.report_to`` is one transformers knows, with its package installed."""
    from transformers.integrations.integration_utils import (
        INTEGRATION_TO_CALLBACK,
        get_available_reporting_integrations,
    )

    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    installed = get_available_reporting_integrations()
    for name in names:
        if name in ("all", "none"):
            continue
        if name not in INTEGRATION_TO_CALLBACK:
            raise ConfigError(
                f"trainer.report_to: unknown logger '{name}'.{did_you_mean(name, INTEGRATION_TO_CALLBACK)} "
                f"Loggers: {', '.join(INTEGRATION_TO_CALLBACK)}"
            )
        if name not in installed:
            raise ConfigError(
                f"trainer.report_to: the logger '{name}' is not installed; install it with "
                f"`pip install {LOGGER_PACKAGES.get(name, name)}` or remove it from trainer.report_to"
            )


def check_output_dir(output_dir: str) -> None:
    """The run folder is one this user can create (or write in): a file in its path or a folder without write
    permission is found now, not when the first file is saved."""
    path = Path(output_dir).expanduser().absolute()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"output_dir: '{output_dir}' is a file, not a folder")
    existing = next(parent for parent in (path, *path.parents) if parent.exists())
    if not existing.is_dir():
        raise ConfigError(f"output_dir: cannot create '{output_dir}': '{existing}' is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"output_dir: cannot write in '{existing}' (no permission); choose another output_dir")
