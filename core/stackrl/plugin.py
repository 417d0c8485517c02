"""The base class of every stackrl plugin, and :func:`training_only` for a rollout of its own made only in training."""

from __future__ import annotations

import dataclasses
import functools
import string
from dataclasses import dataclass, field

from stackrl.errors import ConfigError, did_you_mean
from stackrl.sandbox_section import SandboxSection


def template_fields(template: str) -> list[str]:
    """The ``{field}`` names a template uses (a plugin's template settings are checked against the run's columns)."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


@dataclass
class NoConfig:
    """The config of a plugin that has no settings."""


@dataclass(frozen=True)
class RunFacts:
    """What a run will be, as the host knows it before anything loads: what :meth:`Plugin.check_run` checks a
    plugin's settings against."""

    max_steps: int | None  # the optimizer steps the run trains (trainer.max_steps); None where epochs set the length
    group_size: int  # completions per prompt (trainer.num_generations)
    groups_per_step: int  # prompt groups in each step's rollout, on each process
    columns: tuple[str, ...] | None  # the training data's columns; None where known only once loaded (a hub dataset)
    builtin_columns: tuple[str, ...]  # the built-in task's columns, which plugins' default templates read
    chat: bool  # prompts are chat messages (data.chat)
    reference: bool  # a reference model is at hand (trainer.beta above 0, or the LoRA adapter's base)
    source: str  # data.source
    components: tuple[str, ...]  # the run's reward components
    # The sandbox section: a plugin that runs programs checks it with stackrl.blocks.sandbox.check_isolation.
    sandbox: SandboxSection = field(default_factory=SandboxSection)
    # The names the config's aux_models section declares (docs/hooks.md, "Auxiliary models"), in its order.
    aux_models: tuple[str, ...] = ()

    def past_end(self, key: str, first_step: int, what: str) -> str | None:
        """A note where the setting ``key`` first acts at training step ``first_step`` (counted from 1, as the
        logs count; a rollout generated at ``ctx.step`` s trains step s + 1), after the run's last step: ``what``
        acts from that step, so within this run it never does."""
        if self.max_steps is None or first_step <= self.max_steps:
            return None
        return f"{key}: {what} from step {first_step}, after the run's last step (trainer.max_steps={self.max_steps})"

    def need_column(self, key: str, column: str, why: str) -> None:
        """Refuse a run whose data lacks ``column``, the value of the setting ``key``."""
        if self.columns is not None and column not in self.columns:
            raise ConfigError(
                f"{key}: data.source ({self.source}) has no column '{column}', {why}; columns: {', '.join(self.columns)}"
            )

    def need_reference(self, key: str, what: str) -> None:
        """Refuse a setting that reads the reference model (``ctx.score(model="reference")``) in a run without one."""
        if not self.reference:
            raise ConfigError(
                f"{key}: {what} the reference model, which this run lacks; set trainer.beta above 0 (TRL then loads "
                "one) or use model.lora (its base is the reference)"
            )

    def need_plain_text(self, key: str, what: str) -> None:
        """Refuse chat prompts (data.chat) where ``what`` extends the question as plain text, as the built-in
        task's role formats do."""
        if self.chat:
            raise ConfigError(f"{key}: data.chat is true, but {what}; set data.chat=false")

    def check_template(self, plugin: "Plugin", key: str, own: tuple[str, ...] = ()) -> None:
        """Refuse a template setting of ``plugin`` that names a field the run cannot fill. The template at
        ``plugin.config.<key>`` is formatted with ``{prompt}``, the data's columns and the fields the plugin fills
        itself: ``own``, and those of the setting's default template that are not the built-in task's columns."""
        config = plugin.config
        default = next(f for f in dataclasses.fields(config) if f.name == key).default
        derived = [f for f in template_fields(default or "") if f not in self.builtin_columns]
        allowed = ["prompt", *own, *derived, *(self.columns or ())]
        for field in template_fields(getattr(config, key) or ""):
            if self.columns is not None and field not in allowed:
                raise ConfigError(
                    f"{plugin.name}.{key}: the template names {{{field}}}, which is neither a column of data.source "
                    f"({self.source}) nor a field {plugin.name} fills.{did_you_mean(field, allowed)} It may use: "
                    f"{', '.join('{' + name + '}' for name in dict.fromkeys(allowed))}"
                )


class Plugin:
    """A method plugin: a class whose ``@hookimpl`` methods answer the hooks of :mod:`stackrl.hookspecs`.

    The host builds one instance per run, after validating the plugin's config section against ``Config``
    (a dataclass), and passes the result as ``config``. ``name`` is the plugin's entry-point name, which is also
    its config section, its reward component and loss term name, and its prefix in the logs. State kept on the
    instance lives as long as the run; implement ``state_dict``/``load_state_dict`` to carry it across resumes.
    """

    Config: type = NoConfig
    name: str = ""
    # What ``ctx.acted(n, of=m)`` counts, read as "n of m <activity>" ("completions had an answer it could score"):
    # the run's log and its closing summary say it in these words.
    activity: str = ""

    def __init__(self, config=None):
        self.config = config if config is not None else self.Config()

    def reward_weight(self):
        """The weight of this plugin's reward component where the config's ``rewards`` names it not: a number or a
        schedule ``{step: weight}`` (:mod:`stackrl.weights`), so a method whose reward belongs to one phase of
        training can mute it at that phase's end. A weight the config gives replaces it."""
        return 1.0

    def needs_rewards(self) -> dict[str, str]:
        """The reward components this plugin reads from ``ctx.rollout.rewards``, each under the field of ``Config``
        that names it (``{"correct_reward": "exact_match"}``). A stack that lacks one is refused before training."""
        return {}

    def check_run(self, run: RunFacts) -> list[str] | None:
        """Check the settings against the run they are part of (its length, group size, data columns, reward
        components): raise ``ConfigError("<plugin>.<key>: ...")`` for a setting the run cannot use, and return
        notes on settings that are valid but will not act as the user may expect (a phase starting after the run's
        last step). Called by ``stackrl config validate`` and before a run loads anything."""
        return None


def training_only(generate_rollout):
    """Make a plugin's ``generate_rollout`` answer while training only (under ``@hookimpl``): held-out evaluation
    then samples plain completions, measuring plain solving rather than the method's rollout."""

    @functools.wraps(generate_rollout)
    def hook(self, prompts, ctx):
        return generate_rollout(self, prompts, ctx) if ctx.training else None

    return hook
