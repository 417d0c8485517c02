"""What a config points to outside itself, checked before anything loads: the model's folder (or hub name), the
data's file and columns, and the packages of the loggers in ``trainer.report_to``.

Each check raises a ConfigError that names its key, or returns a note where the answer depends on the machine the
run starts on rather than this one.
"""

from __future__ import annotations

from pathlib import Path

from stackrl.config import DataSection, EvalSection, LoadedConfig, ModelSection
from stackrl.data import check_columns, first_row
from stackrl.errors import ConfigError, did_you_mean

MODEL_CONFIGS = ("config.json", "adapter_config.json")  # a checkpoint, or a PEFT adapter naming its base
# Loggers whose pip package is not named like the logger.
LOGGER_PACKAGES = {"tensorboard": "'stackrl[tensorboard]'", "azure_ml": "azureml-core", "flyte": "flytekit"}


def check_inputs(config: LoadedConfig) -> list[str]:
    """Check the model, the data and the loggers; return notes on what this machine cannot decide."""
    note = check_model(config.host.model)
    check_data(config.host.data, config.host.eval)
    check_loggers(config.host.trainer.get("report_to"))
    return [note] if note else []


def _is_hub_name(name: str) -> bool:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if name.startswith((".", "/", "~")):
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def check_model(section: ModelSection) -> str | None:
    """A local path must be a folder holding a model config; a hub name, while the hub is offline, should be in
    the local cache (a note if not: the machine that starts the run may have it)."""
    from huggingface_hub import constants, try_to_load_from_cache

    from stackrl.tasks import BUILTIN_MODELS

    name = section.name_or_path
    if name in BUILTIN_MODELS:
        return None
    path = Path(name).expanduser()
    if path.exists() or not _is_hub_name(name):
        if not path.is_dir():
            raise ConfigError(f"model.name_or_path: no model folder at '{name}'")
        if not any((path / file).is_file() for file in MODEL_CONFIGS):
            raise ConfigError(f"model.name_or_path: '{name}' holds no model config ({' or '.join(MODEL_CONFIGS)})")
        return None
    if not constants.HF_HUB_OFFLINE or isinstance(try_to_load_from_cache(name, "config.json"), str):
        return None
    return (
        f"model.name_or_path: '{name}' is not in this machine's Hugging Face cache and the hub is offline "
        "(HF_HUB_OFFLINE); the machine that starts the run needs it cached or the hub reachable"
    )


def check_data(data: DataSection, evaluation: EvalSection) -> None:
    """A built-in task or a local file is opened, and its columns must hold what the config reads from them."""
    needs_answer = not data.label_free or evaluation.before_and_after
    for split_key, split in (("data.split", data.split), ("eval.split", evaluation.split)):
        row = first_row(data, split, split_key)
        if row is None:
            return
        if needs_answer and data.label_free and data.answer_column not in row:
            raise ConfigError(
                f"data.answer_column: data.source ({data.source}) has no column '{data.answer_column}'; label-free "
                "training reads no answers, but the evaluation before and after training grades with them: set "
                "eval.before_and_after=false"
            )
        check_columns(data, list(row), needs_answer)


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
