"""Turning a validated config into a trainer, and running it."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
from importlib.metadata import version
from pathlib import Path

import torch
from accelerate import PartialState
from omegaconf import OmegaConf
from transformers import PrinterCallback, ProgressCallback, TrainerCallback, TrainerState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOConfig

from stackrl.aux_models import attach_aux_models, aux_models_of, load_aux_models
from stackrl.config import LoadedConfig
from stackrl.console import LogTable, log_columns
from stackrl.cpu import set_threads
from stackrl.data import answer_format, format_prompt, load_prompts
from stackrl.errors import ConfigError, Mistakes, StackrlError, TrainingInterrupted
from stackrl.evaluation import evaluate
from stackrl.manager import PluginManager
from stackrl.plugin import RunFacts
from stackrl.modeling import load_model, load_tokenizer
from stackrl.plots import CONFIG_FILE, EVAL_PROBLEMS, METRICS_FILE, MetricsFile, plot_runs
from stackrl.pool import ADDED_FILE
from stackrl.preflight import check_inputs
from stackrl.rewards import OUTCOME_REWARDS
from stackrl.samples import SAMPLES_FILE
from stackrl.trainer import (
    StackTrainer,
    default_reward_weights,
    last_checkpoint,
    loss_weights_by_name,
    reward_components,
)
from stackrl.weights import reward_schedules

EVAL_FILE = "eval.json"
VERSIONS_FILE = "stackrl_versions.json"
MODEL_CARD_FILE = "README.md"
# What a run writes into its folder as it starts and trains: a folder holding one of them holds a run.
RUN_FILES = (CONFIG_FILE, METRICS_FILE, SAMPLES_FILE, EVAL_FILE, ADDED_FILE)


def build_plugin_manager(config: LoadedConfig, monitor=None) -> PluginManager:
    """A fresh manager over fresh plugin instances: one per run."""
    return PluginManager(config.plugins(), exclusive=dict(config.host.exclusive), monitor=monitor)


def outcome_rewards(config: LoadedConfig) -> dict:
    """The built-in outcome rewards the config turns on, by name."""
    return {name: OUTCOME_REWARDS[name] for name, w in config.host.rewards.items() if w is not None and name in OUTCOME_REWARDS}


def reward_weights(config: LoadedConfig) -> dict:
    """Each reward component the config weighs: a number or a schedule (:mod:`stackrl.weights`)."""
    return {name: w for name, w in config.host.rewards.items() if w is not None}


def validate(config: LoadedConfig, command: str | None = None) -> tuple[PluginManager, list[str]]:
    """Every check a run makes before loading a model: plugins, exclusive hooks, weights, the reward components
    plugins read, trainer settings, what the config points to (model, data, loggers, run folder) and each plugin's
    :meth:`~stackrl.Plugin.check_run`. ``command`` is the one about to run (``train``, ``eval``; None: only
    validating).

    Every mistake found is reported, together (:class:`stackrl.errors.ConfigErrors` where several). Returns the
    plugin manager and notes on what only the machine that starts the run can decide, or what the run will do
    that the user may not expect. Every error and note names the file (or "command line") that set the keys it is
    about.
    """
    mistakes, notes = Mistakes(config.origins.name), []
    manager = args = components = schedules = None
    with mistakes.check():
        manager = build_plugin_manager(config)
    with mistakes.check():
        args = grpo_args(config)
    with mistakes.check():
        answer_format(config.host.data)
    with mistakes.check():
        notes += _skill_notes(config, command)
    columns, input_notes = check_inputs(config, mistakes)
    notes += input_notes
    if manager is not None:
        with mistakes.check():
            components = reward_components(outcome_rewards(config), manager)
            schedules = reward_schedules(reward_weights(config), components, default_reward_weights(manager))
        with mistakes.check():
            loss_weights_by_name(config.host.losses, manager.implementers("loss_term"))
        if components is not None:
            with mistakes.check():
                _check_needed_rewards(manager, components)
        notes += _chain_notes(manager)
    if schedules is not None and args is not None:
        facts = run_facts(config, args, columns, components)
        notes += [*_schedule_notes(schedules, facts), *_sample_notes(config, facts)]
        for plugin in manager.plugins.values():
            with mistakes.check():
                notes += plugin.check_run(facts) or []
    mistakes.raise_any()
    return manager, [config.origins.name(note) for note in notes if note]


def run_facts(config: LoadedConfig, args: GRPOConfig, columns, components) -> RunFacts:
    """What the run will be, for the plugins' :meth:`~stackrl.Plugin.check_run`."""
    from stackrl.tasks import TASKS

    return RunFacts(
        max_steps=args.max_steps if args.max_steps > 0 else None,
        group_size=args.num_generations,
        groups_per_step=args.generation_batch_size // args.num_generations,
        columns=columns,
        builtin_columns=tuple(TASKS["arithmetic"](split="train", seed=0, size=1).column_names),
        chat=config.host.data.chat,
        reference=args.beta > 0 or config.host.model.lora is not None,
        source=config.host.data.source,
        components=tuple(components),
        sandbox=config.host.sandbox,
        aux_models=tuple(config.host.aux_models),
    )


