"""One small plugin per hook, each doing something a test can see."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from omegaconf import MISSING

from stackrl import Plugin, Samples, hookimpl
from stackrl.blocks.experience import Experience, ExperienceLibrary, ExperienceSettings
from stackrl.blocks.roles import assign_roles, rows_of_groups
from stackrl.rewards import ROLE_COLUMN, SOLUTION_ROLES


class DigitReward(Plugin):
    """Rewards the share of digits in a completion: varies even for a random model."""

    @hookimpl
    def reward(self, ctx):
        return [sum(ch.isdigit() for ch in c) / max(1, len(c)) for c in ctx.rollout.completions]


@dataclass
class GroupRankConfig:
    record: bool = True


class GroupRankReward(Plugin):
    """Rewards a completion by its length's rank within its group: needs every completion of the group."""

    Config = GroupRankConfig

    def __init__(self, config=None):
        super().__init__(config)
        self.seen = []  # (group sizes seen, rewards) per rollout

    @hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        lengths = torch.tensor([len(ids) for ids in rollout.completion_ids], dtype=torch.float32)
        groups = lengths.view(-1, rollout.group_size)
        ranks = groups.argsort(dim=1).argsort(dim=1).float() / (rollout.group_size - 1)
        rewards = ranks.flatten()
        if self.config.record:
            self.seen.append({"group_size": rollout.group_size, "rows": len(rollout), "rewards": rewards.tolist()})
        return rewards

    @hookimpl
    def state_dict(self):
        return {"seen": self.seen}


@dataclass
class PromptSuffixConfig:
    suffix: str = " Answer:"


class PromptSuffix(Plugin):
    Config = PromptSuffixConfig

    @hookimpl
    def transform_prompts(self, prompts, ctx):
        return [p + self.config.suffix for p in prompts]


class PromptRecorder(Plugin):
    """Keeps the prompts it is handed: shows what the plugins before it in the chain returned."""

    def __init__(self, config=None):
        super().__init__(config)
        self.received = []

    @hookimpl
    def transform_prompts(self, prompts, ctx):
        self.received.append(list(prompts))


@dataclass
class GreedyRolloutConfig:
    max_new_tokens: int = 5


class GreedyRollout(Plugin):
    """Takes over generation: greedy, short completions, sampled through ctx.generate."""

    Config = GreedyRolloutConfig

    @hookimpl
    def generate_rollout(self, prompts, ctx):
        generations = ctx.generate(prompts, do_sample=False, max_new_tokens=self.config.max_new_tokens)
        return Samples(completion_ids=[g.completion_ids for g in generations])


@dataclass
class InjectedTurnConfig:
    inject: str = " Check it:"  # appended to every completion, masked from the loss; "" to append nothing
    max_new_tokens: int = 8
    tag_column: str = "row_tag"  # the column naming each row


class InjectedTurn(Plugin):
    """A two-part completion: the sampled part, then text the plugin injects (masked from the loss). Rows carry
    columns from the sample stage; the reward reads one, and the loss stage records what its rows carry."""

    Config = InjectedTurnConfig

    def __init__(self, config=None):
        super().__init__(config)
        self.seen_in_loss = []  # per micro-batch row: (row tag, sampled tokens, loss-mask tokens, completion tokens)

    @hookimpl
    def generate_rollout(self, prompts, ctx):
        generations = ctx.generate(prompts, max_new_tokens=self.config.max_new_tokens)
        injected = ctx.tokenizer(self.config.inject, add_special_tokens=False).input_ids if self.config.inject else []
        return Samples(
            completion_ids=[g.completion_ids + injected for g in generations],
            columns={
                self.config.tag_column: [f"row{i}" for i in range(len(prompts))],
                "sampled_tokens": [len(g.completion_ids) for g in generations],
            },
            loss_mask=[[1] * len(g.completion_ids) + [0] * len(injected) for g in generations],
        )

    @hookimpl
    def reward(self, ctx):
        """The share of distinct tokens in the sampled part: the same whether or not text was injected after it."""
        rollout = ctx.rollout
        sampled = [ids[:n] for ids, n in zip(rollout.completion_ids, rollout.columns["sampled_tokens"])]
        return [len(set(ids)) / max(1, len(ids)) for ids in sampled]

    @hookimpl
    def loss_term(self, ctx):
        columns = ctx.rollout.columns
        for row in range(len(ctx.rollout)):
            self.seen_in_loss.append(
                (
                    columns[self.config.tag_column][row],
                    columns["sampled_tokens"][row],
                    int(ctx.loss_mask[row].sum()),
                    int(ctx.completion_mask[row].sum()),
                )
            )


