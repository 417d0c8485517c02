"""dmcot: RL fine-tuning of a policy that reasons before each action in a decision-making environment, with the
paper's reward shaping and its bandit figures, stacked on the environment runner (``plugins: [env, dmcot]``).

Paper: LLMs are Greedy Agents: Effects of RL Fine-tuning on Decision-Making Abilities (Schmied, Bornschein,
Grau-Moya, Wulfmeier, Pascanu; arXiv 2504.16078). Code followed: none public (README).
"""

from __future__ import annotations

from dataclasses import dataclass

import stackrl
from stackrl.blocks.env import INFO_COLUMN, MOVES_COLUMN, SEAT_COLUMN, SEED_COLUMN
from stackrl_dmcot.regret import bandit_figures, bandit_odds, pulls_of
from stackrl_dmcot.shaping import row_actions, shaped_reward, untried


@dataclass
class DmcotConfig:
    """The reward shaping (the reward component ``dmcot``, weighted by ``rewards.dmcot``, added to the ``env``
    plugin's return) and the bandit the figures are measured on."""

    # Added to a row's reward for each valid action its seat had not taken before in the episode: the paper's
    # exploration bonus for untried actions (+1). 0 switches it off (a game whose actions never repeat, such as
    # tic-tac-toe, gains nothing from it but a reward for longer games).
    bonus: float = 1.0
    # Added for each action the environment refused (the bandit's arm that is none, an illegal move) or turn with
    # no action the runner could read: the paper's reward shaping for valid actions (-5). 0 switches it off.
    invalid_penalty: float = -5.0
    # The built-in bandit's number of arms (env.kwargs.arms, 3 by default), which the regret, optimal-arm share and
    # coverage are measured over; rows of other environments are not measured.
    arms: int = 3

    def __post_init__(self):
        if self.bonus < 0:
            raise stackrl.ConfigError(f"dmcot.bonus: an exploration bonus is 0 or more, not {self.bonus}")
        if self.invalid_penalty > 0:
            raise stackrl.ConfigError(f"dmcot.invalid_penalty: a penalty is 0 or less, not {self.invalid_penalty}")
        if self.arms < 2:
            raise stackrl.ConfigError(f"dmcot.arms: a bandit has at least 2 arms, not {self.arms}")


class Dmcot(stackrl.Plugin):
    """Each episode row of the env plugin gets the reward component ``dmcot``: the exploration bonus for each
    untried valid action of its seat plus the penalty for each invalid one; GRPO's advantages see it with the
    environment's return. Bandit rows also log their cumulative regret, optimal-arm share and action coverage."""

    Config = DmcotConfig
    activity = "episode rows had their reward shaped (an untried action's bonus or an invalid action's penalty)"

    @stackrl.hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        columns = rollout.columns
        if MOVES_COLUMN not in columns:  # another plugin generated the rollout: no episode to shape
            ctx.acted(0, of=len(rollout), hint="dmcot shapes the env plugin's episodes: plugins: [env, dmcot]")
            return [None] * len(rollout)
        rewards, shaped, new, invalid, acted_on, figures = [], 0, 0, 0, 0, []
        for seat, moves, infos, seed in zip(columns[SEAT_COLUMN], columns[MOVES_COLUMN], columns[INFO_COLUMN],
                                            columns[SEED_COLUMN]):
            actions, unparsed = row_actions(seat, moves, infos)
            value = shaped_reward(actions, unparsed, self.config.bonus, self.config.invalid_penalty)
            rewards.append(value)
            shaped += value != 0.0
            new += sum(untried(actions))
            invalid += sum(not a.valid for a in actions) + unparsed
            acted_on += len(actions) + unparsed
            pulls = pulls_of(infos)
            if pulls is not None and seed is not None:
                figures.append(bandit_figures(pulls, bandit_odds(seed, self._arms(pulls))))
        rows = len(rollout)
        ctx.log("untried", new / rows)
        ctx.log("invalid", invalid / max(1, acted_on))
        if figures:
            for name in ("regret", "optimal", "coverage"):
                ctx.log(name, sum(getattr(f, name) for f in figures) / len(figures))
        ctx.acted(shaped, of=rows, hint="no row took an untried valid action nor an invalid one: are dmcot.bonus and "
                  "dmcot.invalid_penalty both 0?")
        return rewards

    def _arms(self, pulls: list[int | None]) -> int:
        highest = max((arm for arm in pulls if arm is not None), default=1)
        if highest > self.config.arms:
            raise stackrl.PluginError(
                f"dmcot.arms: the bandit paid out on arm {highest}, but dmcot.arms is {self.config.arms}; set it to "
                "env.kwargs.arms"
            )
        return self.config.arms
