"""Turning a validated config into a trainer, and running it."""

from __future__ import annotations

import json
import os
from importlib.metadata import version

import torch
from accelerate import PartialState
from trl import GRPOConfig

from stackrl.config import LoadedConfig
from stackrl.data import load_prompts
from stackrl.errors import ConfigError
from stackrl.manager import PluginManager
from stackrl.modeling import load_model, load_tokenizer
from stackrl.rewards import OUTCOME_REWARDS
from stackrl.trainer import StackTrainer, reward_components, weights_by_name

CONFIG_FILE = "stackrl_config.yaml"
VERSIONS_FILE = "stackrl_versions.json"


def build_plugin_manager(config: LoadedConfig, monitor=None) -> PluginManager:
    """A fresh manager over fresh plugin instances: one per run."""
    return PluginManager(config.plugins(), exclusive=dict(config.host.exclusive), monitor=monitor)


def outcome_rewards(config: LoadedConfig) -> dict:
    """The built-in outcome rewards the config turns on, by name."""
    return {name: OUTCOME_REWARDS[name] for name, w in config.host.rewards.items() if w is not None and name in OUTCOME_REWARDS}


def reward_weights(config: LoadedConfig) -> dict[str, float]:
    return {name: w for name, w in config.host.rewards.items() if w is not None}


def validate(config: LoadedConfig) -> PluginManager:
    """Every check a run makes before loading a model: plugins, exclusive hooks, weights, trainer settings."""
    manager = build_plugin_manager(config)
    weights_by_name("rewards", reward_weights(config), reward_components(outcome_rewards(config), manager))
    weights_by_name("losses", config.host.losses, manager.implementers("loss_term"))
    grpo_args(config)
    return manager


def grpo_args(config: LoadedConfig, output_dir: str | None = None) -> GRPOConfig:
    settings = dict(config.host.trainer)
    if not torch.cuda.is_available():
        # GRPOConfig defaults to bf16 on an accelerator; on a machine without one, the same config should just run.
        settings = {"use_cpu": True, "bf16": False, **settings}
    try:
        return GRPOConfig(output_dir=output_dir or config.host.output_dir, **settings)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"trainer: {exc}") from exc


def run_files(config: LoadedConfig) -> dict[str, str]:
    """What is written next to every run and checkpoint: the resolved config and the versions that ran it."""
    versions = {pkg: version(pkg) for pkg in ("stackrl", "trl", "transformers", "torch", "accelerate", "peft")}
    versions["plugins"] = config.versions()
    return {CONFIG_FILE: config.to_yaml(), VERSIONS_FILE: json.dumps(versions, indent=2) + "\n"}


def build_trainer(config: LoadedConfig, output_dir: str | None = None, monitor=None, **trainer_kwargs) -> StackTrainer:
    """Everything a run needs, built from the config: plugins, model, data, rewards, trainer."""
    plugins = build_plugin_manager(config, monitor)
    args = grpo_args(config, output_dir)
    host = config.host
    tokenizer = load_tokenizer(host.model)
    model, peft_config = load_model(host.model, PartialState().device)
    files = run_files(config)
    if args.should_save:
        os.makedirs(args.output_dir, exist_ok=True)
        for name, text in files.items():
            with open(os.path.join(args.output_dir, name), "w") as f:
                f.write(text)
    return StackTrainer(
        model=model,
        args=args,
        processing_class=tokenizer,
        train_dataset=load_prompts(host.data),
        peft_config=peft_config,
        plugins=plugins,
        outcome_rewards=outcome_rewards(config),
        answer_column=host.data.answer_column,
        reward_weights=reward_weights(config),
        loss_weights=dict(host.losses),
        run_files=files,
        **trainer_kwargs,
    )
