"""``EnvSettings``: the config section of a run in an environment, checked when it is built."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from stackrl.blocks.env.actions import check_grammar
from stackrl.errors import ConfigError

POLICY, SNAPSHOT, SCRIPTED = "policy", "snapshot:", "scripted"
FAILURE_RULES = ("raise", "end")
UNPARSED_RULES = ("raise", "end", "feedback")
TOOL_ERROR_RULES = ("observe", "fail")


@dataclass
class EnvSettings:
    """Which environment, who plays each seat, how a turn is read and shown, and when an episode stops."""

    environment: str = "calculator"  # a built-in environment (stackrl.blocks.env.builtin_environments) or module:Class
    kwargs: Dict[str, Any] = field(default_factory=dict)  # passed to the environment's constructor
    # Each seat's player: policy (the live policy: a trained row), snapshot:NAME (ctx.update_snapshot's copy),
    # scripted (a uniformly random legal action) or module:function (called with the episode and its random
    # generator, returns the action). Empty: the live policy in every seat, one row a seat.
    seats: List[str] = field(default_factory=list)
    rotate_seats: bool = False  # each episode moves the players one seat on from the episode before
    actions: Optional[str] = None  # move | tag | tool_call | text | a regex; default: move for games, tag for tools
    max_turns: int = 8  # actions an episode may take, all seats together
    max_tokens: int = 256  # completion tokens of a row: its actions and the observations between them
    turn_tokens: int = 32  # new tokens of one action
    observation_template: str = "\n{observation}\n"  # how an observation is shown to the policy
    observation_tokens: Optional[int] = 64  # an observation's tokens beyond this are cut (counted); null: never
    on_error: str = "raise"  # an environment that raises or breaks the protocol: raise | end (the episode, counted)
    # A TRL-style tool that raises: observe (the error shown as the tool's result, "error: ValueError: ...", counted,
    # as TRL's tool loop shows it) | fail (an environment failure, handled by on_error)
    on_tool_error: str = "observe"
    on_unparsed: str = "end"  # a turn with no action: raise | end (counted) | feedback (unparsed_feedback shown)
    unparsed_feedback: str = "No action found. Answer with the action format."
    penalty: float = 0.0  # reward added to the seat whose turn failed (unparsed or environment error)
    seed: int = 0  # with the step and the group, seeds each episode (the same on every process)
    # A TRL-style environment's tools shown to a chat model as JSON schemas through its chat template, as TRL does
    # (chat prompts and a tokenizer with a chat template only): null where their schemas can be made (a tool whose
    # docstring or type hints do not give one is counted and none shown), true (that is a ConfigError), false never.
    tool_schemas: Optional[bool] = None

    def __post_init__(self):
        for key in ("max_turns", "max_tokens", "turn_tokens"):
            if getattr(self, key) < 1:
                raise ConfigError(f"env.{key}: must be at least 1, not {getattr(self, key)}")
        if self.observation_tokens is not None and self.observation_tokens < 1:
            raise ConfigError(f"env.observation_tokens: must be at least 1 or null, not {self.observation_tokens}")
        if self.observation_template.count("{observation}") != 1:
            raise ConfigError("env.observation_template: must hold '{observation}' exactly once")
        if self.on_error not in FAILURE_RULES:
            raise ConfigError(f"env.on_error: must be one of {', '.join(FAILURE_RULES)}, not '{self.on_error}'")
        if self.on_tool_error not in TOOL_ERROR_RULES:
            raise ConfigError(
                f"env.on_tool_error: must be one of {', '.join(TOOL_ERROR_RULES)}, not '{self.on_tool_error}'"
            )
        if self.on_unparsed not in UNPARSED_RULES:
            raise ConfigError(f"env.on_unparsed: must be one of {', '.join(UNPARSED_RULES)}, not '{self.on_unparsed}'")
        if self.actions is not None:
            check_grammar(self.actions, key="env.actions")
        for i, player in enumerate(self.seats):
            if player in (POLICY, SCRIPTED) or (player.startswith(SNAPSHOT) and player[len(SNAPSHOT):]):
                continue
            if ":" not in player:
                raise ConfigError(
                    f"env.seats[{i}]: '{player}' is not policy, snapshot:NAME, scripted or an import path module:function"
                )
        if self.seats and POLICY not in self.seats:
            raise ConfigError("env.seats: no seat is the live policy's, so nothing would train")
