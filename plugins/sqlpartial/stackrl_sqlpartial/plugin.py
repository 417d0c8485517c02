"""Reasoning-SQL's partial rewards for text-to-SQL GRPO: execution match plus graded terms (syntax, schema
linking, n-gram similarity, format), so that a query that is nearly right earns more than one that is not.

Paper: Pourreza, Talaei, Sun, Wan, Li, Mirhoseini, Saberi, Arik, "Reasoning-SQL: Reinforcement Learning with SQL
Tailored Partial Rewards for Reasoning-Enhanced Text-to-SQL", arXiv 2503.23157. Code followed:
github.com/MohammadrezaPourreza/RLForSQL (grpo_training_llm_partial_reward.py, utils/database_manager.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import stackrl
from stackrl.blocks.sandbox import analyze
from stackrl_sqlpartial import terms
from stackrl_sqlpartial.databases import Databases


@dataclass
class SqlpartialConfig:
    # The dataset columns: the script that builds a problem's tables and the reference query (the built-in SQL
    # task's `setup` and `solution`, docs/roles.md). Rows without them are not scored.
    setup_column: str = "setup"
    solution_column: str = "solution"
    # Each term's weight in the reward (the component `sqlpartial`, itself weighted by rewards.sqlpartial). The
    # authors' code gives execution 3 and the partial terms 1 each; 0 switches a term off.
    execution_weight: float = 3.0
    syntax_weight: float = 1.0
    schema_weight: float = 1.0
    ngram_weight: float = 1.0
    format_weight: float = 1.0
    # Schema linking: "jaccard" over the tables and columns named (the paper), or "recall" of the reference's
    # (the authors' code: extra tables cost nothing).
    schema_mode: str = "jaccard"
    ngram: int = 2  # n of the n-gram similarity (bigrams)
    timeout_s: float = 5.0  # a query is stopped after this long (SqlDatabase)

    def __post_init__(self):
        weights = {name: getattr(self, f"{name}_weight") for name in terms.TERMS}
        for name, weight in weights.items():
            if weight < 0:
                raise stackrl.ConfigError(f"sqlpartial.{name}_weight: must be non-negative, not {weight}")
        if not any(weights.values()):
            raise stackrl.ConfigError("sqlpartial.execution_weight: every term's weight is 0; nothing would be scored")
        if self.schema_mode not in ("jaccard", "recall"):
            raise stackrl.ConfigError(f"sqlpartial.schema_mode: must be one of jaccard, recall, not '{self.schema_mode}'")
        if self.ngram < 1:
            raise stackrl.ConfigError(f"sqlpartial.ngram: must be at least 1, not {self.ngram}")
        if self.timeout_s <= 0:
            raise stackrl.ConfigError(f"sqlpartial.timeout_s: must be positive, not {self.timeout_s}")


class Sqlpartial(stackrl.Plugin):
    """A reward: each completion's query runs on its problem's tables (read-only, sandbox block) and earns the
    weighted sum of the partial terms (stackrl_sqlpartial.terms) against the reference query."""

    Config = SqlpartialConfig
    activity = "completions had a problem's tables and reference query to be scored against"

    def __init__(self, config=None):
        super().__init__(config)
        self.databases = Databases(self.config.timeout_s)

    def check_run(self, run):
        missing = [c for c in (self.config.setup_column, self.config.solution_column)
                   if run.columns is not None and c not in run.columns]
        if missing:
            return [f"sqlpartial: the training data has no column {', '.join(map(repr, missing))}: no row will be "
                    "scored (data.source: sql has them)"]
        return None

    def weights(self) -> dict[str, float]:
        return {name: getattr(self.config, f"{name}_weight") for name in terms.TERMS}

    def score(self, completion: str, setup: str, solution: str) -> dict[str, float] | None:
        """Each term of ``completion`` against the reference query ``solution`` on the tables ``setup`` builds;
        None when the reference itself fails there."""
        reference = self.databases.reference(setup, solution)
        if not reference.ok:
            return None
        query = terms.query_of(completion)
        result = self.databases.run(setup, query)
        return {
            "execution": terms.execution(result, reference),
            "syntax": terms.syntax(result),
            "schema": terms.schema_linking(analyze(query), analyze(solution), self.config.schema_mode),
            "ngram": terms.ngram_similarity(query, solution, self.config.ngram),
            "format": terms.well_formed(completion),
        }

    @stackrl.hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        n = len(rollout)
        setups = rollout.columns.get(self.config.setup_column, [None] * n)
        solutions = rollout.columns.get(self.config.solution_column, [None] * n)
        weights = self.weights()
        rewards, scored = [], []
        for completion, setup, solution in zip(rollout.completions, setups, solutions):
            found = self.score(completion, setup, solution) if setup and solution else None
            rewards.append(None if found is None else sum(weights[t] * found[t] for t in terms.TERMS))
            if found is not None:
                scored.append(found)
        for term in terms.TERMS:
            if scored:
                ctx.log(term, sum(s[term] for s in scored) / len(scored))
        ctx.acted(len(scored), of=n, hint="sqlpartial.setup_column / solution_column: the rows need a problem's "
                  "tables and reference query (data.source: sql)")
        return rewards

    @stackrl.hookimpl
    def train_end(self, ctx):
        self.databases.close()