@dataclass
class RoleRolloutConfig:
    roles: dict[str, float] = field(default_factory=lambda: {"solve": 0.5, "verify": 0.5})


class RoleRollout(Plugin):
    """Gives the groups roles by share; scores only the rows that are not solutions (by their digit share)."""

    Config = RoleRolloutConfig

    @hookimpl
    def generate_rollout(self, prompts, ctx):
        group_roles = assign_roles(len(prompts) // ctx.group_size, self.config.roles, key="role_rollout.roles")
        generations = ctx.generate(prompts)
        return Samples(
            completion_ids=[g.completion_ids for g in generations],
            columns={ROLE_COLUMN: rows_of_groups(group_roles, ctx.group_size)},
        )

    @hookimpl
    def reward(self, ctx):
        return [
            None if role in SOLUTION_ROLES else sum(ch.isdigit() for ch in text) / max(1, len(text))
            for role, text in zip(ctx.rollout.columns[ROLE_COLUMN], ctx.rollout.completions)
        ]


class LogprobReward(Plugin):
    """Rewards the policy's own mean log-prob of each completion, scored through ctx.score."""

    @hookimpl
    def reward(self, ctx):
        scores = ctx.score(ctx.rollout.prompt_ids, ctx.rollout.completion_ids)
        return (scores.logprobs * scores.mask).sum(1) / scores.mask.sum(1).clamp(min=1)


class TokenDecay(Plugin):
    """Per-token advantages: the sample's advantage, fading linearly along the completion."""

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        mask = ctx.rollout.completion_mask().float()
        fade = 1.0 - torch.arange(mask.size(1)).float() / max(1, mask.size(1))
        base = advantages if advantages.dim() == 1 else advantages[:, 0]
        return base.unsqueeze(1) * fade.unsqueeze(0) * mask


class FlatAdvantage(Plugin):
    """An estimator that gives every completion advantage 1 (so tests can see it replaced GRPO's)."""

    @hookimpl
    def estimate_advantages(self, ctx):
        return torch.ones(len(ctx.rollout))


class NarrowFirstGroup(Plugin):
    """Narrows the clip range of the first group's rows to low 0.05, high 0.1; the others keep the config's."""

    @hookimpl
    def clip_range(self, clip, ctx):
        low, high = (bound.clone() for bound in clip)
        low[: ctx.group_size], high[: ctx.group_size] = 0.05, 0.1
        return low, high


class CenteredAdvantage(Plugin):
    """Dr. GRPO's estimator: reward minus the group mean, no std scaling."""

    @hookimpl
    def estimate_advantages(self, ctx):
        r = ctx.total_reward.view(-1, ctx.group_size)
        return (r - r.mean(dim=1, keepdim=True)).flatten()


class LogpLoss(Plugin):
    """The mean over the micro-batch's completions of each one's mean log-prob, as a loss term: its gradient is
    known in closed form, and a batch split into equal micro-batches averages to the whole batch's term."""

    @hookimpl
    def loss_term(self, ctx):
        mask = ctx.completion_mask.float()
        return ((ctx.policy_logps * mask).sum(1) / mask.sum(1).clamp(min=1)).mean()


class StepCounter(Plugin):
    """Counts steps and remembers the rewards it saw: state that must survive a resume."""

    def __init__(self, config=None):
        super().__init__(config)
        self.steps = 0
        self.reward_sums = []

    @hookimpl
    def train_begin(self, ctx):
        ctx.log("started_at", ctx.step)

    @hookimpl
    def post_step(self, ctx):
        self.steps += 1
        self.reward_sums.append(sum(float(r.nansum()) for r in ctx.rollout.rewards.values()))
        ctx.log("steps", self.steps)

    @hookimpl
    def train_end(self, ctx):
        ctx.log("total_steps", self.steps)

    @hookimpl
    def state_dict(self):
        return {"steps": self.steps, "reward_sums": list(self.reward_sums)}

    @hookimpl
    def load_state_dict(self, state):
        self.steps = state["steps"]
        self.reward_sums = list(state["reward_sums"])


class Warns(Plugin):
    """Warns once per rollout and twice after every step: both ways a warning reaches the run summary."""

    @hookimpl
    def reward(self, ctx):
        ctx.warn("rollout")
        return [0.0] * len(ctx.rollout)

    @hookimpl
    def post_step(self, ctx):
        ctx.warn("step", 2)


@dataclass
class ActsConfig:
    acted: int = 1  # reported in the reward stage (of 4) and again after each step (of 12)


class Acts(Plugin):
    """Reports acting on ``acted`` of 4 things in the reward stage and ``acted`` of 12 after each step."""

    Config = ActsConfig
    activity = "things it reported"

    @hookimpl
    def reward(self, ctx):
        ctx.acted(self.config.acted, of=4, hint="acts.acted is 0")
        return [0.0] * len(ctx.rollout)

    @hookimpl
    def post_step(self, ctx):
        ctx.acted(self.config.acted, of=12)


class NoOp(Plugin):
    """Implements every hook and changes nothing: measures the host's own cost."""

    @hookimpl
    def transform_prompts(self, prompts, ctx):
        return None

    @hookimpl
    def reward(self, ctx):
        return [0.0] * len(ctx.rollout)

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        return None

    @hookimpl
    def clip_range(self, clip, ctx):
        return None

    @hookimpl
    def loss_term(self, ctx):
        return None

    @hookimpl
    def post_step(self, ctx):
        pass


@dataclass
class RaisesConfig:
    hook: str = "reward"
    at_step: int = 0


class Raises(Plugin):
    """Raises inside the hook its config names, from step ``at_step`` on."""

    Config = RaisesConfig

    def __init__(self, config=None):
        super().__init__(config)
        self._maybe_raise("__init__", self.config.at_step)

    def _maybe_raise(self, hook, step):
        if self.config.hook == hook and step >= self.config.at_step:
            raise RuntimeError("deliberate failure")

    @hookimpl
    def reward(self, ctx):
        self._maybe_raise("reward", ctx.step)
        return [0.0] * len(ctx.rollout)

    @hookimpl
    def state_dict(self):
        self._maybe_raise("state_dict", self.config.at_step)
        return {}


@dataclass
class BadRewardConfig:
    mode: str = "nan"  # nan | short | string | bool


class BadReward(Plugin):
    Config = BadRewardConfig

    @hookimpl
    def reward(self, ctx):
        n = len(ctx.rollout)
        last = {"nan": float("nan"), "string": "1.0", "bool": True}
        if self.config.mode in last:
            return [0.0] * (n - 1) + [last[self.config.mode]]
        return [0.0] * (n - 1)


class WrongArgument(Plugin):
    @hookimpl
    def reward(self, cxt):
        return None


@dataclass
class NeedsValueConfig:
    threshold: float = MISSING

    def __post_init__(self):  # what a plugin author naturally writes; the host reports it as a config error
        if not 0 <= self.threshold <= 1:
            raise ValueError(f"threshold must lie in [0, 1], not {self.threshold}")


class NeedsValue(Plugin):
    Config = NeedsValueConfig

    @hookimpl
    def post_step(self, ctx):
        pass


@dataclass
class PoolSteerConfig:
    category: str = ""  # from train_begin, draw only this category
    add_at: int = -1  # after this step: add two rows of a new category (one label-free) and draw only them
    retire_at: int = -1  # after this step: retire the rows of the last batch
    switch_at: int = -1  # after this step: switch to a dataset of three new rows
    bad_rows_at: int = -1  # after this step: add a row without a prompt


ADDED_ROWS = [
    {"prompt": "What is 2 + 2?\n", "answer": "4", "category": "added"},
    {"prompt": "What is 3 + 3?\n", "category": "added"},  # label-free: no answer
]
STAGE_ROWS = [{"prompt": f"What is {n} + 1?\n", "answer": str(n + 1), "category": "stage 1"} for n in (5, 6, 7)]


class PoolSteer(Plugin):
    """Steers the prompt pool at chosen steps and remembers what every batch drew: a resume must draw the same."""

    Config = PoolSteerConfig

    def __init__(self, config=None):
        super().__init__(config)
        self.drawn = []  # per step: the pool ids of the batch's groups
        self.categories = []  # per step: the batch's categories, one per group

    @hookimpl
    def train_begin(self, ctx):
        if self.config.category and ctx.step == 0:  # on resume the pool already holds what came after
            ctx.pool.set_category_weights({self.config.category: 1.0})

    @hookimpl
    def post_step(self, ctx):
        size = ctx.rollout.group_size
        self.drawn.append(ctx.pool.last_batch)
        self.categories.append(ctx.rollout.columns["category"][::size])
        if ctx.step == self.config.add_at:
            ctx.pool.add_rows(ADDED_ROWS)
            ctx.pool.set_category_weights({"added": 1.0})
        if ctx.step == self.config.retire_at:
            ctx.pool.retire(ctx.pool.last_batch)
        if ctx.step == self.config.switch_at:
            ctx.pool.switch_dataset(STAGE_ROWS)
        if ctx.step == self.config.bad_rows_at:
            ctx.pool.add_rows([{"question": "no prompt"}])

    @hookimpl
    def state_dict(self):
        return {"drawn": [list(d) for d in self.drawn], "categories": [list(c) for c in self.categories]}

    @hookimpl
    def load_state_dict(self, state):
        self.drawn = [list(d) for d in state["drawn"]]
        self.categories = [list(c) for c in state["categories"]]


@dataclass
class RestartPhaseConfig:
    at_step: int = 3
    learning_rate: float = 0.01


class RestartPhase(Plugin):
    """Keeps the starting weights, buffers every completion it sees, and at ``at_step`` restarts from the starting
    weights with a supervised phase on the buffer: snapshot, buffer and phase must all survive a resume."""

    Config = RestartPhaseConfig

    def __init__(self, config=None):
        super().__init__(config)
        self.prompt_ids, self.completion_ids = [], []

    @hookimpl
    def train_begin(self, ctx):
        if ctx.step == 0:
            ctx.update_snapshot("start", checkpoint=True)

    @hookimpl
    def post_step(self, ctx):
        self.prompt_ids.extend(ctx.rollout.prompt_ids)
        self.completion_ids.extend(ctx.rollout.completion_ids)
        if ctx.step == self.config.at_step:
            ctx.supervised_phase("restart", self.prompt_ids, self.completion_ids, restore="start",
                                 learning_rate=self.config.learning_rate)

    @hookimpl
    def state_dict(self):
        return {"prompt_ids": self.prompt_ids, "completion_ids": self.completion_ids}

    @hookimpl
    def load_state_dict(self, state):
        self.prompt_ids, self.completion_ids = state["prompt_ids"], state["completion_ids"]


@dataclass
class SnapshotReplayConfig:
    snapshot: str = "behaviour"  # taken of the policy when training begins, never moved
    max_new_tokens: int = 8


class SnapshotReplay(Plugin):
    """Each group's last row sampled from a snapshot of the starting policy, with its behaviour log-probs; the other
    rows sampled by the policy now. Records the advantages the advantage hooks saw and those the loss received."""

    Config = SnapshotReplayConfig

    def __init__(self, config=None):
        super().__init__(config)
        self.taken = False  # the snapshot, once taken, comes back from checkpoints (a resume keeps it)
        self.seen = {}  # step -> what the advantage stage saw: rows, behaviour log-probs, GRPO's advantages, weights
        self.in_loss = []  # per micro-batch row: (step, rollout row, advantages the loss received (T,))

    @hookimpl
    def train_begin(self, ctx):
        if not self.taken:
            ctx.update_snapshot(self.config.snapshot, checkpoint=True)
            self.taken = True

    @hookimpl
    def generate_rollout(self, prompts, ctx):
        size, sampling = ctx.group_size, {"max_new_tokens": self.config.max_new_tokens}
        fresh = ctx.generate(prompts, **sampling)
        stale_rows = list(range(size - 1, len(prompts), size))
        stale = ctx.generate([prompts[i] for i in stale_rows], model=self.config.snapshot, **sampling)
        scores = ctx.score([g.prompt_ids for g in stale], [g.completion_ids for g in stale],
                           model=self.config.snapshot, temperature=ctx.sampling_temperature)
        completions = [g.completion_ids for g in fresh]
        behaviour = [None] * len(prompts)
        for j, (row, generation) in enumerate(zip(stale_rows, stale)):
            completions[row] = generation.completion_ids
            behaviour[row] = scores.logprobs[j, : len(generation.completion_ids)].tolist()
        return Samples(completion_ids=completions, behaviour_logprobs=behaviour,
                       columns={"replay_row": list(range(len(prompts)))})

    @hookimpl
    def reshape_advantages(self, advantages, ctx):
        rollout = ctx.rollout
        self.seen[ctx.step] = {
            "prompt_ids": rollout.prompt_ids,
            "completion_ids": rollout.completion_ids,
            "behaviour": rollout.behaviour_logprobs,
            "advantages": advantages.tolist(),
            "weights": rollout.importance_weights.tolist(),
        }
        return advantages

    @hookimpl
    def loss_term(self, ctx):
        for i, row in enumerate(ctx.rollout.columns["replay_row"]):
            self.in_loss.append((ctx.step, row, ctx.advantages[i].detach().cpu().tolist()))
        return None

    @hookimpl
    def state_dict(self):
        return {"taken": self.taken}

    @hookimpl
    def load_state_dict(self, state):
        self.taken = state["taken"]


@dataclass
class ExperienceKeeperConfig:
    experience: ExperienceSettings = field(
        default_factory=lambda: ExperienceSettings(capacity=3, per_prompt=2, eviction="lowest_utility")
    )


class ExperienceKeeper(Plugin):
    """Keeps each group's row of highest total reward in an experience library after every step (its reward as its
    utility), and retrieves the records whose prompt is closest to the step's first: library state to checkpoint."""

    Config = ExperienceKeeperConfig

    def __init__(self, config=None):
        super().__init__(config)
        self.library = ExperienceLibrary(self.config.experience, "experience_keeper")
        self.found = []  # per step: the keys and scores retrieved

    @hookimpl
    def post_step(self, ctx):
        rollout = ctx.rollout
        total = sum(values.nan_to_num() for values in rollout.rewards.values())
        rows = [int(group * rollout.group_size + total.view(-1, rollout.group_size)[group].argmax())
                for group in range(rollout.num_groups)]
        for row in rows:
            self.library.add(Experience.of_row(rollout, row, ctx.step, utility=float(total[row])))
        self.found.append([[r.key, score] for r, score in self.library.search(rollout.prompts[0], k=3)])

    @hookimpl
    def state_dict(self):
        return {"library": self.library.state_dict(), "found": self.found}

    @hookimpl
    def load_state_dict(self, state):
        self.library.load_state_dict(state["library"])
        self.found = state["found"]

    def summary(self) -> dict:
        return {"records": [[r.key, r.prompt_ids, r.completion_ids, r.rewards, r.utility] for r in self.library],
                "found": self.found}


@dataclass
class SandboxRewardConfig:
    program: str = "import sys\nprint(len(sys.stdin.read()))"


class SandboxReward(Plugin):
    """Runs ``program`` in the run's sandbox on each completion (its stdin): 1 when the run ran to its end and
    printed the completion's length. Keeps each step's settings and results for the test to read."""

    Config = SandboxRewardConfig
    activity = "completions whose program ran to its end"

    def __init__(self, config=None):
        super().__init__(config)
        self.settings, self.results = [], []

    def check_run(self, run):
        from stackrl.blocks.sandbox import check_isolation

        check_isolation(run.sandbox)

    @hookimpl
    def reward(self, ctx):
        from stackrl.blocks.sandbox import Sandbox

        completions = ctx.rollout.completions
        results = Sandbox.of(ctx).run_many([self.config.program] * len(completions), completions)
        self.settings.append(ctx.sandbox)
        self.results.append(results)
        ctx.acted(sum(result.completed for result in results), of=len(results))
        return [float(result.ok and result.stdout.strip() == str(len(text))) for result, text in zip(results, completions)]