def _schedule_notes(schedules: dict, facts: RunFacts) -> list[str]:
    """A component whose weight is 0 through the run's every step and non-zero only after it never counts."""
    notes = []
    for name, weights in schedules.items():
        starts = [step for step, weight in weights.pieces if weight]
        if starts:  # the weight at step s weighs the rollout that trains step s + 1
            notes.append(facts.past_end(f"rewards.{name}", starts[0] + 1, "its first non-zero weight counts"))
    return notes


def _chain_notes(manager: PluginManager) -> list[str]:
    """Plugins that reshape advantages in turn: each reshapes what the one before returned."""
    chained = manager.implementers("reshape_advantages")
    if len(chained) < 2:
        return []
    steps = [f"{chained[0]} reshapes GRPO's advantages"] + [
        f"{later} reshapes {earlier}'s result" for earlier, later in zip(chained, chained[1:])
    ]
    return [f"plugins: reshape_advantages is chained in the order of plugins: {', then '.join(steps)}"]


def _sample_notes(config: LoadedConfig, facts: RunFacts) -> list[str]:
    """More groups asked for than a step has (the default asks for 2 whatever the batch: no note)."""
    if config.origins.of("log_samples") and config.host.log_samples > facts.groups_per_step:
        return [
            f"log_samples: {config.host.log_samples} groups asked for, but a step's rollout holds "
            f"{facts.groups_per_step} (trainer.generation_batch_size / trainer.num_generations); samples.jsonl gets "
            f"{facts.groups_per_step} a logged step"
        ]
    return []


def _check_needed_rewards(manager: PluginManager, components: list[str]) -> None:
    for name, plugin in manager.plugins.items():
        for field, component in plugin.needs_rewards().items():
            if component in components:
                continue
            if component in OUTCOME_REWARDS:
                remedy = f"set rewards.{component} (weight 0 computes it without training on it)"
            else:
                remedy = f"add '{component}' to plugins"
            raise ConfigError(
                f"{name}.{field}: plugin '{name}' reads the reward component '{component}', which this stack lacks "
                f"(it has {', '.join(components)}); {remedy}"
            )


