"""Optional adapters: TextArena's and OpenSpiel's games played through the runner's game protocol.

A config names one as ``environment: textarena:TicTacToe-v0`` or ``environment: openspiel:tic_tac_toe`` (the part
after the colon is the game), or by class path with the game in ``env.kwargs`` (``environment:
stackrl.blocks.env.adapters:OpenSpielGame``, ``kwargs: {game: tic_tac_toe}``). The packages are the ``envs`` extra
(``pip install 'stackrl[envs]'``), never a core dependency: a run that names an adapter without its package, or a
game the package does not have, is refused with a ``ConfigError`` naming the key.

Both map their library's conventions onto :mod:`stackrl.blocks.env.protocol`'s text game: ``seats`` is the game's
number of players, ``turn`` the player to move, ``step(action)`` returns the observation for the next player to
move, one reward per seat and whether the game ended.

- **TextArena** (``textarena.make``): the game keeps its action wrappers (``[4]`` for ``4``) but its observations
  are read from the unwrapped game and shown as only what the seat to move has not yet seen (``[GAME] ...``,
  ``[Player 1] ...`` lines, its own actions left out: they are already in its row), since the runner shows each
  observation after the actions before it; TextArena's own observation wrappers repeat the whole history every turn.
  Rewards come at the end (``close()``). TextArena seeds Python's global ``random``; each episode here draws from its
  own copy of that state, so episodes played side by side stay reproducible from their seeds and the global state is
  left as it was. It has no list of legal actions: a ``scripted`` seat needs OpenSpiel or a ``module:function``.
- **OpenSpiel** (``pyspiel.load_game``): sequential games only (a simultaneous-move game is refused). The seat to
  move sees its ``observation_string`` (else its ``information_state_string``, else the state's text) and, with
  ``show_legal``, a ``legal:`` line of its legal actions as ``action_to_string`` writes them; an action is one of
  those strings (or its action number). Chance nodes are sampled from the episode's seed. A seat's reward for a
  step is the change in its ``returns()``. An illegal action loses (``illegal: lose``: the seat gets the game's
  minimum utility and, in a two-player zero-sum game, the other its maximum, the others 0; ``info["illegal"]``) or
  is shown back to the seat to try again (``illegal: retry``).
"""

from __future__ import annotations

import importlib
import random
from typing import Any

from stackrl.errors import ConfigError

PREFIXES = {"textarena": "TextArenaGame", "openspiel": "OpenSpielGame"}
INSTALL = "pip install 'stackrl[envs]'"


def _package(module: str, adapter: str):
    outer = random.getstate()  # importing textarena draws from Python's global random
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ConfigError(
            f"env.environment: the {adapter} adapter needs the '{module}' package, which is not installed ({INSTALL}): {e}"
        ) from None
    finally:
        random.setstate(outer)


def adapter_class(spec: str):
    """The adapter class for ``textarena:GAME`` or ``openspiel:GAME``, the game bound as its default; ``None`` for
    any other spec."""
    prefix, _, game = spec.partition(":")
    if prefix not in PREFIXES:
        return None
    if not game:
        raise ConfigError(f"env.environment: '{spec}' names no game after '{prefix}:'")
    base = globals()[PREFIXES[prefix]]
    return type(f"{base.__name__}[{game}]", (base,), {"default_game": game, "__module__": __name__})


class _PrivateRandom:
    """Python's global ``random`` state kept per episode: swapped in around each call into the library."""

    def __init__(self):
        self.state = None

    def __enter__(self):
        self.outer = random.getstate()
        if self.state is not None:
            random.setstate(self.state)

    def __exit__(self, *exc):
        self.state = random.getstate()
        random.setstate(self.outer)


class TextArenaGame:
    """A TextArena game (``game``: its id, such as ``TicTacToe-v0``) for ``num_players`` seats; ``options`` go to
    ``textarena.make``."""

    default_game: str | None = None
    _checked: set = set()  # (game, players) pairs that have been reset once

    def __init__(self, game: str | None = None, num_players: int = 2, options: dict | None = None):
        ta = _package("textarena", "textarena")
        self.game = game or self.default_game
        if not self.game:
            raise ConfigError("env.kwargs.game: the textarena adapter needs a game id, such as TicTacToe-v0")
        from textarena.envs.registration import ENV_REGISTRY

        if self.game not in ENV_REGISTRY:
            near = [name for name in ENV_REGISTRY if name.lower().startswith(self.game.split("-")[0].lower()[:4])]
            raise ConfigError(
                f"env.kwargs.game: textarena has no game '{self.game}'"
                + (f" (similar: {', '.join(sorted(near)[:8])})" if near else "")
            )
        if not isinstance(num_players, int) or num_players < 1:
            raise ConfigError(f"env.kwargs.num_players: must be an int of at least 1, not {num_players!r}")
        self.seats, self.options = num_players, dict(options or {})
        self._random = _PrivateRandom()
        with self._random:
            self.env = ta.make(self.game, **self.options)
        self.raw = self.env
        while isinstance(self.raw, ta.Wrapper):
            self.raw = self.raw.env
        key = (self.game, num_players, repr(sorted(self.options.items())))
        if key not in self._checked:  # a wrong number of players is a config error, found before any episode
            try:
                with self._random:
                    self.env.reset(num_players=num_players, seed=0)
            except Exception as e:
                raise ConfigError(
                    f"env.kwargs.num_players: textarena's {self.game} cannot be played by {num_players} player(s): "
                    f"{type(e).__name__}: {e}"
                ) from None
            self._checked.add(key)

    @property
    def turn(self) -> int:
        return int(self.raw.state.current_player_id)

    def reset(self, seed: int = 0, **row) -> str:
        self._random = _PrivateRandom()
        with self._random:
            self.env.reset(num_players=self.seats, seed=seed)
        return self._observation()

    def _observation(self) -> str:
        with self._random:
            player, messages = self.raw.get_observation()
        names = getattr(self.raw.state, "role_mapping", {})
        lines = []
        for sender, message, kind in messages:
            if sender == player and getattr(kind, "name", "") == "PLAYER_ACTION":
                continue  # the seat's own action: already in its row
            name = "GAME" if sender < 0 else names.get(sender, f"Player {sender}")
            lines.append(f"[{name}] {message}")
        return "\n".join(lines)

    def step(self, action: str):
        with self._random:
            done, info = self.env.step(action)
        info = dict(info or {})
        if not done:
            return self._observation(), [0.0] * self.seats, False, info
        with self._random:
            closed = self.env.close()
        rewards, game_info = closed if isinstance(closed, tuple) else (closed, {})
        rewards = rewards or {}
        info["game_info"] = {str(p): dict(v) for p, v in (game_info or {}).items()}
        return None, [float(rewards.get(seat, 0.0)) for seat in range(self.seats)], True, info


