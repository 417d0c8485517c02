"""Stacked OmegaConf configs, validated against the host's schema and each plugin's config dataclass.

Files stack in the order given (dicts merge key by key, lists and scalars are replaced by the later file), then
``key=value`` overrides from the command line. Every layer is validated on its own first, so an error names the
file (or "command line") and the full key. Only the plugins named in ``plugins:`` are imported.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from stackrl import trainer_section
from stackrl.errors import ConfigError, Mistakes, StackrlError, did_you_mean
from stackrl.manager import InstalledPlugin, find_plugin, installed_plugins
from stackrl.origins import KeyOrigins
from stackrl.plugin import Plugin
from stackrl.rewards import OUTCOME_REWARDS
from stackrl.sandbox_section import SandboxSection
from stackrl.weights import schedule


@dataclass
class LoraSection:
    """A LoRA adapter (PEFT): the only trainable weights of a quantized model."""

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: Any = "all-linear"


@dataclass
class ModelSection:
    """The policy: a hub name or local path (or a built-in model), loaded with ``from_pretrained``."""

    name_or_path: str = "stackrl/arith-tiny"
    dtype: str = "float32"  # float32 | bfloat16 | float16 | auto
    quantization: Optional[int] = None  # 4 or 8 (bitsandbytes); needs lora
    quant_type: str = "nf4"  # 4-bit only: nf4 | fp4
    double_quant: bool = True  # 4-bit only
    lora: Optional[LoraSection] = None
    trust_remote_code: bool = False
    # New tokens added to the vocabulary (e.g. functional tokens such as "<verify>"), their embedding and output
    # rows trained: with lora, their embedding rows and the output layer beside the adapter.
    add_tokens: List[str] = field(default_factory=list)


@dataclass
class DataSection:
    """The prompts: a built-in task, a hub dataset, or a local json/jsonl/parquet/csv file."""

    source: str = "arithmetic"
    split: str = "train"
    size: Optional[int] = None  # rows to use (built-in tasks generate this many)
    seed: int = 0  # built-in tasks only
    options: Dict[str, Any] = field(default_factory=dict)  # built-in task options
    prompt_template: str = "{question}"  # formatted with each row's columns
    chat: bool = False  # send the prompt as a user message through the chat template
    system_prompt: Optional[str] = None  # with chat
    answer_column: str = "answer"
    # How completions state their final answer (boxed, answer_is, last_number, auto): plugins that read final
    # answers follow it unless their own section sets another. Default: the built-in task's own, else auto.
    answer_format: Optional[str] = None
    label_free: bool = False  # hide the answer column from rewards and plugins (kept for evaluation)


@dataclass
class EvalSection:
    """Held-out evaluation: ``stackrl eval``, and ``stackrl train`` before and after training."""

    split: str = "test"
    size: int = 200
    samples: int = 4  # completions per problem: pass@1 averages them, maj@k votes over them
    temperature: float = 1.0  # 0 = greedy
    max_new_tokens: Optional[int] = None  # default: trainer.max_completion_length
    batch_size: int = 64
    seed: int = 0
    metric: str = "exact_match"  # a built-in outcome reward that judges a completion
    skill: str = "solve"  # what `stackrl eval` measures: solve, judge, repair, recheck, debate, pose, corrupt, transition
    # or decompose (docs/roles.md)
    verify_vote: bool = False  # solve: the model also judges each sample; vmaj@k votes among those it accepts
    before_and_after: bool = True  # evaluate at the start and the end of `stackrl train`
    every_steps: int = 0  # also evaluate every this many training steps (0 = only before and after)


@dataclass
class ImportanceSection:
    """The truncated importance weights of rows another policy wrote (``Samples.behaviour_logprobs``):
    ``min(truncation, pi_now / pi_behaviour)`` per completion token or per row (:mod:`stackrl.importance`)."""

    truncation: float = 3.0  # c, the most a weight may be (TRL's vllm_importance_sampling_clip_max default)
    level: str = "token"  # token | sequence


@dataclass
class AuxModelSection:
    """One auxiliary model beside the policy (``aux_models.<name>``), asked by name as ``model=<name>``
    (:mod:`stackrl.aux_models`). Each backend reads its own keys and refuses the others'."""

    backend: str = "hf"  # hf (a Transformers model) | openai (an OpenAI-compatible server) | rule (a registered rule)
    # hf: loaded as the policy is (model.*), frozen
    name_or_path: Optional[str] = None
    dtype: str = "float32"  # float32 | bfloat16 | float16 | auto
    quantization: Optional[int] = None  # 4 or 8 (bitsandbytes)
    quant_type: str = "nf4"  # 4-bit only: nf4 | fp4
    double_quant: bool = True  # 4-bit only
    trust_remote_code: bool = False
    offload: bool = False  # keep the weights on the CPU between calls (not with quantization)
    # openai
    base_url: Optional[str] = None  # e.g. http://localhost:8000/v1
    model: Optional[str] = None  # the server's model name
    api_key_env: Optional[str] = None  # the environment variable holding the API key (never the key itself)
    api: str = "chat"  # chat (/chat/completions; a text prompt is one user message) | completions (/completions)
    timeout_s: float = 60.0  # one request's limit
    retries: int = 2  # further tries after a timeout, a lost connection, a 429 or a 5xx reply
    backoff_s: float = 1.0  # wait before retry k: backoff_s * 2**k
    concurrency: int = 8  # requests in flight at once
    on_failure: str = "none"  # none: the reply is failed (a judge's None), counted | error: the step stops
    # rule
    rule: Optional[str] = None  # the name a plugin registered it under (stackrl.aux_rules.register_rule)


