"""TriPlay-RL: one policy in three roles, the attacker, the defender and the evaluator, trained in turn.

On the built-in task the attacker poses a question (a reply to one topic row, the pose request of
``stackrl.blocks.selfplay``), the defender solves it (the solve role) and the evaluator checks a solution (the judge
role, ``stackrl.tasks.judge_prompt``). The prompt pool draws one role's rows at a time, ``phase_steps`` steps each,
attacker -> defender -> evaluator, as the paper updates one role per phase.

- An attacker row's question, if it is one of the task's (the semantic term), is answered ``defender_samples``
  times by the policy; each reply is graded by the policy's evaluator role (or the verifier) as unsafe (wrong),
  refusal (no answer) or useful (right). Its reward is the mean ``attack_rewards`` of the grades, plus
  ``semantic_reward``, less ``diversity_weight`` times the highest ROUGE-L of the question to the attack success
  pool (the questions that made the defender fail at earlier steps). Every task question posed joins the pool as a
  defender row, with the verifier's answer.
- A defender row's reply is graded the same way; its reward is ``defend_rewards`` of the grade.
- An evaluator row shows a defender reply of an earlier step in the judge format; its reward is 1 when its verdict
  agrees with the verifier's label of that reply (the paper: the experts' majority vote), else 0.
"""

from __future__ import annotations

from typing import Optional

from stackrl import Plugin, PluginError, hookimpl
from stackrl.answers import equivalent, extractor_of
from stackrl.blocks.selfinstruct import SimilarityIndex
from stackrl.blocks.selfplay import QuestionPrompts, posed_question, topic_prompt
from stackrl.pool import CATEGORY_COLUMN
from stackrl.tasks import judge_prompt, parse_verdict
from stackrl.tasks.arithmetic import read_problem

from stackrl_triplay.config import Grader, TriPlayConfig
from stackrl_triplay.grades import Grade, attack_reward, attacker_reward, evaluator_reward, grade

ATTACK, DEFEND, EVALUATE = "triplay/attack", "triplay/defend", "triplay/evaluate"
ROLES = (ATTACK, DEFEND, EVALUATE)  # the phases, in the paper's order: Red, Blue, Eval
ANSWER_COLUMN = "triplay_answer"  # a defender row: the verifier's answer to its question
RIGHT_COLUMN = "triplay_right"  # an evaluator row: whether the reply it shows is right


