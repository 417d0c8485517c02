"""The environment runner: a policy acting over several turns in an environment (a text game, a tool), batched.

- :class:`EnvSettings`: the config section of a run in an environment (which environment, seats, action grammar,
  caps, what a failure does);
- :class:`Runner`: plays a ``generate_rollout``'s batch (one ``ctx.generate`` over the rows still playing per turn)
  and returns the rollout, one row per live-policy seat of each episode, with per-row columns (``*_COLUMN``);
  :func:`replay` replays an episode's recorded moves from its seed;
- :mod:`stackrl.blocks.env.protocol`: the environment protocol (TRL's ``reset`` + tools + ``get_reward``, and a
  text game's ``step``), and :func:`builtin_environments`;
- :mod:`stackrl.blocks.env.actions`: reading a turn's action (``move: 4``, ``<calc>23*7</calc>``, tool-call JSON);
- :mod:`stackrl.blocks.env.layout`: the token layout of a row, one function a pretraining script calls too;
- :mod:`stackrl.blocks.env.games`, :mod:`stackrl.blocks.env.party` (three or more seats) and
  :mod:`stackrl.blocks.env.calculator`: the built-in environments;
- :mod:`stackrl.blocks.env.credit`: discounted per-turn returns and turn-level leave-one-out;
- :mod:`stackrl.blocks.env.adapters`: TextArena's and OpenSpiel's games (``textarena:GAME``, ``openspiel:GAME``),
  with the optional ``envs`` extra.

The ``env`` plugin runs it from a config alone; method plugins stack on it through the advantage hooks and the
columns. docs/hooks.md has the protocol and the columns.
"""

from stackrl.blocks.env.actions import GRAMMARS, parse_action
from stackrl.blocks.env.credit import discounted_returns, turn_leave_one_out
from stackrl.blocks.env.layout import ACTION, episode_layout, observation_ids, turn_examples
from stackrl.blocks.env.protocol import Episode, EnvironmentFailure, Outcome, ToolCall, builtin_environments
from stackrl.blocks.env.runner import (
    END_COLUMN, EPISODE_COLUMN, INFO_COLUMN, MOVES_COLUMN, RETURN_COLUMN, SEAT_COLUMN, SEED_COLUMN,
    TURN_REWARDS_COLUMN, Runner, episode_seed, replay,
)
from stackrl.blocks.env.settings import EnvSettings

__all__ = [
    "ACTION", "END_COLUMN", "EPISODE_COLUMN", "GRAMMARS", "INFO_COLUMN", "MOVES_COLUMN", "RETURN_COLUMN",
    "SEAT_COLUMN", "SEED_COLUMN", "TURN_REWARDS_COLUMN", "EnvSettings", "Episode", "EnvironmentFailure", "Outcome",
    "Runner", "ToolCall", "builtin_environments", "discounted_returns", "episode_layout", "episode_seed",
    "observation_ids", "parse_action", "replay", "turn_examples", "turn_leave_one_out",
]
