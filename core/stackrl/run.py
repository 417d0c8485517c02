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
from stackrl.evaluation import evaluate
from stackrl.manager import PluginManager
from stackrl.modeling import load_model, load_tokenizer
from stackrl.plots import MetricsFile, append_metrics, plot_run
from stackrl.rewards import OUTCOME_REWARDS
from stackrl.trainer import StackTrainer, reward_components, weights_by_name

CONFIG_FILE = "stackrl_config.yaml"
EVAL_FILE = "eval.json"
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


def build_trainer(
    config: LoadedConfig, output_dir: str | None = None, monitor=None, callbacks=(), **trainer_kwargs
) -> StackTrainer:
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
        callbacks=[MetricsFile(args.output_dir), *callbacks],
        **trainer_kwargs,
    )


def _max_new_tokens(config: LoadedConfig, args: GRPOConfig) -> int:
    return config.host.eval.max_new_tokens or args.max_completion_length


def train(config: LoadedConfig, resume=None) -> dict:
    """The whole job: evaluate, train, save, evaluate again, plot. Returns the before/after figures."""
    trainer = build_trainer(config)
    state = PartialState()
    run_dir = trainer.args.output_dir
    evaluations = {}

    def evaluate_now(label: str) -> None:
        if config.host.eval.before_and_after and state.is_main_process:
            result = evaluate(trainer.model, trainer.processing_class, config, _max_new_tokens(config, trainer.args))
            evaluations[label] = result
            k = config.host.eval.samples
            append_metrics(run_dir, {"step": trainer.state.global_step, "eval/pass@1": result["pass@1"],
                                     f"eval/maj@{k}": result[f"maj@{k}"]})
        state.wait_for_everyone()

    if not resume:
        evaluate_now("before")
    trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(run_dir)
    evaluate_now("after")
    if state.is_main_process:
        with open(os.path.join(run_dir, EVAL_FILE), "w") as f:
            json.dump(evaluations, f, indent=2)
        plot_run(run_dir)
    return {"run_dir": run_dir, **evaluations}


def evaluate_checkpoint(config: LoadedConfig, checkpoint: str | None = None) -> dict:
    """Held-out accuracy of the config's model, or of a checkpoint (full weights or a LoRA adapter) of it."""
    tokenizer = load_tokenizer(config.host.model)
    model, _ = load_model(config.host.model, PartialState().device)
    if checkpoint:
        if not os.path.isdir(checkpoint):
            raise ConfigError(f"checkpoint: no such folder: {checkpoint}")
        if os.path.exists(os.path.join(checkpoint, "adapter_config.json")):
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, checkpoint)
        else:
            model = type(model).from_pretrained(checkpoint, dtype=model.dtype).to(model.device)
    return evaluate(model, tokenizer, config, _max_new_tokens(config, grpo_args(config)))
