"""Measuring the built-in task's skills: solving, judging and repairing (:mod:`stackrl.tasks.roles`).

The figures are computed from generated texts, so the same code serves ``stackrl eval`` (``eval.skill``) and the
script that makes the built-in models (:mod:`stackrl.tasks.pretrain`); generating is left to the caller.

- judge: every problem is judged twice, on its solution and on a slipped copy (:func:`~stackrl.tasks.roles.slip`).
  ``balanced_accuracy`` is the mean of the share of right attempts judged correct (``right_judged_correct``) and
  of wrong ones judged wrong (``wrong_judged_wrong``); a reply without a verdict is a miss either way.
- repair: the model's own first attempts are retried with :func:`~stackrl.tasks.roles.retry_prompt`. ``fix`` is the
  share of wrong first attempts whose retry is right, ``keep`` the share of right ones whose retry stays right.
  The same figures after a check of the attempt (:func:`~stackrl.tasks.roles.checked_retry_prompt`) measure
  retrying after a critique.
- debate: a retry after two of the model's own attempts; ``given_a_right`` is the share of replies that are right
  where at least one attempt shown is, beside ``copy_baseline``, what copying a shown attempt at random scores there.
- pose: the problems written in reply to :func:`~stackrl.tasks.posing.request_text` requests, read with
  :func:`~stackrl.tasks.arithmetic.read_problem`: the shares that are the task's questions, of one of its
  categories, distinct, and not among the examples shown.
- corrupt: each problem's solution shown after :data:`~stackrl.tasks.roles.CORRUPT_TEMPLATE`; ``one_wrong`` is the
  share of replies that are a solution of the question's chain with exactly one wrong line
  (:func:`~stackrl.tasks.roles.wrong_lines`), ``judge_missed`` the share of those a judge reply does not call wrong.
- transition: every step of every problem, forward (state and action -> next state) and inverse (state and next
  state -> action) (:mod:`stackrl.tasks.transitions`); exact-match accuracy of each.
- decompose: decompositions of each question (:mod:`stackrl.tasks.decomposition`): the shares that are well formed,
  that plant a result, and that are the faithful one; the solver's accuracy from the faithful decomposition, from
  the planted one, and from the decomposer's own (the pipeline's end accuracy).
"""

from __future__ import annotations

import random

from stackrl.tasks.posing import parse_problems, request_text
from stackrl.tasks.roles import checked_retry_prompt, judge_prompt, parse_verdict, retry_prompt, slip

__all__ = [
    "ROLE_SKILLS",
    "SKILLS",
    "corrupt_figures",
    "corrupt_prompts",
    "decompose_figures",
    "decompose_prompts",
    "transition_figures",
    "transition_prompts",
    "debate_figures",
    "debate_prompts",
    "judge_figures",
    "judge_prompts",
    "measure_role",
    "pose_figures",
    "pose_requests",
    "recheck_prompts",
    "repair_figures",
    "repair_prompts",
]

SKILLS = ("solve", "judge", "repair", "recheck", "debate", "pose", "corrupt", "transition", "decompose")


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def judge_prompts(prompts: list[str], solutions: list[str], seed: int = 0) -> list[str]:
    """Two judge prompts per problem: first every problem with its solution, then every one with a slipped copy
    (slips drawn from ``seed``)."""
    rng = random.Random(f"stackrl.skills.judge/{seed}")
    slipped = [slip(solution, rng) for solution in solutions]
    return [judge_prompt(p, a) for p, a in zip(prompts + prompts, solutions + slipped)]


def judge_figures(replies: list[str], categories: list[str] | None = None) -> dict:
    """Verdict figures of the replies to :func:`judge_prompts` (in its order), overall and by category."""
    n = len(replies) // 2
    verdicts = [parse_verdict(reply) for reply in replies]
    right = [v is True for v in verdicts[:n]]
    wrong = [v is False for v in verdicts[n:]]

    def figures(rows) -> dict:
        on_right, on_wrong = _mean(right[i] for i in rows), _mean(wrong[i] for i in rows)
        return {
            "balanced_accuracy": (on_right + on_wrong) / 2,
            "right_judged_correct": on_right,
            "wrong_judged_wrong": on_wrong,
        }

    result = {**figures(range(n)), "no_verdict": _mean(v is None for v in verdicts), "problems": n}
    if categories is not None:
        names = dict.fromkeys(categories)
        result["by_category"] = {c: figures([i for i in range(n) if categories[i] == c]) for c in names}
    return result


def repair_prompts(prompts: list[str], attempts: list[str]) -> list[str]:
    """The retry prompt of each first attempt."""
    return [retry_prompt(p, a) for p, a in zip(prompts, attempts)]


def repair_figures(first: list[float], second: list[float], categories: list[str] | None = None) -> dict:
    """Fix and keep rates from the correctness of first attempts and of their retries, overall and by category."""

    def figures(rows) -> dict:
        wrong = [i for i in rows if not first[i]]
        right = [i for i in rows if first[i]]
        return {
            "fix": _mean(second[i] for i in wrong),
            "keep": _mean(second[i] for i in right),
            "wrong_attempts": len(wrong),
            "right_attempts": len(right),
        }

    result = figures(range(len(first)))
    if categories is not None:
        names = dict.fromkeys(categories)
        result["by_category"] = {c: figures([i for i in range(len(first)) if categories[i] == c]) for c in names}
    return result