@dataclass
class StackConfig:
    """The root of a stackrl config. Each plugin's settings sit beside these keys, under the plugin's name."""

    model: ModelSection = field(default_factory=ModelSection)
    data: DataSection = field(default_factory=DataSection)
    plugins: List[str] = field(default_factory=list)  # order = call order
    # component -> weight, or a schedule {step: weight} (stackrl.weights); null turns a built-in reward off
    rewards: Dict[str, Any] = field(default_factory=dict)
    losses: Dict[str, float] = field(default_factory=dict)  # plugin loss term -> weight
    exclusive: Dict[str, str] = field(default_factory=dict)  # exclusive hook -> winning plugin
    trainer: Dict[str, Any] = field(default_factory=dict)  # passed to trl.GRPOConfig
    eval: EvalSection = field(default_factory=EvalSection)
    log_samples: int = 2  # whole groups of each logged step's rollout written to samples.jsonl (0 = none)
    output_dir: str = "runs/stackrl"
    threads: Optional[int] = None  # torch threads of a CPU run; default: one per CPU the process may use
    importance: ImportanceSection = field(default_factory=ImportanceSection)
    sandbox: SandboxSection = field(default_factory=SandboxSection)  # how plugins run model-written programs
    aux_models: Dict[str, AuxModelSection] = field(default_factory=dict)  # models beside the policy, by name


HOST_KEYS = tuple(f.name for f in dataclasses.fields(StackConfig))


@dataclass
class LoadedConfig:
    """A validated config: the merged tree, the plugins it selects, and each plugin's config object."""

    tree: DictConfig
    host: StackConfig
    plugin_classes: dict[str, type[Plugin]]
    plugin_configs: dict[str, Any]
    installed: dict[str, InstalledPlugin]
    origins: KeyOrigins

    def plugins(self) -> list[Plugin]:
        """Fresh plugin instances in config order, each with its validated config."""
        instances = []
        for name, cls in self.plugin_classes.items():
            with _settings_of(name):
                plugin = cls(self.plugin_configs[name])
            plugin.name = name
            instances.append(plugin)
        return instances

    def versions(self) -> dict[str, str]:
        return {name: self.installed[name].version for name in self.plugin_classes}

    def to_yaml(self) -> str:
        return OmegaConf.to_yaml(self.tree, resolve=True)