def validate_launch(config: LoadedConfig, accelerate_file: str) -> tuple[str, list[str]]:
    """Check an accelerate config file for this run: read by accelerate's own loader, and nothing in the run it
    cannot do. Returns what it launches, in words, and notes on what the launching machine needs that this one
    lacks (configs are often checked on a laptop and launched on a cluster)."""
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.utils import DistributedType

    where = f"accelerate config {accelerate_file}"
    if not os.path.isfile(accelerate_file):
        raise ConfigError(f"{where}: no such file")
    try:
        launch = load_config_from_file(accelerate_file)
    except Exception as exc:  # accelerate raises ValueError, TypeError or YAML errors for a bad file
        raise ConfigError(f"{where}: accelerate cannot read it: {exc}") from exc
    kind = launch.distributed_type
    if kind in (DistributedType.MEGATRON_LM, DistributedType.XLA):
        raise ConfigError(f"{where}: distributed_type {kind.value} is not supported; use DDP, DeepSpeed or FSDP")
    name, shards_weights = "DDP" if kind != DistributedType.NO else "one process", False
    if kind == DistributedType.DEEPSPEED:
        stage = _zero_stage(launch.deepspeed_config or {}, where)
        name, shards_weights = f"DeepSpeed ZeRO-{stage}", stage == 3
    elif kind == DistributedType.FSDP:
        fsdp = launch.fsdp_config or {}
        name, shards_weights = f"FSDP{fsdp.get('fsdp_version', 1)}", True
        if name == "FSDP2" and not hasattr(torch.distributed.fsdp, "fully_shard"):
            raise ConfigError(
                f"{where}: FSDP2 needs torch >= 2.6 (torch.distributed.fsdp.fully_shard); this is {torch.__version__}"
            )
        if fsdp.get("fsdp_activation_checkpointing") and config.host.trainer.get("gradient_checkpointing"):
            raise ConfigError(
                f"{where}: fsdp_activation_checkpointing and trainer.gradient_checkpointing are both on; "
                "transformers refuses both: turn one off"
            )
    if shards_weights and config.host.model.quantization:
        raise ConfigError(
            f"{where}: {name} shards the weights, but model.quantization={config.host.model.quantization} loads a "
            "whole bitsandbytes copy on each GPU; use DDP or ZeRO-2 (configs/accelerate/ddp.yaml, zero2.yaml) "
            "with a quantized model, or unset model.quantization"
        )
    on_gpus = kind in (DistributedType.MULTI_GPU, DistributedType.DEEPSPEED, DistributedType.FSDP)
    if on_gpus and config.host.trainer.get("use_cpu"):
        raise ConfigError(f"{where}: launches {name} on GPUs, but trainer.use_cpu is true; remove it from the run")
    notes = []
    if kind == DistributedType.DEEPSPEED and importlib.util.find_spec("deepspeed") is None:
        notes.append(f"{name} needs deepspeed where it is launched; not installed here: pip install 'stackrl[deepspeed]'")
    return f"{name}, {launch.num_processes} processes per machine, {launch.num_machines} machine(s)", notes


def _zero_stage(deepspeed_config: dict, where: str) -> int:
    """The ZeRO stage of an accelerate ``deepspeed_config``: given inline, or in the DeepSpeed JSON file it names."""
    if "deepspeed_config_file" in deepspeed_config:
        path = deepspeed_config["deepspeed_config_file"]
        try:
            with open(path) as f:
                return int(json.load(f).get("zero_optimization", {}).get("stage", 0))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{where}: cannot read its deepspeed_config_file {path}: {exc}") from exc
    return int(deepspeed_config.get("zero_stage", 0))


# GRPOConfig's messages that name the setting they refuse in words only.
GRPO_PHRASES = {"generations per prompt": "num_generations"}


def use_threads(config: LoadedConfig) -> None:
    """A job on the CPU computes with the config's ``threads`` torch threads (or the default of stackrl.cpu)."""
    if not torch.cuda.is_available() or config.host.trainer.get("use_cpu"):
        set_threads(config.host.threads)


