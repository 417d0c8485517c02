"""eva's creator on a real prompt pool, its post_step called as the host calls it, the groups' rewards and the
writing of variants scripted: the regrets kept, the parents of a round (the rows of highest regret since the last
round), the variants added under their parents with their verified answers and weighed to their share of the
draws, what it acts on, and its state through a checkpoint. The policy writing them: test_eva_mechanism.py."""

import io
from types import SimpleNamespace

import pytest
import torch
from datasets import Dataset

from stackrl.context import Rollout
from stackrl.policy import Generation
from stackrl.pool import POOL_ROW, Pool, PoolAccess
from stackrl_eva import Eva, EvaConfig

QUESTIONS = ["What is 2 + 3?\n", "What is (4 + 5) * 2?\n", "What is 7 - 1?\n", "What is 8 + 9?\n"]


def _pool():
    columns = {"question": QUESTIONS, "answer": ["5", "18", "6", "17"], "prompt": QUESTIONS, POOL_ROW: [0, 1, 2, 3]}
    return Pool(Dataset.from_dict(columns), seed=0, answer_column="answer",
                format_prompt=lambda row: row["question"])


class Writer:
    """Answers request ``n`` of the round after ``step`` with "What is <100 step + n> + 1?" (and a second problem,
    which is not read); keeps the requests."""

    def __init__(self):
        self.requests = {}

    def __call__(self, ctx, prompts, **sampling):
        self.requests[ctx.step] = list(prompts)
        return [Generation([], [], f" What is {100 * ctx.step + n} + 1?\n3. What is 1 + 1?\n")
                for n in range(len(prompts))]


def _plugin(**settings):
    plugin = Eva(EvaConfig(**{"select": "top", "select_frac": 0.5, "variants": 2, "every_steps": 2,
                              "label": "arithmetic", **settings}))
    plugin.name = "eva"
    plugin.generate = Writer()
    return plugin


def _step(plugin, pool, step, rows, rewards, acted=None, logged=None):
    """Record a batch of ``rows`` (groups of ``len(rewards[0])``) and call post_step on it, as the host would."""
    size = len(rewards[0])
    prompts = [pool.row(row)["prompt"] for row in rows for _ in range(size)]
    rollout = Rollout(prompts=prompts, completions=[""] * len(prompts), prompt_ids=[[1]] * len(prompts),
                      completion_ids=[[2]] * len(prompts), columns={}, group_size=size,
                      rewards={"exact_match": torch.tensor([r for group in rewards for r in group])})
    pool.record(rows, [None] * len(rows), [0.0] * len(rows))
    ctx = SimpleNamespace(step=step, pool=PoolAccess(pool, "eva", step), rollout=rollout,
                          log=lambda name, value: (logged if logged is not None else {}).__setitem__(name, value),
                          acted=lambda n, of, hint=None: (acted if acted is not None else []).append((n, of)))
    plugin.post_step(ctx)


def test_a_round_evolves_the_rows_of_highest_regret_into_verified_variants():
    pool, plugin, acted, logged = _pool(), _plugin(), [], {}
    # Regrets (max - min): row 0 -> 0 then 1 (its latest), row 1 -> 0.5, row 2 -> 0, row 3 -> 0.25; nan: unscored.
    _step(plugin, pool, 1, [0, 1], [[1.0, 1.0, 1.0, 1.0], [0.0, 0.5, 0.5, 0.0]], acted)
    assert plugin.regrets == {0: 0.0, 1: 0.5} and not plugin.chosen and len(pool) == 4
    _step(plugin, pool, 2, [0, 2, 3], [[0.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.25, 0.0, 0.0, 0.0]], acted,
          logged)
    assert acted == [(2, 2), (3, 3)]
    # 4 rows scored: ceil(0.5 x 4) = 2 parents, the highest: rows 0 (1.0) and 1 (0.5).
    assert plugin.chosen == [0, 1] and plugin.regrets == {}
    requests = plugin.generate.requests[2]
    assert [r.splitlines()[1] for r in requests] == ["1. What is 2 + 3?"] * 2 + ["1. What is (4 + 5) * 2?"] * 2
    assert plugin.parents == {4: 0, 5: 0, 6: 1, 7: 1}
    assert [pool.row(i)["question"] for i in range(4, 8)] == [f"What is {200 + n} + 1?\n" for n in range(4)]
    assert [pool.row(i)["answer"] for i in range(4, 8)] == [str(201 + n) for n in range(4)]
    assert [pool.row(i)["prompt"] for i in range(4, 8)] == [pool.row(i)["question"] for i in range(4, 8)]
    assert logged["written"] == 4 and logged["added"] == 4 and logged["parents"] == 2
    assert logged["parent_regret"] == pytest.approx(0.75)
    # The 4 variants weigh 0.8 of the draws against the 4 other rows: 4 each.
    assert [pool.stats(i).weight for i in range(8)] == pytest.approx([1.0] * 4 + [4.0] * 4)


def test_unscored_groups_and_steps_between_rounds_choose_nothing():
    pool, plugin, acted = _pool(), _plugin(every_steps=1), []
    _step(plugin, pool, 1, [0, 1], [[float("nan")] * 2, [1.0, 0.0]], acted)
    assert acted == [(1, 2)] and plugin.chosen == [1]  # only row 1 has a regret; ceil(0.5 x 1) = 1
    _step(plugin, pool, 2, [2, 3], [[1.0, 1.0], [0.0, 0.0]], acted)
    assert plugin.chosen == []  # no row more informative than another: none evolved
    # A rollout used again for a second optimizer step (steps_per_generation > 1) is not read again.
    ctx = SimpleNamespace(step=3, pool=PoolAccess(pool, "eva", 3), rollout=None, log=lambda *_: None,
                          acted=lambda n, of, hint=None: acted.append((n, of)))
    plugin.post_step(ctx)
    assert acted[-1] == (2, 2) and plugin.regrets == {}


def test_the_state_carries_the_regrets_the_lineage_and_the_draw():
    pool, plugin = _pool(), _plugin(select="weighted", every_steps=2)
    _step(plugin, pool, 1, [0, 1], [[1.0, 0.0], [0.0, 0.5]])
    state = plugin.state_dict()
    restored = _plugin(select="weighted", every_steps=2)
    saved = io.BytesIO()
    torch.save(state, saved)  # as a checkpoint stores it, and loads it back
    saved.seek(0)
    restored.load_state_dict(torch.load(saved, weights_only=True))
    assert restored.regrets == plugin.regrets and restored.batches_seen == plugin.batches_seen
    twin = _pool()
    twin.load_state_dict(pool.state_dict())
    _step(plugin, pool, 2, [2, 3], [[1.0, 0.5], [0.0, 0.25]])
    _step(restored, twin, 2, [2, 3], [[1.0, 0.5], [0.0, 0.25]])
    assert plugin.chosen == restored.chosen and plugin.parents == restored.parents
    assert [pool.row(i) for i in range(len(pool))] == [twin.row(i) for i in range(len(twin))]