def _read_layers(files, overrides) -> list[tuple[str, DictConfig]]:
    layers = []
    for path in files:
        if not Path(path).is_file():
            raise ConfigError(f"config file not found: {path}")
        try:
            layer = OmegaConf.load(path)
        except Exception as exc:
            raise ConfigError(f"{path}: not a valid YAML config: {exc}") from exc
        if not isinstance(layer, DictConfig):
            raise ConfigError(f"{path}: a config file must hold a mapping of keys, not a list")
        layers.append((str(path), layer))
    if overrides:
        bad = [o for o in overrides if "=" not in o]
        if bad:
            raise ConfigError(f"command line: override '{bad[0]}' must look like key=value")
        try:
            layers.append(("command line", OmegaConf.from_dotlist(list(overrides))))
        except Exception as exc:
            raise ConfigError(f"command line: cannot parse overrides: {exc}") from exc
    return layers


def _selected_plugins(layers) -> tuple[list[str], str]:
    selected, source = [], "defaults"
    for where, layer in layers:
        if "plugins" in layer:
            selected, source = layer.plugins, where
    if not OmegaConf.is_list(selected) and not isinstance(selected, list):
        raise ConfigError(f"{source}: 'plugins' must be a list of plugin names")
    names = [str(n) for n in selected]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"{source}: plugin '{duplicates[0]}' is listed twice in 'plugins'")
    return names, source


def _explain(exc: OmegaConfBaseException, where: str | None, prefix: str, schema_keys) -> ConfigError:
    key = f"{prefix}{exc.full_key}" if getattr(exc, "full_key", None) else prefix.rstrip(".")
    where = f"{where}: " if where else ""
    if isinstance(exc, ConfigKeyError):
        leaf = key.rsplit(".", 1)[-1]
        return ConfigError(f"{where}unknown key '{key}'.{did_you_mean(leaf, schema_keys(key))}")
    message = str(getattr(exc, "msg", exc)).splitlines()[0]
    return ConfigError(f"{where}wrong type for '{key}': {message}")


def _keys_at(schema: DictConfig, dotted: str) -> list[str]:
    """The schema's keys beside the one ``dotted`` names (for did-you-mean)."""
    parent = dotted.rsplit(".", 1)[0] if "." in dotted else ""
    node = OmegaConf.select(schema, parent) if parent else schema
    return list(node.keys()) if isinstance(node, DictConfig) else []


def _merge_checked(schema: DictConfig, layer, where: str | None, prefix: str = "") -> DictConfig:
    """``layer`` merged over ``schema``; an error names ``where`` (or, with None, leaves that to KeyOrigins)."""
    try:
        return OmegaConf.merge(schema, layer)
    except OmegaConfBaseException as exc:
        strip = len(prefix)
        raise _explain(exc, where, prefix, lambda key: _keys_at(schema, key[strip:])) from exc


def _parts(layer) -> list[dict] | None:
    """``layer`` split into smaller layers, one per key (nested: one per leaf of a single key), or None for a leaf."""
    if not isinstance(layer, (dict, DictConfig)) or not layer:
        return None
    if len(layer) > 1:
        return [{key: layer[key]} for key in layer]
    (key, value), = layer.items()
    inner = _parts(value)
    return None if inner is None else [{key: part} for part in inner]


def _merge_each(schema: DictConfig, layer, where: str, mistakes: Mistakes, prefix: str = "") -> DictConfig:
    """Like ``_merge_checked``, but a layer that does not fit is merged part by part, so that every key that does
    not fit is found (each kept in ``mistakes``) and every key that does is merged."""
    try:
        return _merge_checked(schema, layer, where, prefix)
    except ConfigError as error:
        parts = _parts(layer)
        if parts is None:
            with mistakes.check():
                raise error
            return schema
    for part in parts:
        schema = _merge_each(schema, part, where, mistakes, prefix)
    return schema


def _resolve(tree: DictConfig, origins: KeyOrigins) -> None:
    """Resolve every interpolation in place, against the whole stacked config."""
    try:
        OmegaConf.resolve(tree)
    except OmegaConfBaseException as exc:
        key = exc.full_key
        message = str(getattr(exc, "msg", exc)).splitlines()[0]
        raise ConfigError(origins.name(f"cannot resolve the interpolation in '{key}': {message}")) from exc


@contextmanager
def _settings_of(name: str):
    """Within this block, plugin ``name`` judges its settings (its config class, its constructor): anything it
    raises other than a stackrl error becomes a config error naming its section."""
    try:
        yield
    except StackrlError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"plugin '{name}' rejected its settings (section '{name}'): {type(exc).__name__}: {exc}"
        ) from exc


