"""CSC-SQL: corrective self-consistency for text-to-SQL, trained by GRPO on execution match.

Paper: "CSC-SQL: Corrective Self-Consistency in Text-to-SQL via Reinforcement Learning", Lei Sheng and Shuai-Shuai
Xu, arXiv 2505.13271. Code followed: github.com/CycloneBoy/csc_sql@5673d5b (inference only: the vote in
``infer_utils.major_voting2``, the merge prompt in ``CommonUtils.build_merge_generate_prompt``).

Each sampled query is run on its problem's tables (``stackrl.blocks.sandbox.SqlDatabase``, read-only); its reward
is 1 when its rows are the reference query's (``same_rows``), else 0: the generator's GRPO reward. Each group's
queries are grouped by what they return (``consistency``); the first query of the largest group is the
self-consistency answer, and with ``revise`` the two largest groups' queries and their rows go to the policy as a
merge reviser (``revision``), whose prompts join the prompt pool so that GRPO trains the reviser on the same reward.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

import stackrl
from stackrl.blocks.sandbox import SqlDatabase, SqlResult, same_rows
from stackrl_cscsql.consistency import candidates, execution_groups, voted
from stackrl_cscsql.revision import is_reviser_prompt, reviser_prompt


@dataclass
class CscsqlConfig:
    """The config section ``cscsql:``."""

    setup_column: str = "setup"  # the column of the script that builds a problem's tables (the SQL task's)
    solution_column: str = "solution"  # the column of the reference query, whose rows a query must return
    candidates: int = 2  # the largest execution groups whose queries the reviser sees (the paper's top-2)
    revise: bool = False  # ask the policy to merge the candidates and add those prompts to the pool (the paper: true)
    max_result_rows: int = 5  # rows of each draft's result shown to the reviser
    revise_temperature: float = 0.0  # the reviser's sampling temperature (0: greedy), for its logged accuracy
    timeout_s: float = 5.0  # a query's time limit on the database

    def __post_init__(self):
        if self.candidates < 2:
            raise stackrl.ConfigError("cscsql.candidates: must be at least 2 (a merge needs two drafts)")
        if self.max_result_rows < 1:
            raise stackrl.ConfigError("cscsql.max_result_rows: must be at least 1")
        if not self.timeout_s > 0:
            raise stackrl.ConfigError("cscsql.timeout_s: must be positive")
        if self.revise_temperature < 0:
            raise stackrl.ConfigError("cscsql.revise_temperature: must be at least 0")


class Databases:
    """One read-only SQLite file per distinct setup script, built on first use in a private folder."""

    def __init__(self, timeout_s: float, keep: int = 512):
        self.timeout_s, self.keep = timeout_s, keep
        self._folder = tempfile.TemporaryDirectory(prefix="cscsql-")
        self._open: dict[str, SqlDatabase] = {}

    def run(self, setup: str, query: str) -> SqlResult:
        name = hashlib.sha256(setup.encode()).hexdigest()[:24]
        if name not in self._open:
            if len(self._open) >= self.keep:
                for database in self._open.values():
                    database.close()
                self._open.clear()
            path = Path(self._folder.name) / f"{name}.sqlite"
            self._open[name] = (SqlDatabase(path, timeout_s=self.timeout_s) if path.exists()
                                else SqlDatabase.build(path, setup, timeout_s=self.timeout_s))
        return self._open[name].execute(query.strip())


class Cscsql(stackrl.Plugin):
    """Rewards each SQL completion by execution match, votes each group's queries by their results, and (with
    ``revise``) poses the merge of the two largest groups' queries to the policy as new training prompts."""

    Config = CscsqlConfig
    activity = "completions were queries on a problem's tables that ran"

    def __init__(self, config=None):
        super().__init__(config)
        self.databases = Databases(self.config.timeout_s)
        self.pending: list[dict] = []  # reviser rows made in the reward stage, added to the pool in post_step
        self.last_groups: list[list[tuple[int, ...]]] = []  # the last reward stage's groups, per prompt (to inspect)

    def check_run(self, run):
        if self.config.revise:
            run.need_plain_text("cscsql.revise", "a merge prompt puts the drafts before the SQL task's marker, in the "
                                "prompt's text")

    @stackrl.hookimpl
    def reward(self, ctx):
        rollout, config = ctx.rollout, self.config
        setups = rollout.columns.get(config.setup_column)
        solutions = rollout.columns.get(config.solution_column)
        if setups is None or solutions is None:
            ctx.acted(0, of=len(rollout), hint=f"cscsql.setup_column {config.setup_column!r} or "
                      f"cscsql.solution_column {config.solution_column!r} is no column (data.source: sql has both)")
            return [None] * len(rollout)
        rewards, ran, sampled, votes, covered, revisions = [], 0, [], [], [], []
        self.last_groups = []
        size = rollout.group_size
        for start in range(0, len(rollout), size):
            setup, solution = setups[start], solutions[start]
            if not setup or not solution:
                rewards += [None] * size
                continue
            reference = self.databases.run(setup, solution)
            results = [self.databases.run(setup, text) for text in rollout.completions[start:start + size]]
            right = [same_rows(result, reference) for result in results]
            groups = execution_groups(results)
            self.last_groups.append([group.members for group in groups])
            rewards += [float(r) for r in right]
            ran += sum(result.ok for result in results)
            sampled.append(sum(right) / size)
            votes.append(float(right[voted(groups)]))
            drafts = candidates(groups, config.candidates)
            covered.append(float(any(right[i] for i in drafts)))
            if config.revise and len(drafts) >= 2 and ctx.training and not is_reviser_prompt(rollout.prompts[start]):
                prompt = reviser_prompt(rollout.prompts[start], [rollout.completions[i] for i in drafts],
                                        [results[i] for i in drafts], config.max_result_rows)
                revisions.append((prompt, setup, solution, reference, start))
        ctx.acted(ran, of=len(rollout))
        if sampled:
            ctx.log("sample_accuracy", sum(sampled) / len(sampled))
            ctx.log("vote_accuracy", sum(votes) / len(votes))
            ctx.log("candidates_hold_right", sum(covered) / len(covered))
        if revisions:
            self._revise(ctx, revisions)
        return rewards

    def _revise(self, ctx, revisions):
        """The policy as merge reviser: its accuracy on this step's merge prompts is logged, and the prompts are
        kept to join the pool as training rows (the reviser's GRPO, on the same execution reward)."""
        sampling = ({"do_sample": False} if self.config.revise_temperature == 0
                    else {"do_sample": True, "temperature": self.config.revise_temperature})
        replies = ctx.generate([prompt for prompt, *_ in revisions], **sampling)
        right = [same_rows(self.databases.run(setup, reply.text), reference)
                 for reply, (_, setup, _, reference, _) in zip(replies, revisions)]
        ctx.log("revised_accuracy", sum(right) / len(right))
        ctx.log("revised_groups", float(len(revisions)))
        columns = ctx.rollout.columns
        for prompt, _, _, _, start in revisions:
            row = {name: values[start] for name, values in columns.items()}
            self.pending.append({**row, "prompt": prompt})

    @stackrl.hookimpl
    def post_step(self, ctx):
        rows, self.pending = self.pending, []
        if rows and ctx.pool is not None:
            ctx.pool.add_rows(rows)
            ctx.log("reviser_rows_added", float(len(rows)))