class OpenSpielGame:
    """An OpenSpiel game (``game``: its name, such as ``tic_tac_toe``; ``params``: its parameters) with its legal
    actions shown (``show_legal``) and an illegal action lost or retried (``illegal``)."""

    default_game: str | None = None
    ILLEGAL = ("lose", "retry")

    def __init__(self, game: str | None = None, params: dict | None = None, illegal: str = "lose",
                 show_legal: bool = True):
        self.pyspiel = _package("pyspiel", "openspiel")
        self.name = game or self.default_game
        if not self.name:
            raise ConfigError("env.kwargs.game: the openspiel adapter needs a game name, such as tic_tac_toe")
        if self.name not in self.pyspiel.registered_names():
            near = [n for n in self.pyspiel.registered_names() if self.name.split("_")[0] in n]
            raise ConfigError(
                f"env.kwargs.game: OpenSpiel has no game '{self.name}'"
                + (f" (similar: {', '.join(sorted(near)[:8])})" if near else "")
            )
        if illegal not in self.ILLEGAL:
            raise ConfigError(f"env.kwargs.illegal: must be one of {', '.join(self.ILLEGAL)}, not {illegal!r}")
        try:
            self.spiel = self.pyspiel.load_game(self.name, dict(params or {}))
        except Exception as e:
            raise ConfigError(f"env.kwargs.params: OpenSpiel cannot load {self.name} with {params!r}: {e}") from None
        kind = self.spiel.get_type()
        if kind.dynamics != self.pyspiel.GameType.Dynamics.SEQUENTIAL:
            raise ConfigError(
                f"env.kwargs.game: {self.name} is a simultaneous-move game; the runner plays one seat a turn"
            )
        self.kind, self.illegal, self.show_legal = kind, illegal, show_legal
        self.seats = self.spiel.num_players()
        self.state = None

    def reset(self, seed: int = 0, **row) -> str:
        self.rng = random.Random(seed)
        self.state = self.spiel.new_initial_state()
        self._chance()
        return self._observation()

    @property
    def turn(self) -> int:
        return int(self.state.current_player())

    def _chance(self) -> None:
        while self.state.is_chance_node():
            outcomes, weights = zip(*self.state.chance_outcomes())
            self.state.apply_action(self.rng.choices(outcomes, weights)[0])

    def _observation(self, note: str = "") -> str:
        player = self.state.current_player()
        if self.kind.provides_observation_string:
            text = self.state.observation_string(player)
        elif self.kind.provides_information_state_string:
            text = self.state.information_state_string(player)
        else:
            text = str(self.state)
        if self.show_legal:
            text += f"\nlegal: {' | '.join(self.legal_actions())}"
        return note + text

    def legal_actions(self) -> list[str]:
        player = self.state.current_player()
        return [self.state.action_to_string(player, a) for a in self.state.legal_actions()]

    def _action(self, action: str) -> int | None:
        player, text = self.state.current_player(), action.strip()
        legal = self.state.legal_actions()
        for a in legal:
            if self.state.action_to_string(player, a) == text:
                return a
        for a in legal:
            if self.state.action_to_string(player, a).lower() == text.lower() or text == str(a):
                return a
        return None

    def step(self, action: str):
        chosen, seat = self._action(action), self.turn
        if chosen is None:
            return self._illegal(seat, action)
        before = list(self.state.returns())
        self.state.apply_action(chosen)
        self._chance()
        rewards = [after - was for after, was in zip(self.state.returns(), before)]
        if self.state.is_terminal():
            return None, rewards, True, {"returns": list(self.state.returns())}
        return self._observation(), rewards, False, {}

    def _illegal(self, seat: int, action: str):
        if self.illegal == "retry":
            return self._observation(f"illegal action: {action}\n"), [0.0] * self.seats, False, {"illegal": action}
        so_far, rewards = list(self.state.returns()), [0.0] * self.seats
        if self.seats == 2 and self.kind.utility == self.pyspiel.GameType.Utility.ZERO_SUM:
            rewards[1 - seat] = self.spiel.max_utility() - so_far[1 - seat]
        rewards[seat] = self.spiel.min_utility() - so_far[seat]
        return None, rewards, True, {"illegal": action}