def grpo_args(config: LoadedConfig, output_dir: str | None = None) -> GRPOConfig:
    settings = dict(config.host.trainer)
    if not torch.cuda.is_available():
        # GRPOConfig defaults to bf16 on an accelerator; on a machine without one, the same config should just run.
        settings = {"use_cpu": True, "bf16": False, **settings}
    try:
        return GRPOConfig(output_dir=output_dir or config.host.output_dir, **settings)
    except (ValueError, TypeError) as exc:
        named = [f"trainer.{key}" for key in config.host.trainer if re.search(rf"\b{key}\b", str(exc))]
        named += [f"trainer.{key}" for phrase, key in GRPO_PHRASES.items() if phrase in str(exc) and not named]
        raise ConfigError(f"{', '.join(named) or 'trainer'}: {exc}") from exc


def run_files(config: LoadedConfig) -> dict[str, str]:
    """What is written next to every run and checkpoint: the resolved config and the versions that ran it."""
    versions = {pkg: version(pkg) for pkg in ("stackrl", "trl", "transformers", "torch", "accelerate", "peft")}
    versions["plugins"] = config.versions()
    return {
        CONFIG_FILE: config.to_yaml(),
        VERSIONS_FILE: json.dumps(versions, indent=2) + "\n",
        MODEL_CARD_FILE: model_card(config),
    }


def model_card(config: LoadedConfig) -> str:
    """The run folder's README.md (TRL's own card names no base model for a local one, and no plugin)."""
    host = config.host
    plugins = ", ".join(config.plugin_classes) or "none (plain GRPO)"
    rewards = ", ".join(f"{name} {weight}" for name, weight in reward_weights(config).items()) or "the plugins' own"
    return (
        f"# {Path(host.output_dir).name}\n\n"
        f"A causal language model trained with stackrl (GRPO on TRL's GRPOTrainer).\n\n"
        f"- base model: `{host.model.name_or_path}`\n"
        f"- plugins, in call order: {plugins}\n"
        f"- rewards (component and weight): {rewards}\n"
        f"- data: `{host.data.source}`\n\n"
        f"The whole resolved config is `{CONFIG_FILE}`; the versions that trained it, `{VERSIONS_FILE}`.\n"
    )


def previous_run(run_dir: str) -> list[str]:
    """What an earlier run left in ``run_dir``: the files a run writes, and its checkpoints."""
    if not os.path.isdir(run_dir):
        return []
    return [
        name for name in sorted(os.listdir(run_dir))
        if name in RUN_FILES or re.fullmatch(rf"{PREFIX_CHECKPOINT_DIR}-\d+", name)
    ]


def _check_fresh_folder(run_dir: str) -> None:
    """A fresh run into a folder that holds a run would append to its files and mix two runs in them."""
    found = previous_run(run_dir)
    if found:
        shown = ", ".join(found[:4]) + (", ..." if len(found) > 4 else "")
        raise StackrlError(
            f"output_dir {run_dir} holds a run ({shown}); a fresh run there would mix with it. Continue it with "
            f"--resume, train into another folder with output_dir=OTHER, or replace it with --overwrite"
        )


def _check_overwritable(run_dir: str) -> None:
    here = Path.cwd().resolve()
    folder = Path(run_dir).resolve()
    if folder == here or folder in here.parents:
        raise StackrlError(f"--overwrite: output_dir {run_dir} holds the current folder; it is not deleted")