def _plugin_config(name: str, cls: type[Plugin], section: DictConfig):
    """The plugin's config object; its ``__post_init__`` may refuse a setting."""
    typed = _merge_checked(OmegaConf.structured(cls.Config), section, None, prefix=f"{name}.")
    with _settings_of(name):
        return OmegaConf.to_object(typed)


def load_config(files, overrides=()) -> LoadedConfig:
    """Stack ``files`` then ``overrides``, validate everything, and import the selected plugins.

    The checks run in three passes, each reporting every mistake it finds: each layer's keys and types, then
    what the stacked config's interpolations and missing values leave, then each value's domain and the rules that
    span keys. A later pass runs only on a config the earlier ones passed.
    """
    layers = _read_layers(files, overrides)
    origins = KeyOrigins(layers)
    names, plugins_source = _selected_plugins(layers)
    installed = installed_plugins()
    classes = {name: find_plugin(name, installed, where=f"plugins ({plugins_source})").load() for name in names}

    mistakes = Mistakes()
    host = OmegaConf.structured(StackConfig)
    sections = {name: OmegaConf.structured(cls.Config) for name, cls in classes.items()}
    for where, layer in layers:
        for key in layer:
            if key in HOST_KEYS or key in sections:
                continue
            hint = did_you_mean(key, [*HOST_KEYS, *sections])
            if key in installed:
                hint = f" '{key}' is an installed plugin: add it to 'plugins' to use this section."
            with mistakes.check():
                raise ConfigError(f"{where}: unknown key '{key}'.{hint}")
        if "trainer" in layer:
            for error in trainer_section.check_names(layer.trainer, where):
                with mistakes.check():
                    raise error
        host = _merge_each(host, {k: layer[k] for k in layer if k in HOST_KEYS}, where, mistakes)
        for name in sections:
            if name in layer:
                sections[name] = _merge_each(sections[name], {name: layer[name]}[name], where, mistakes, f"{name}.")
    mistakes.raise_any()

    # One plain tree for showing and saving; the structured pieces above did the type checking.
    tree = OmegaConf.create({**OmegaConf.to_container(host), **{k: OmegaConf.to_container(v) for k, v in sections.items()}})
    _resolve(tree, origins)
    for key in sorted(OmegaConf.missing_keys(tree)):
        with mistakes.check():
            raise ConfigError(
                f"missing value for '{key}': set it in a config file or pass {key}=VALUE on the command line"
            )
    mistakes.raise_any()

    mistakes = Mistakes(origins.name)
    with mistakes.check():
        # Checked again once resolved: what an interpolation gave must fit the schema too.
        resolved_host = OmegaConf.masked_copy(tree, list(HOST_KEYS))
        host = OmegaConf.to_object(_merge_checked(OmegaConf.structured(StackConfig), resolved_host, None))
    mistakes.raise_any()
    for error in trainer_section.check_values(host.trainer):
        with mistakes.check():
            raise error
    plugin_configs = {}
    for name, cls in classes.items():
        with mistakes.check():
            plugin_configs[name] = _plugin_config(name, cls, tree[name])
    loaded = LoadedConfig(
        tree=tree, host=host, plugin_classes=classes, plugin_configs=plugin_configs, installed=installed,
        origins=origins,
    )
    for rule in HOST_RULES:
        with mistakes.check():
            rule(loaded)
    mistakes.raise_any()
    return loaded


def _check_model(config: LoadedConfig) -> None:
    model = config.host.model
    if model.quantization not in (None, 4, 8):
        raise ConfigError(f"model.quantization must be 4 or 8 (or unset), not {model.quantization}")
    if model.quantization and model.lora is None:
        raise ConfigError("model.quantization needs model.lora: a quantized model trains only through an adapter")
    if model.dtype not in ("float32", "bfloat16", "float16", "auto"):
        raise ConfigError(f"model.dtype must be float32, bfloat16, float16 or auto, not '{model.dtype}'")
    tokens = list(model.add_tokens)
    if any(not token or token != token.strip() for token in tokens):
        raise ConfigError(f"model.add_tokens: tokens must be non-empty and without surrounding spaces, not {tokens}")
    if len(set(tokens)) < len(tokens):
        raise ConfigError(f"model.add_tokens: a token is listed twice in {tokens}")