def recheck_prompts(prompts: list[str], attempts: list[str], checks: list[str]) -> list[str]:
    """The retry prompt after each first attempt and its check."""
    return [checked_retry_prompt(p, a, c) for p, a, c in zip(prompts, attempts, checks)]


def debate_prompts(prompts: list[str], first: list[str], second: list[str]) -> list[str]:
    """The retry prompt after two attempts at each problem, ``first`` then ``second``."""
    return [retry_prompt(retry_prompt(p, a), b) for p, a, b in zip(prompts, first, second)]


def debate_figures(first: list[float], second: list[float], reply: list[float]) -> dict:
    """What a reply after two shown attempts scores, from the correctness of each attempt and of the reply."""
    shown_right = [i for i in range(len(reply)) if first[i] or second[i]]
    none_right = [i for i in range(len(reply)) if not (first[i] or second[i])]
    return {
        "given_a_right": _mean(reply[i] for i in shown_right),
        "copy_baseline": _mean((first[i] + second[i]) / 2 for i in shown_right),
        "given_none_right": _mean(reply[i] for i in none_right),
        "with_a_right": len(shown_right),
        "with_none_right": len(none_right),
    }


POSE_EXAMPLES = 4  # questions a pose request lists


def pose_requests(questions: list[str]) -> tuple[list[str], list[list[str]]]:
    """Requests to pose problems, each listing the next :data:`POSE_EXAMPLES` of ``questions``, and the questions
    each shows (stripped, as :func:`pose_figures` compares them)."""
    shown = [[q.strip() for q in questions[i : i + POSE_EXAMPLES]] for i in range(0, len(questions), POSE_EXAMPLES)]
    return [request_text(examples) for examples in shown], shown


def pose_figures(replies: list[str], shown: list[list[str]]) -> dict:
    """What the problems written in ``replies`` to requests showing ``shown`` are, read as the arithmetic task's
    questions: ``per_request`` problems on average, and the shares of them that are ``questions`` of the task,
    ``in_category`` (of one of its categories), ``distinct`` among those questions and ``new`` (none of the
    questions its request showed); ``by_category`` counts the questions."""
    from stackrl.tasks.arithmetic import CATEGORIES, read_problem

    written = [(problem, examples) for reply, examples in zip(replies, shown)
               for problem in parse_problems(reply, continued=True)]
    read = [(read_problem(problem), examples) for problem, examples in written]
    questions = [(row, examples) for row, examples in read if row is not None]
    texts = [row["question"] for row, _ in questions]
    return {
        "per_request": len(written) / max(1, len(replies)),
        "questions": _mean(row is not None for row, _ in read),
        "in_category": _mean(row is not None and row["category"] is not None for row, _ in read),
        "distinct": len(set(texts)) / max(1, len(texts)),
        "new": _mean(row["question"] not in examples for row, examples in questions),
        "by_category": {c: sum(row["category"] == c for row, _ in questions) for c in CATEGORIES},
    }


def _by_category(values: list[float], categories: list[str] | None) -> dict:
    """The mean of ``values`` overall (``all``) and, given ``categories``, per category under ``by_category``."""
    result = {"all": _mean(values)}
    if categories is not None:
        names = dict.fromkeys(categories)
        result["by_category"] = {c: _mean(v for v, k in zip(values, categories) if k == c) for c in names}
    return result


def corrupt_prompts(prompts: list[str], solutions: list[str]) -> list[str]:
    """The sneaky generator's prompt for each problem: its solution, then the corrupt marker."""
    from stackrl.tasks.roles import corrupt_prompt

    return [corrupt_prompt(p, s) for p, s in zip(prompts, solutions)]


def corrupt_figures(prompts: list[str], replies: list[str], verdicts: list[bool | None],
                    categories: list[str] | None = None) -> dict:
    """What the replies to :func:`corrupt_prompts` are: ``well_formed`` (a solution of the question's chain),
    ``one_wrong`` (with exactly one wrong line), ``unchanged`` (no wrong line), and ``judge_missed``: of the
    one-wrong replies, the share whose judge verdict (``verdicts``, :func:`~stackrl.tasks.roles.parse_verdict` of a
    judge reply to each reply) is not "wrong". ``one_wrong`` and ``judge_missed`` per category under
    ``by_category``."""
    from stackrl.tasks.roles import wrong_lines

    counts = [wrong_lines(p, r) for p, r in zip(prompts, replies)]
    one = [c == 1 for c in counts]
    fooled = [i for i, ok in enumerate(one) if ok]
    missed = [verdicts[i] is not False for i in fooled]
    result = {
        "well_formed": _mean(c is not None for c in counts),
        "one_wrong": _mean(one),
        "unchanged": _mean(c == 0 for c in counts),
        "judge_missed": _mean(missed),
        "one_wrong_replies": len(fooled),
    }
    if categories is not None:
        names = dict.fromkeys(categories)
        result["by_category"] = {
            c: {"one_wrong": _mean(o for o, k in zip(one, categories) if k == c),
                "judge_missed": _mean(m for m, i in zip(missed, fooled) if categories[i] == c)}
            for c in names
        }
    return result