class TriPlay(Plugin):
    """TriPlay-RL (Tan et al., 2026, arXiv 2601.18292) on the pool and the reward hook."""

    Config = TriPlayConfig
    activity = "completions it scored (an attack the defender answered, a defence graded, or a verdict checked)"

    def __init__(self, config=None):
        super().__init__(config)
        self.prompts: Optional[QuestionPrompts] = None  # the defender's prompt format, learnt from the pool
        self.successes: list[str] = []  # the attack success pool: questions a defender reply was graded unsafe on
        self._index = SimilarityIndex()
        # Filled in the reward stage, emptied by the post_step that follows (no checkpoint holds any).
        self.pending_questions: list[tuple[str, str]] = []  # (question, the verifier's answer)
        self.pending_checks: list[tuple[str, bool]] = []  # (judge prompt, whether the reply is right)
        self.pending_successes: list[str] = []

    def check_run(self, run):
        run.need_plain_text("triplay", "the evaluator's prompts extend the question as plain text in the built-in "
                            "task's judge format (docs/roles.md)")

    def phase(self, step: int) -> str:
        """The role whose rows are drawn at the step after ``step`` completed steps."""
        return ROLES[(step // self.config.phase_steps) % len(ROLES)]

    # -- the pool ------------------------------------------------------------------------------------------------

    @hookimpl
    def train_begin(self, ctx):
        pool, config = self._pool(ctx), self.config
        if not [r for r in range(len(pool)) if pool.stats(r).category == ATTACK]:
            pool.add_rows([{"prompt": topic_prompt(pool, config.topic, config.topic_examples, config.problem_column),
                            CATEGORY_COLUMN: ATTACK}])
        self.prompts = QuestionPrompts(pool, config.problem_column)
        self._steer(pool, ctx.step, ctx)

    @hookimpl
    def post_step(self, ctx):
        pool, column = self._pool(ctx), self.config.problem_column
        pool.retire([row for row in pool.last_batch if pool.stats(row).category in (DEFEND, EVALUATE)
                     and not pool.stats(row).retired])
        waiting = {pool.row(r)[column] for r in pool.active_rows() if pool.stats(r).category == DEFEND}
        rows = []
        for question, answer in self.pending_questions:
            text = self.prompts.text(question)
            if text not in waiting:
                waiting.add(text)
                rows.append(pool.format_row({column: text, CATEGORY_COLUMN: DEFEND, ANSWER_COLUMN: answer}))
        rows += [{"prompt": prompt, CATEGORY_COLUMN: EVALUATE, RIGHT_COLUMN: right}
                 for prompt, right in self.pending_checks]
        ctx.log("added", len(pool.add_rows(rows)) if rows else 0)
        for question in self.pending_successes:
            self.successes.append(question)
            self._index.add(question)
        ctx.log("success_pool", len(self.successes))
        self.pending_questions, self.pending_checks, self.pending_successes = [], [], []
        self._steer(pool, ctx.step, ctx)

    def _steer(self, pool, step: int, ctx) -> None:
        active = {pool.stats(r).category for r in pool.active_rows() if pool.stats(r).weight > 0}
        if ATTACK not in active:  # another plugin retired or muted the topic row (a switch of data set): let go
            if pool.category_weights and set(pool.category_weights) <= set(ROLES):
                pool.set_category_weights(None)
            return
        role = self.phase(step)
        if role not in active:
            role = ATTACK  # nothing of the role waits yet (the first phases): the attacker plays
        ctx.log("phase", float(ROLES.index(role)))
        if pool.category_weights != {role: 1.0}:
            pool.set_category_weights({role: 1.0})

    def _pool(self, ctx):
        if ctx.pool is None:
            raise PluginError("triplay needs the prompt pool, which this run lacks (its training data is not a "
                              "map-style dataset)")
        return ctx.pool

    # -- the reward stage ------------------------------------------------------------------------------------------

    @hookimpl
    def reward(self, ctx):
        rollout = ctx.rollout
        read = extractor_of(self.config, "triplay", self.config.answer_extractor or rollout.answer_format)
        roles = rollout.columns.get(CATEGORY_COLUMN, [None] * len(rollout))
        rewards: list[Optional[float]] = [None] * len(rollout)
        scored = self._attack(ctx, [i for i, r in enumerate(roles) if r == ATTACK], read, rewards)
        scored += self._defend(ctx, [i for i, r in enumerate(roles) if r == DEFEND], read, rewards)
        scored += self._evaluate(ctx, [i for i, r in enumerate(roles) if r == EVALUATE], rewards)
        ctx.acted(scored, of=len(rollout), hint=None if scored or not ctx.training else
                  "triplay.answer_extractor: no defender reply had an answer, or no attack posed a task question")
        return rewards

    def grade(self, ctx, prompts: list[str], replies: list[str], read, truths: list[str],
              role: str = "defend") -> list[Optional[Grade]]:
        """Each defender reply's grade: a refusal without an answer, else right or wrong as the grader finds it
        (the evaluator role's verdict, greedy, in one ``ctx.generate`` call; or the verifier's answer ``truths``).
        Logs ``<role>/grader_agreement``, how often the grader agrees with the verifier on the answered replies."""
        answers = [read(reply) for reply in replies]
        truly = [a is not None and equivalent(a, t, self.config.math_verify) for a, t in zip(answers, truths)]
        answered = [i for i, a in enumerate(answers) if a is not None]
        if Grader(self.config.grader) is Grader.verifier:
            judged = {i: truly[i] for i in answered}
        else:
            checks = ctx.generate([judge_prompt(prompts[i], replies[i]) for i in answered], do_sample=False,
                                  max_new_tokens=self.config.judge_max_new_tokens)
            judged = {i: parse_verdict(check.text) for i, check in zip(answered, checks)}
        if answered:
            ctx.log(f"{role}/grader_agreement", sum(judged[i] == truly[i] for i in answered) / len(answered))
        return [grade(answers[i], judged.get(i)) for i in range(len(replies))]

    def _attack(self, ctx, rows: list[int], read, rewards: list) -> int:
        if not rows:
            return 0
        config = self.config
        if self.prompts is None:
            raise PluginError("triplay: an attacker row was drawn before train_begin learnt the run's prompt format")
        questions = {i: posed_question(ctx.rollout.completions[i], config.numbered) for i in rows}
        problems = {i: read_problem(q) if q else None for i, q in questions.items()}
        attacked = [i for i in rows if problems[i] is not None]
        k = config.defender_samples
        prompts = [self.prompts(questions[i]) for i in attacked for _ in range(k)]
        replies = [g.text for g in ctx.generate(prompts, **config.defender_sampling)] if prompts else []
        grades = self.grade(ctx, prompts, replies, read, [problems[i]["answer"] for i in attacked for _ in range(k)],
                            role="attack")
        scored, successes, penalties = 0, 0, []
        for n, i in enumerate(attacked):
            mine = grades[n * k:(n + 1) * k]
            attack = attack_reward(mine, config.attack_rewards)
            similarity = self._index.closest(questions[i]) if len(self._index) else 0.0
            penalties.append(config.diversity_weight * similarity)
            rewards[i] = attacker_reward(attack, True, similarity, config.semantic_reward, config.diversity_weight)
            scored += attack is not None
            if Grade.unsafe in mine:
                successes += 1
                if ctx.training:
                    self.pending_successes.append(questions[i])
            if ctx.training:
                self.pending_questions.append((questions[i], problems[i]["answer"]))
        for i in rows:
            if problems[i] is None:  # no task question: nothing to attack with, and no semantic term
                similarity = self._index.closest(questions[i]) if questions[i] and len(self._index) else 0.0
                rewards[i] = attacker_reward(None, False, similarity, config.semantic_reward, config.diversity_weight)
        ctx.log("attack/semantic", len(attacked) / len(rows))
        if attacked:
            ctx.log("attack/success", successes / len(attacked))
            ctx.log("attack/penalty", sum(penalties) / len(penalties))
        graded = [g for g in grades if g is not None]
        if graded:
            ctx.log("attack/unsafe", sum(g is Grade.unsafe for g in graded) / len(graded))
        return scored

    def _defend(self, ctx, rows: list[int], read, rewards: list) -> int:
        if not rows:
            return 0
        rollout, config = ctx.rollout, self.config
        truths = rollout.columns.get(ANSWER_COLUMN, [None] * len(rollout))
        prompts = [rollout.prompts[i] for i in rows]
        if not all(isinstance(p, str) for p in prompts) or any(truths[i] is None for i in rows):
            raise PluginError(f"triplay: a defender row lacks its text prompt or its '{ANSWER_COLUMN}' column")
        replies = [rollout.completions[i] for i in rows]
        grades = self.grade(ctx, prompts, replies, read, [truths[i] for i in rows])
        for i, g in zip(rows, grades):
            rewards[i] = None if g is None else float(config.defend_rewards[g.value])
        graded = [g for g in grades if g is not None]
        if graded:
            ctx.log("defend/useful", sum(g is Grade.useful for g in graded) / len(graded))
        if ctx.training and config.evaluator_rows:
            self.pending_checks.extend(self._checks(rows, prompts, replies, read, [truths[i] for i in rows],
                                                    rollout.group_size))
        return len(graded)

    def _checks(self, rows, prompts, replies, read, truths, size: int) -> list[tuple[str, bool]]:
        """Of each defender group, up to ``evaluator_rows`` replies with an answer, a wrong one and a right one in
        turn (wrong first), as judge prompts with the verifier's label."""
        checks = []
        for start in range(0, len(rows), size):
            right, wrong = [], []
            for n in range(start, min(start + size, len(rows))):
                answer = read(replies[n])
                if answer is not None:
                    is_right = equivalent(answer, truths[n], self.config.math_verify)
                    (right if is_right else wrong).append((judge_prompt(prompts[n], replies[n]), is_right))
            turns = [item for pair in zip(wrong, right) for item in pair]
            turns += wrong[len(right):] + right[len(wrong):]
            checks.extend(turns[:self.config.evaluator_rows])
        return checks

    def _evaluate(self, ctx, rows: list[int], rewards: list) -> int:
        if not rows:
            return 0
        truths = ctx.rollout.columns.get(RIGHT_COLUMN, [None] * len(ctx.rollout))
        verdicts = []
        for i in rows:
            if truths[i] is None:
                raise PluginError(f"triplay: an evaluator row lacks its '{RIGHT_COLUMN}' column")
            verdicts.append(parse_verdict(ctx.rollout.completions[i]))
            rewards[i] = evaluator_reward(verdicts[-1], bool(truths[i]))
        ctx.log("evaluate/agreement", sum(rewards[i] for i in rows) / len(rows))
        ctx.log("evaluate/verdicts", sum(v is not None for v in verdicts) / len(rows))
        return sum(v is not None for v in verdicts)

    # -- state ---------------------------------------------------------------------------------------------------

    @hookimpl
    def state_dict(self):
        return {"successes": list(self.successes)}

    @hookimpl
    def load_state_dict(self, state):
        self.successes = list(state["successes"])
        self._index = SimilarityIndex(self.successes)