def _check_threads(config: LoadedConfig) -> None:
    if config.host.threads is not None and config.host.threads < 1:
        raise ConfigError(f"threads must be at least 1 (or unset for the default), not {config.host.threads}")


def _check_rewards(config: LoadedConfig) -> None:
    mistakes = Mistakes()
    for name, weight in config.host.rewards.items():
        with mistakes.check():
            if weight is None and name not in OUTCOME_REWARDS:
                raise ConfigError(
                    f"rewards.{name}: null turns off a built-in outcome reward; give a plugin's component weight 0 "
                    "instead"
                )
            if weight is not None:
                schedule(weight, f"rewards.{name}")
    outcome = [name for name, weight in config.host.rewards.items() if weight is not None and name in OUTCOME_REWARDS]
    if config.host.data.label_free and outcome:
        with mistakes.check():
            raise ConfigError(
                f"rewards.{outcome[0]} compares with the reference answer, but data.label_free hides it; "
                f"set rewards.{outcome[0]}=null or data.label_free=false"
            )
    mistakes.raise_any()


def _check_eval(config: LoadedConfig) -> None:
    if config.host.eval.metric not in OUTCOME_REWARDS:
        raise ConfigError(
            f"eval.metric must be a built-in outcome reward ({', '.join(OUTCOME_REWARDS)}), not '{config.host.eval.metric}'"
        )
    for key, value in (("eval.every_steps", config.host.eval.every_steps), ("log_samples", config.host.log_samples)):
        if value < 0:
            raise ConfigError(f"{key} must be 0 (off) or a positive number, not {value}")


def _check_skill(config: LoadedConfig) -> None:
    """The skills beyond solving are measured with the built-in task's plain-text role prompts."""
    from stackrl.tasks.skills import SKILLS

    skill, data = config.host.eval.skill, config.host.data
    if skill not in SKILLS:
        raise ConfigError(f"eval.skill must be one of {', '.join(SKILLS)}, not '{skill}'")
    if config.host.eval.verify_vote and (skill != "solve" or data.chat):
        raise ConfigError(
            "eval.verify_vote judges samples with plain-text judge prompts (docs/roles.md); it needs eval.skill: solve "
            "and data.chat: false"
        )
    if skill != "solve" and data.chat:
        raise ConfigError(
            f"eval.skill {skill} writes plain-text role prompts (docs/roles.md); it needs data.chat: false"
        )
    if skill == "judge" and data.source != "arithmetic":
        raise ConfigError(
            f"eval.skill judge shows the built-in task's solutions and slipped copies of them; it needs "
            f"data.source: arithmetic, not '{data.source}'"
        )
    if skill in ("corrupt", "transition", "decompose") and data.source != "arithmetic":
        raise ConfigError(
            f"eval.skill {skill} is measured on the built-in task's solutions (docs/roles.md); it needs "
            f"data.source: arithmetic, not '{data.source}'"
        )
    if skill == "pose" and data.source != "arithmetic":
        raise ConfigError(
            f"eval.skill pose reads the problems written as the built-in task's questions; it needs "
            f"data.source: arithmetic, not '{data.source}'"
        )


def _check_vllm(config: LoadedConfig) -> None:
    """vLLM generation is an optional extra, and its colocated engine cannot hold 8-bit weights."""
    trainer = config.host.trainer
    if not trainer.get("use_vllm"):
        return
    if config.host.model.add_tokens:
        raise ConfigError(
            "trainer.use_vllm: vLLM serves the model's own vocabulary, without model.add_tokens; generate with "
            "transformers (trainer.use_vllm=false) or save the model with its tokens and train from that"
        )
    if config.host.model.quantization == 8 and trainer.get("vllm_mode", "colocate") == "colocate":
        raise ConfigError(
            "trainer.use_vllm: vLLM in colocate mode cannot load 8-bit bitsandbytes weights; use "
            "model.quantization=4, trainer.vllm_mode=server, or trainer.use_vllm=false"
        )
    if importlib.util.find_spec("vllm") is None:
        raise ConfigError(
            "trainer.use_vllm: vLLM is not installed; install it with `pip install 'stackrl[vllm]'` "
            "(needs a CUDA GPU) or set trainer.use_vllm=false"
        )