def build_trainer(
    config: LoadedConfig, output_dir: str | None = None, monitor=None, callbacks=(), overwrite=False, **trainer_kwargs
) -> StackTrainer:
    """Everything a run needs, built from the config: plugins, model, data, rewards, trainer. ``overwrite``
    deletes the run folder once they are built, before the new run writes anything there."""
    plugins = build_plugin_manager(config, monitor)
    args = grpo_args(config, output_dir)
    host = config.host
    tokenizer = load_tokenizer(host.model)
    model, peft_config = load_model(host.model, PartialState().device)
    aux_models = load_aux_models(host.aux_models, PartialState().device) if host.aux_models else None
    files = run_files(config)
    trainer = StackTrainer(
        model=model,
        args=args,
        processing_class=tokenizer,
        train_dataset=load_prompts(host.data),
        peft_config=peft_config,
        plugins=plugins,
        outcome_rewards=outcome_rewards(config),
        answer_column=host.data.answer_column,
        answer_format=answer_format(host.data),
        reward_weights=reward_weights(config),
        loss_weights=dict(host.losses),
        run_files=files,
        log_samples=host.log_samples,
        truth_metric=host.eval.metric,
        prompt_format=functools.partial(format_prompt, host.data),
        importance_truncation=host.importance.truncation,
        importance_level=host.importance.level,
        sandbox=host.sandbox,
        callbacks=[MetricsFile(args.output_dir), *callbacks],
        **trainer_kwargs,
    )
    if aux_models is not None:
        attach_aux_models(trainer, aux_models)
    trainer.remove_callback(PrinterCallback if args.disable_tqdm else ProgressCallback)
    evaluating = host.eval.before_and_after or host.eval.every_steps
    trainer.add_callback(LogTable(log_columns(trainer.reward_func_names, "eval/pass@1" if evaluating else None)))
    # Only now that model, data and trainer are built: a run that cannot start leaves an existing run folder as it was.
    if args.should_save:
        if overwrite and os.path.isdir(args.output_dir):
            shutil.rmtree(args.output_dir)  # the earlier run goes whole: nothing of it mixes with this one
        os.makedirs(args.output_dir, exist_ok=True)
        for name, text in files.items():
            with open(os.path.join(args.output_dir, name), "w") as f:
                f.write(text)
    return trainer


def _max_new_tokens(config: LoadedConfig, args: GRPOConfig) -> int:
    return config.host.eval.max_new_tokens or args.max_completion_length


def evaluate_in_run(trainer: StackTrainer, config: LoadedConfig) -> dict:
    """Held-out figures of the model being trained, computed by every process together.

    The model is reached the way TRL generates rollouts: ZeRO-3 weights gathered (``ds3_gather_for_generation``),
    FSDP1 weights summoned, so a process never waits alone in a collective forward.
    """
    from trl.models.utils import unwrap_model_for_generation

    with (
        unwrap_model_for_generation(
            trainer.model_wrapped, trainer.accelerator, gather_deepspeed3_params=trainer.args.ds3_gather_for_generation
        ) as model,
        trainer._dist.summon_full_params(trainer.model_wrapped, recurse=False),
    ):
        max_new_tokens = _max_new_tokens(config, trainer.args)
        return evaluate(model, trainer.processing_class, config, max_new_tokens, accelerator=trainer.accelerator)


class _HeldOutEvaluations(TrainerCallback):
    """Calls ``evaluate_now(label)`` when training begins (``before``; DeepSpeed and FSDP place and wrap the model
    only inside ``train()``) and after every ``every_steps``-th step but the last when ``after`` evaluates it."""

    def __init__(self, evaluate_now, before: bool, after: bool, every_steps: int):
        self._evaluate_now = evaluate_now
        self._before, self._after, self._every_steps = before, after, every_steps

    def on_train_begin(self, args, state, control, **kwargs):
        if self._before:
            self._evaluate_now("before")

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        if self._every_steps and step % self._every_steps == 0 and not (self._after and step == state.max_steps):
            self._evaluate_now(f"step {step}")


def resume_checkpoint(config: LoadedConfig, resume) -> str | None:
    """The checkpoint ``--resume`` continues from (``True``: the run's last one), checked before anything loads."""
    if not resume:
        return None
    args = grpo_args(config)
    if args.save_strategy == "no":
        raise ConfigError(
            "--resume: this config saves no checkpoints (trainer.save_strategy is 'no'), so there is none to resume "
            "from; turn them on with trainer.save_strategy=steps trainer.save_steps=N and train again"
        )
    if resume is True:
        found = last_checkpoint(args.output_dir)
        if found is None:
            raise ConfigError(f"--resume: no checkpoint in {args.output_dir} (output_dir); train without --resume")
    elif not os.path.isdir(resume):
        raise ConfigError(f"--resume: no such checkpoint folder: {resume}")
    else:
        found = resume
    _check_same_run(config, args, found)
    return found


