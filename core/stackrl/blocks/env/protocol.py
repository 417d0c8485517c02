"""The environment protocol the runner plays, and :class:`Episode`, one environment instance behind it.

Two conventions, both run unchanged:

- **TRL's** (``environment_factory``): ``reset(**row)`` returns the first observation (or ``None``), every public
  method is a tool the policy calls, and an optional ``get_reward()`` scores the finished episode. A turn without a
  tool call is the policy's final answer and ends the episode. A tool's result is shown as ``str(result)``, as TRL
  shows it.
- **A text game's**: ``reset(**row)`` returns the first observation (or ``None``: the prompt alone) and
  ``step(action) -> (observation, reward, done, info)``. A game for several players says how many in ``seats`` (an
  int, default 1) and whose move it is in ``turn`` (an attribute or property, the seat index); its ``reward`` is
  then one number per seat (a list). A game that lists ``legal_actions()`` can be played by the runner's random
  scripted opponent.

Either may name a ``seed`` parameter in ``reset``: it then gets the episode's seed, the same on every process.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, NamedTuple

from stackrl.errors import ConfigError

# Members of an environment class that are the protocol's, never tools.
PROTOCOL_MEMBERS = frozenset({"reset", "step", "get_reward", "legal_actions", "seats", "turn", "render"})


class ToolCall(NamedTuple):
    """A tool the policy called: the method's name and its arguments."""

    name: str
    args: tuple = ()
    kwargs: dict = {}


class Outcome(NamedTuple):
    """What one action led to: the observation for the seat to move next, each seat's reward, and the end."""

    observation: str | None
    rewards: list[float]
    done: bool
    info: dict


class EnvironmentFailure(Exception):
    """An environment that raised or broke the protocol; the runner names the step, row and method."""

    def __init__(self, method: str, problem: str):
        super().__init__(f"{method}: {problem}")
        self.method, self.problem = method, problem


class ToolFailure(EnvironmentFailure):
    """A TRL-style environment's tool raised: shown to the agent as an error observation (``env.on_tool_error:
    observe``), or handled as any other failure of the environment (``fail``)."""


def builtin_environments() -> dict[str, str]:
    """The environments shipped with stackrl, by the name a config gives them."""
    games = "stackrl.blocks.env.games"
    return {
        "tictactoe": f"{games}:TicTacToe",
        "kuhn_poker": f"{games}:KuhnPoker",
        "prisoners_dilemma": f"{games}:PrisonersDilemma",
        "bandit": f"{games}:Bandit",
        "negotiation": f"{games}:Negotiation",
        "public_goods": "stackrl.blocks.env.party:PublicGoods",
        "calculator": "stackrl.blocks.env.calculator:Calculator",
        "search": "stackrl.blocks.env.search:Search",
    }


def load_object(spec: str, *, key: str):
    """A built-in environment's class by name, an adapted game (``textarena:GAME``, ``openspiel:GAME``:
    :mod:`stackrl.blocks.env.adapters`), or any object by its import path ``package.module:Name``."""
    spec = builtin_environments().get(spec, spec)
    from stackrl.blocks.env.adapters import adapter_class

    adapted = adapter_class(spec)
    if adapted is not None:
        return adapted
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ConfigError(
            f"{key}: '{spec}' is neither a built-in environment ({', '.join(builtin_environments())}) nor an import "
            "path 'package.module:Name'"
        )
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"{key}: cannot import '{spec}': {e}") from None


def is_game(env_class) -> bool:
    """Whether the class plays by ``step`` (a text game) rather than by tools (TRL's convention)."""
    return callable(getattr(env_class, "step", None))


