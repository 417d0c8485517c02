"""SEC as a plugin: after each training batch, the bandit update; before the next, the categories' weights."""

from __future__ import annotations

from stackrl import Plugin, PluginError, hookimpl
from stackrl.pool import CATEGORY_COLUMN

from stackrl_sec.bandit import category_rewards, draw_probabilities, updated_values
from stackrl_sec.config import SecConfig


class Sec(Plugin):
    """Draws each problem's category from a softmax of per-category values, which follow the batch's mean
    |advantage| per category; the prompt pool then takes an unused problem of that category."""

    Config = SecConfig
    activity = "completions had a category whose value they updated"

    def __init__(self, config=None):
        super().__init__(config)
        self.values: dict[str, float] = {}
        self.batches_seen = 0  # the pool's batch count at the last update: one update per generation batch

    def check_run(self, run):
        run.need_column("sec", CATEGORY_COLUMN, "by whose values SEC draws problems")

    @hookimpl
    def train_begin(self, ctx):
        self._steer(ctx)

    @hookimpl
    def post_step(self, ctx):
        # With steps_per_generation > 1 several optimizer steps share one rollout: it is counted once.
        if ctx.pool is None or ctx.pool.batches == self.batches_seen or ctx.rollout is None:
            return
        self.batches_seen = ctx.pool.batches
        rollout = ctx.rollout
        categories = [None if c is None else str(c) for c in rollout.columns.get(CATEGORY_COLUMN, [None] * len(rollout))]
        rewards = category_rewards(categories, rollout.advantages, rollout.completion_mask())
        ctx.acted(len(categories) - categories.count(None), of=len(categories))
        rewards.pop(None, None)  # rows without a category (added by another plugin) inform no arm
        self._know(ctx)
        toward_zero = self.config.absent_categories == "toward_zero"
        self.values = updated_values(self.values, rewards, self.config.alpha, toward_zero)
        for category, reward in rewards.items():
            ctx.log(f"reward/{category}", reward)
        self._steer(ctx)

    def _know(self, ctx) -> None:
        """Every category the pool can draw has a value (0 until it is seen)."""
        for category in ctx.pool.categories():
            if category is not None:
                self.values.setdefault(category, 0.0)

    def _steer(self, ctx) -> None:
        if ctx.pool is None:
            raise PluginError("sec needs the prompt pool, which this run lacks (its training data is not a map-style dataset)")
        self._know(ctx)
        drawable = [c for c in ctx.pool.categories() if c is not None]
        if not drawable:
            raise PluginError(
                f"sec: no training row has a '{CATEGORY_COLUMN}' value at step {ctx.step}; SEC draws problems by "
                "category"
            )
        probabilities = draw_probabilities({c: self.values[c] for c in drawable}, self.config.temperature)
        ctx.pool.set_category_weights(probabilities)
        for category in drawable:
            ctx.log(f"prob/{category}", probabilities[category])
            ctx.log(f"value/{category}", self.values[category])

    @hookimpl
    def state_dict(self):
        return {"values": dict(self.values), "batches_seen": self.batches_seen}

    @hookimpl
    def load_state_dict(self, state):
        self.values = dict(state["values"])
        self.batches_seen = state["batches_seen"]