def _check_importance(config: LoadedConfig) -> None:
    from stackrl.importance import LEVELS

    importance = config.host.importance
    if not importance.truncation > 0:
        raise ConfigError(f"importance.truncation must be above 0 (the most an importance weight may be), not "
                          f"{importance.truncation}")
    if importance.level not in LEVELS:
        raise ConfigError(f"importance.level must be one of {', '.join(LEVELS)}, not '{importance.level}'")


# The keys each auxiliary backend reads beside ``backend``; a key of another backend set to other than its default
# is refused, so that a misplaced setting is not silently ignored.
AUX_BACKEND_KEYS = {
    "hf": ("name_or_path", "dtype", "quantization", "quant_type", "double_quant", "trust_remote_code", "offload"),
    "openai": ("base_url", "model", "api_key_env", "api", "timeout_s", "retries", "backoff_s", "concurrency",
               "on_failure"),
    "rule": ("rule",),
}


def _check_aux_model(name: str, section: AuxModelSection) -> None:
    from stackrl.aux_rules import RULES

    key = f"aux_models.{name}"
    if name in ("policy", "reference"):
        raise ConfigError(f"{key}: '{name}' names the run's own model already; choose another name")
    if section.backend not in AUX_BACKEND_KEYS:
        raise ConfigError(f"{key}.backend must be hf, openai or rule, not '{section.backend}'")
    default = AuxModelSection()
    for other, keys in AUX_BACKEND_KEYS.items():
        for field_name in keys:
            if other != section.backend and getattr(section, field_name) != getattr(default, field_name):
                raise ConfigError(f"{key}.{field_name} is a setting of backend {other}, not of {section.backend}")
    required = {"hf": ("name_or_path",), "openai": ("base_url", "model"), "rule": ("rule",)}[section.backend]
    for field_name in required:
        if not getattr(section, field_name):
            raise ConfigError(f"{key}.{field_name}: backend {section.backend} needs it")
    if section.backend == "hf":
        if section.quantization not in (None, 4, 8):
            raise ConfigError(f"{key}.quantization must be 4 or 8 (or unset), not {section.quantization}")
        if section.dtype not in ("float32", "bfloat16", "float16", "auto"):
            raise ConfigError(f"{key}.dtype must be float32, bfloat16, float16 or auto, not '{section.dtype}'")
        if section.offload and section.quantization:
            raise ConfigError(f"{key}.offload: quantized weights cannot move between devices; unset one of them")
    if section.backend == "openai":
        if not section.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"{key}.base_url must start with http:// or https://, not '{section.base_url}'")
        if section.api not in ("chat", "completions"):
            raise ConfigError(f"{key}.api must be chat or completions, not '{section.api}'")
        if section.on_failure not in ("none", "error"):
            raise ConfigError(f"{key}.on_failure must be none or error, not '{section.on_failure}'")
        if section.timeout_s <= 0 or section.retries < 0 or section.backoff_s < 0 or section.concurrency < 1:
            raise ConfigError(
                f"{key}: timeout_s must be positive, retries and backoff_s 0 or more, concurrency at least 1"
            )
    if section.backend == "rule" and section.rule not in RULES:
        known = ", ".join(sorted(RULES)) or "none"
        raise ConfigError(
            f"{key}.rule: no rule '{section.rule}' is registered (registered by the selected plugins: {known})"
        )


def _check_aux_models(config: LoadedConfig) -> None:
    mistakes = Mistakes()
    for name, section in config.host.aux_models.items():
        with mistakes.check():
            _check_aux_model(name, section)
    mistakes.raise_any()


# Rules that span keys, run on the merged config once types and names are checked; each is reported on its own.
HOST_RULES = (_check_model, _check_vllm, _check_threads, _check_rewards, _check_eval, _check_skill, _check_importance,
              _check_aux_models)