def _check_same_run(config: LoadedConfig, args: GRPOConfig, checkpoint: str) -> None:
    """A checkpoint continues only the run that saved it: the same plugins (their state is restored by name and
    order) and the same group size (what every plugin's state and the sampler's position count in)."""
    saved_path = os.path.join(checkpoint, CONFIG_FILE)
    if not os.path.isfile(saved_path):
        return
    saved = OmegaConf.load(saved_path)
    differences = []
    if list(saved.get("plugins", [])) != list(config.plugin_classes):
        differences.append(f"plugins [{', '.join(saved.get('plugins', []))}] there, [{', '.join(config.plugin_classes)}] here")
    saved_size = saved.get("trainer", {}).get("num_generations", GRPOConfig.num_generations)
    if saved_size != args.num_generations:
        differences.append(f"trainer.num_generations {saved_size} there, {args.num_generations} here")
    if differences:
        raise ConfigError(
            f"--resume: {checkpoint} was saved by another run ({'; '.join(differences)}); resume with the config it "
            f"was saved with ({saved_path}), or train without --resume into another output_dir"
        )


def _forget_metrics_after(run_dir: str, step: int) -> None:
    """Drop the rows a run logged past the checkpoint it is resumed from: the resumed run logs those steps again."""
    path = os.path.join(run_dir, METRICS_FILE)
    if not os.path.isfile(path):
        return
    with open(path) as f:
        rows = [line for line in f if line.strip() and json.loads(line)["step"] <= step]
    with open(path, "w") as f:
        f.writelines(rows)


def _stored_evaluations(run_dir: str) -> dict:
    path = os.path.join(run_dir, EVAL_FILE)
    if not os.path.isfile(path):
        return {}
    with open(path) as f:
        return json.load(f)


def train(config: LoadedConfig, resume=None, overwrite=False) -> dict:
    """The whole job: evaluate, train (evaluating every ``eval.every_steps``), save, evaluate again, plot.
    Returns the run folder, the held-out figures by label (``before``, ``step N``, ``after``), the occurrences
    of each plugin warning (``ctx.warn``), a line per plugin saying what it acted on (``ctx.acted``) and
    ``finished_at``: the step a resumed run had already finished at (``None`` for a run that trained), and
    ``aux_models``, a line per auxiliary model: its memory footprint and what it was asked.

    A fresh run into a folder holding a run is refused before anything loads, unless ``overwrite`` (the folder is
    then deleted once model, data and trainer are built). A resumed run reports the "before" figures its first run
    stored in the run folder; a finished one trains nothing and writes nothing. Ctrl-C stops training with
    :class:`TrainingInterrupted`, which names the run's last checkpoint.
    """
    run_dir = config.host.output_dir
    if overwrite and resume:
        raise StackrlError("--overwrite and --resume: one replaces the run, the other continues it; give one")
    with config.origins.naming():
        checkpoint = resume_checkpoint(config, resume)
    if overwrite:
        _check_overwritable(run_dir)
    elif not checkpoint:
        _check_fresh_folder(run_dir)
    # Every process has looked at the folder before any writes to it: all refuse a run there, or none.
    PartialState().wait_for_everyone()
    stored = _stored_evaluations(run_dir) if checkpoint else {}
    if checkpoint:
        state = TrainerState.load_from_json(os.path.join(checkpoint, "trainer_state.json"))
        if _finished(state, grpo_args(config)):
            return {"run_dir": run_dir, "evaluations": stored, "warnings": {}, "activity": [],
                    "finished_at": state.global_step, "aux_models": []}
    use_threads(config)
    # Only the "before" figures carry over: "after" belongs to the weights this run ends with.
    evaluations = {"before": stored["before"]} if "before" in stored else {}

    def evaluate_now(label: str) -> None:
        result = evaluate_in_run(trainer, config)
        evaluations[label] = result
        k = config.host.eval.samples
        trainer.log_figures({"eval/pass@1": result["pass@1"], f"eval/maj@{k}": result[f"maj@{k}"],
                             EVAL_PROBLEMS: result["problems"]})
        if trainer.accelerator.is_main_process:  # as they come: a resumed run reads "before" from here
            with open(os.path.join(run_dir, EVAL_FILE), "w") as f:
                json.dump(evaluations, f, indent=2)

    evaluating = config.host.eval.before_and_after
    during = _HeldOutEvaluations(evaluate_now, evaluating and not checkpoint, evaluating, config.host.eval.every_steps)
    trainer = build_trainer(config, callbacks=[during], overwrite=overwrite)
    if checkpoint and trainer.accelerator.is_main_process:
        _forget_metrics_after(run_dir, state.global_step)
    try:
        trainer.train(resume_from_checkpoint=checkpoint)
    except BaseException as stop:
        progress = trainer.pop_callback(ProgressCallback)
        if progress is not None:  # close the bar now, or the message lands on its line and it redraws below
            progress.on_train_end(trainer.args, trainer.state, trainer.control)
        if isinstance(stop, KeyboardInterrupt):
            raise TrainingInterrupted(trainer.state.global_step, last_checkpoint(run_dir)) from stop
        raise
    trainer.save_model(run_dir)
    if evaluating:
        evaluate_now("after")
    if trainer.accelerator.is_main_process:
        plot_runs([run_dir])
    aux_models = aux_models_of(trainer)
    return {"run_dir": run_dir, "evaluations": evaluations, "warnings": dict(trainer.warnings),
            "activity": trainer.activity_summary(), "finished_at": None,
            "aux_models": aux_models.summary() if aux_models is not None else []}