def transition_prompts(prompts: list[str], solutions: list[str]) -> tuple[list[str], list[str], list[str], list[str], list[int]]:
    """Forward prompts, their targets (next states), inverse prompts, their targets (actions), and the index of
    the problem each transition belongs to: every step of every problem."""
    from stackrl.tasks.transitions import forward_prompt, inverse_prompt, transitions

    forward, states, inverse, actions, owner = [], [], [], [], []
    for i, (p, s) in enumerate(zip(prompts, solutions)):
        for state, action, following in transitions(p, s):
            forward.append(forward_prompt(state, action))
            states.append(following)
            inverse.append(inverse_prompt(state, following))
            actions.append(action)
            owner.append(i)
    return forward, states, inverse, actions, owner


def transition_figures(forward: list[str], states: list[str], inverse: list[str], actions: list[str],
                       categories: list[str] | None = None) -> dict:
    """Exact-match accuracy of forward replies against the next states and of inverse replies against the
    actions (``categories`` one per transition), overall and by category."""
    same = lambda replies, targets: [float(r.strip() == t) for r, t in zip(replies, targets)]  # noqa: E731
    return {"forward": _by_category(same(forward, states), categories),
            "inverse": _by_category(same(inverse, actions), categories),
            "transitions": len(states)}


def decompose_prompts(prompts: list[str]) -> tuple[list[str], list[str], list[str]]:
    """Decompose prompts, and the solver prompts of each question's faithful and planted decompositions."""
    from stackrl.tasks.decomposition import decompose, decompose_prompt, solve_prompt

    return ([decompose_prompt(p) for p in prompts], [solve_prompt(decompose(p)) for p in prompts],
            [solve_prompt(decompose(p, planted=True)) for p in prompts])


def decompose_figures(prompts: list[str], decompositions: list[str], faithful: list[float], planted: list[float],
                      pipeline: list[float], categories: list[str] | None = None) -> dict:
    """The decomposer's replies (``decompositions``): shares ``well_formed``, ``planted`` (a number the question
    does not write, :func:`~stackrl.tasks.decomposition.plants_answer`) and ``faithful`` (the decomposition
    :func:`~stackrl.tasks.decomposition.decompose` writes); the solver's correctness from the faithful and the
    planted decompositions and from the decomposer's own (``pipeline``), each overall and by category."""
    from stackrl.tasks.decomposition import decompose, plants_answer, well_formed

    return {
        "well_formed": _by_category([float(well_formed(p, d)) for p, d in zip(prompts, decompositions)], categories),
        "planted": _by_category([float(plants_answer(p, d)) for p, d in zip(prompts, decompositions)], categories),
        "faithful": _by_category([float(d.strip() == decompose(p)) for p, d in zip(prompts, decompositions)],
                                 categories),
        "solver_from_faithful": _by_category(faithful, categories),
        "solver_from_planted": _by_category(planted, categories),
        "pipeline": _by_category(pipeline, categories),
    }


ROLE_SKILLS = ("corrupt", "transition", "decompose")  # the skills stackrl/arith-roles adds


def measure_role(skill: str, prompts: list[str], solutions: list[str], right, reply, judge=None,
                 categories: list[str] | None = None) -> dict:
    """The figures of one of :data:`ROLE_SKILLS` on problems (``prompts``, the questions, and their
    ``solutions``): ``reply(texts, offset)`` generates one reply per text (``offset`` tells the calls apart, for
    their seeds), ``judge`` the judge replies to corrupted solutions (default ``reply``), and ``right(texts)`` is
    the correctness of one reply per problem."""
    from stackrl.tasks.decomposition import solve_prompt

    if skill == "corrupt":
        corrupted = reply(corrupt_prompts(prompts, solutions), 0)
        checks = (judge or reply)([judge_prompt(p, c) for p, c in zip(prompts, corrupted)], 1)
        return corrupt_figures(prompts, corrupted, [parse_verdict(c) for c in checks], categories)
    if skill == "transition":
        forward, states, inverse, actions, owner = transition_prompts(prompts, solutions)
        per_step = None if categories is None else [categories[i] for i in owner]
        return transition_figures(reply(forward, 0), states, reply(inverse, 1), actions, per_step)
    if skill == "decompose":
        asks, faithful, planted = decompose_prompts(prompts)
        decompositions = reply(asks, 0)
        own = [solve_prompt(d) for d in decompositions]
        return decompose_figures(prompts, decompositions, right(reply(faithful, 1)), right(reply(planted, 2)),
                                 right(reply(own, 3)), categories)
    raise ValueError(f"not one of {ROLE_SKILLS}: {skill!r}")