def tool_names(env_class) -> list[str]:
    """The tools of a TRL-style environment: its public methods, as TRL lists them (on the class)."""
    return [
        name for name, _ in inspect.getmembers(env_class, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in PROTOCOL_MEMBERS
    ]


def seats_of(env_class, kwargs: dict) -> int:
    """How many seats the environment has (one instance is made to ask, as TRL probes its environments)."""
    seats = getattr(env_class(**kwargs), "seats", 1)
    if not isinstance(seats, int) or seats < 1:
        raise ConfigError(f"env.environment: {env_class.__name__}.seats is {seats!r}; expected an int of at least 1")
    return seats


def _observation(method: str, value) -> str:
    if not isinstance(value, str):
        raise EnvironmentFailure(method, f"returned an observation of type {type(value).__name__}; expected str")
    return value


class Episode:
    """One environment instance playing one episode, whichever convention it follows."""

    def __init__(self, env, seats: int, seed: int):
        self.env, self.seats, self.seed = env, seats, seed
        self.game = is_game(type(env))
        self.tools = {} if self.game else {name: getattr(env, name) for name in tool_names(type(env))}

    def _call(self, method: str, *args, **kwargs):
        try:
            return getattr(self.env, method)(*args, **kwargs)
        except Exception as e:  # any failure of user code is reported with the step and row by the runner
            raise EnvironmentFailure(method, f"raised {type(e).__name__}: {e}") from e

    def reset(self, row: dict) -> str | None:
        """Start the episode on a dataset row: its first observation (``None``: none)."""
        kwargs = dict(row)
        if "seed" in inspect.signature(self.env.reset).parameters:
            kwargs["seed"] = self.seed
        first = self._call("reset", **kwargs)
        return None if first is None else _observation("reset", first)

    def turn(self) -> int:
        """The seat to move."""
        if self.seats == 1:
            return 0
        turn = getattr(self.env, "turn", None)
        if not isinstance(turn, int) or not 0 <= turn < self.seats:
            raise EnvironmentFailure("turn", f"is {turn!r}; expected a seat index below {self.seats}")
        return turn

    def step(self, action: str) -> Outcome:
        """Play a game's action."""
        result = self._call("step", action)
        if not (isinstance(result, tuple) and len(result) == 4):
            raise EnvironmentFailure("step", "returned something other than (observation, reward, done, info)")
        observation, reward, done, info = result
        rewards = list(reward) if isinstance(reward, (list, tuple)) else [reward]
        if len(rewards) != self.seats or not all(isinstance(r, (int, float)) for r in rewards):
            raise EnvironmentFailure("step", f"returned reward {reward!r}; expected {self.seats} number(s), one a seat")
        observation = None if done and observation is None else _observation("step", observation)
        return Outcome(observation, [float(r) for r in rewards], bool(done), dict(info or {}))

    def call(self, tool: ToolCall) -> Outcome:
        """Call a TRL-style environment's tool: its result, as text, is the next observation."""
        if tool.name not in self.tools:
            return Outcome(f"unknown tool '{tool.name}'; tools: {', '.join(self.tools)}", [0.0], False,
                           {"unknown_tool": tool.name})
        try:
            result = self.tools[tool.name](*tool.args, **tool.kwargs)
        except Exception as e:  # a tool's failure is the agent's to see (TRL's tool loop shows it), unless refused
            raise ToolFailure(tool.name, f"raised {type(e).__name__}: {e}") from e
        return Outcome(str(result), [0.0], False, {"tool": tool.name})

    def final_reward(self) -> float:
        """``get_reward()`` of an environment that owns its reward, else 0."""
        if not callable(getattr(self.env, "get_reward", None)):
            return 0.0
        value = self._call("get_reward")
        if not isinstance(value, (int, float)):
            raise EnvironmentFailure("get_reward", f"returned {value!r}; expected a number")
        return float(value)

    def legal_actions(self) -> list[str]:
        return list(self._call("legal_actions"))


def construct(env_class, kwargs: dict[str, Any], seats: int, seed: int) -> Episode:
    try:
        env = env_class(**kwargs)
    except Exception as e:
        raise EnvironmentFailure("__init__", f"raised {type(e).__name__}: {e}") from e
    return Episode(env, seats, seed)
