"""The environment runner for stackrl: a policy trained over several turns in an environment, from a config alone."""

from stackrl_env.plugin import Env, EnvConfig

__all__ = ["Env", "EnvConfig"]