def leave_process_group() -> None:
    """End this process's part in a multi-process run: destroy the process group before the interpreter exits.
    Left to the interpreter's shutdown, gloo's threads can abort the process after a run that succeeded
    ("terminate called without an active exception", SIGABRT)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def _finished(state: TrainerState, args: GRPOConfig) -> bool:
    """Whether a checkpoint's run reached the end the config sets (``max_steps``, else the epochs)."""
    if args.max_steps > 0:
        return state.global_step >= args.max_steps
    return state.epoch is not None and state.epoch >= args.num_train_epochs


def _skill_notes(config: LoadedConfig, command: str | None) -> list[str]:
    """Training logs, plots and sums up held-out pass@1; the other skills are measured by ``stackrl eval``: a
    training run that would evaluate another skill is refused, one that evaluates nothing, or a config only being
    validated, gets a note."""
    section = config.host.eval
    if section.skill == "solve" or command == "eval":
        return []
    evaluating = section.before_and_after or section.every_steps
    if command == "train" and evaluating:
        raise ConfigError(
            f"eval.skill {section.skill}: stackrl train measures solving while it trains; measure {section.skill} "
            f"with `stackrl eval CONFIG... eval.skill={section.skill} checkpoint=RUN`, or set "
            f"eval.before_and_after=false and eval.every_steps=0"
        )
    return [
        f"eval.skill {section.skill}: measured by `stackrl eval` only; `stackrl train` measures solving"
        + (" and refuses this config unless eval.before_and_after=false and eval.every_steps=0" if evaluating else "")
    ]


def evaluate_checkpoint(config: LoadedConfig, checkpoint: str | None = None) -> dict:
    """Held-out accuracy of the config's model, or of a checkpoint (full weights or a LoRA adapter) of it; the
    figures come with ``model`` and ``checkpoint`` (``None``: the base model) saying which was evaluated."""
    use_threads(config)
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
    figures = evaluate(model, tokenizer, config, _max_new_tokens(config, grpo_args(config)))
    return {"model": config.host.model.name_or_path, "checkpoint": checkpoint, **figures}
