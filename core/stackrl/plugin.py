"""The base class of every stackrl plugin."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class NoConfig:
    """The config of a plugin that has no settings."""


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
