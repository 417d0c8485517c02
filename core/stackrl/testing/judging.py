"""A policy judging its own attempts, on the built-in judging model, stackrl/arith-skills: what the mechanism tests
and the benchmarks of the plugins whose policy judges measure.

- :func:`groups_split` and :func:`advantage_figures`: what a batch gives GRPO to learn from, and where GRPO's
  advantages go;
- :func:`verify_signal`: the same for the verify groups of a self-verification rollout (stackrl-rise,
  stackrl-selfverify), whose rows judge an attempt shown in the prompt, and :class:`VerifyMechanism`, the
  mechanism test those plugins run on it (subclass it as ``TestMechanism``);
- :func:`finds_the_slip`: whether a check of a wrong attempt stops where a perfect judge does, the line a retry
  after the check can carry on from (stackrl-rrr);
- :func:`verified_rows`: the rows of a rollout of answers verified in turn (``stackrl.blocks.turns.verify_then_revise``:
  pag, svrr1), checked for their layout, their masks and their verdicts.

The plugins on the judges block (:mod:`stackrl.blocks.judges`: selfjudge, sirlc, ssr) judge their own solutions:

- :class:`JudgingConformance`: the conformance suite for them, its run judging in a few new tokens;
- :func:`judge_prompt` and :func:`read_judgement`: what a plugin's judge is asked of one written solution, and what
  it reads from a reply;
- :class:`JudgedSteps`: the rollouts of a label-free run, each with the plugin's judgements and the hidden truth;
- :func:`judge_figures`: how judgements track correctness, across the batch and within groups;
- :func:`load` and :func:`train_judged`: a plugin's CPU recipe, label-free or as plain GRPO, trained and measured;
- :class:`JudgingMechanism`: the mechanism test each of those plugins runs (subclass it as ``TestMechanism``);
- :func:`benchmark`: the benchmark scripts' main: held-out solving and judging after label-free training with the
  plugin's CPU recipe, against the untrained model and plain GRPO on the hidden answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
import torch

from stackrl.blocks.judges import parse_judgement
from stackrl.context import Rollout
from stackrl.rewards import ROLE_COLUMN, VERIFY, exact_match
from stackrl.tasks import parse_verdict
from stackrl.tasks.roles import VERDICT_PREFIX, WRONG, judge_reply
from stackrl.testing.conformance import PluginConformance
from stackrl.truth import auroc

RECIPES = Path(__file__).resolve().parents[3] / "configs" / "recipes"


def groups_split(values: torch.Tensor, group_size: int) -> float:
    """The share of groups whose values (NaN ones left out) are not all equal: the groups GRPO learns from."""
    groups = values.view(-1, group_size)
    return sum(len(set(group[~torch.isnan(group)].tolist())) > 1 for group in groups) / len(groups)


def advantage_figures(advantages: torch.Tensor, right: torch.Tensor, wrong: torch.Tensor) -> dict[str, float]:
    """The mean advantage GRPO gave the ``right`` rows and the ``wrong`` ones (masks; NaN where a mask is empty)."""
    return {"advantage_right": advantages[right].mean().item(), "advantage_wrong": advantages[wrong].mean().item()}


def verify_signal(rollout: Rollout, reward: str, *, target_column: str = "attempt_correct") -> dict[str, float]:
    """Over the rollout's verify rows, scored by the reward component ``reward``: ``verdict_rate`` (the share of
    critiques that reach a verdict), ``groups_split`` (of the verify groups' rewards), and the mean advantage of
    critiques whose verdict is right (``advantage_right``: the verdict is ``target_column``, the real correctness of
    the attempt judged) and of those whose verdict is wrong (``advantage_wrong``; critiques without a verdict are in
    neither)."""
    verifying = torch.tensor([role == VERIFY for role in rollout.columns[ROLE_COLUMN]])
    rows = verifying.nonzero().flatten().tolist()
    verdicts = [parse_verdict(rollout.completions[i]) for i in rows]
    reached = torch.tensor([verdict is not None for verdict in verdicts])
    right = torch.tensor([verdict == rollout.columns[target_column][i] for i, verdict in zip(rows, verdicts)])
    return {
        "verdict_rate": reached.double().mean().item(),
        "groups_split": groups_split(rollout.rewards[reward][verifying], rollout.group_size),
        **advantage_figures(rollout.advantages[verifying], right, reached & ~right),
    }


class VerifyMechanism:
    """The mechanism of a self-verification plugin, short: one step of its CPU recipe on stackrl/arith-skills, six
    of its eight groups verifying. Its critiques reach a verdict (the recipe leaves room for a judge's check of a
    4-step attempt, about 120 tokens); most verify groups disagree among themselves, so GRPO has a signal; and it
    raises the critiques whose verdict is right and lowers those whose verdict is wrong. A plugin's test module
    subclasses it as ``TestMechanism``, setting ``plugin_name``; the held-out figures come from benchmarks."""

    pytestmark = pytest.mark.mechanism  # inherited by each plugin's TestMechanism
    plugin_name = ""

    def test_its_verifications_of_on_policy_attempts_split_and_right_verdicts_are_pushed_up(self, tmp_path):
        from stackrl.testing.fixtures import train_steps
        from stackrl.testing.heldout import recipe_config

        name = self.plugin_name
        config = recipe_config(RECIPES / f"{name}-cpu.yaml", plugins=True, seed=0, steps=1, output_dir=tmp_path,
                               overrides=["trainer.disable_tqdm=true", f"{name}.verify_share=0.75"])
        signal = verify_signal(train_steps(config)._rollouts["train"], name)
        assert signal["verdict_rate"] > 0.85, signal
        assert signal["groups_split"] >= 0.5, signal
        assert signal["advantage_right"] > 0.2 and signal["advantage_wrong"] < -0.2, signal


def finds_the_slip(check: str, attempt: str) -> bool:
    """Whether ``check`` (a judge reply) has the line a perfect judge stops at on the wrong ``attempt``: its first
    wrong step worked out right beside the attempt's value (``30 * 6 = 180 | 190 no``), the value a retry after the
    check can carry on from. False where a perfect judge finds no wrong line (an attempt right by its own steps)
    and for an attempt not in the task's form, which no perfect check exists for."""
    try:
        perfect = judge_reply(attempt).split("\n")
    except ValueError:
        return False
    return perfect[-1] == VERDICT_PREFIX + WRONG and perfect[-2] in check.split("\n")


@dataclass
class JudgedSteps:
    """Pass as ``monitor=`` to a run: keeps each training step's rollout and what ``plugin``'s reward said of it."""

    plugin: str
    rollouts: list = field(default_factory=list)
    judgements: list = field(default_factory=list)

    def __call__(self, hook: str, plugin: str, kwargs: dict, result) -> None:
        if hook == "reward" and plugin == self.plugin and kwargs["ctx"].training:
            self.rollouts.append(kwargs["ctx"].rollout)
            self.judgements.append(torch.tensor([float("nan") if j is None else j for j in result]))

    def correct(self, config) -> list[torch.Tensor]:
        """Each step's rows, right (True) or wrong against the answers the label-free run hid."""
        from stackrl.data import load_prompts

        data = config.host.data
        rows = load_prompts(data, keep_answer=True)
        answer = dict(zip(rows["prompt"], rows[data.answer_column]))
        return [
            torch.tensor([exact_match(text, answer[prompt]) == 1.0 for prompt, text in zip(r.prompts, r.completions)])
            for r in self.rollouts
        ]


def within_group_auroc(scores: torch.Tensor, correct: torch.Tensor, group_size: int) -> float | None:
    """The probability that a right completion scores above a wrong one of the same prompt, ties one half: what
    the group-relative advantage sees, free of how hard each prompt is. Unscored (NaN) rows are left out."""
    above = pairs = 0.0
    for values, right in zip(scores.view(-1, group_size), correct.view(-1, group_size)):
        scored = ~torch.isnan(values)
        high, low = values[scored & right], values[scored & ~right]
        above += ((high[:, None] > low[None, :]).sum() + 0.5 * (high[:, None] == low[None, :]).sum()).item()
        pairs += len(high) * len(low)
    return above / pairs if pairs else None


def judge_figures(scores: torch.Tensor, correct: torch.Tensor, group_size: int) -> dict[str, float]:
    """How judgements ``scores`` (in [0, 1], NaN where malformed) track ``correct``: accuracy reading 0.5 or more
    as "correct", the rates on right and wrong rows, AUROC over all rows and within groups, the share of groups
    the judgements split (not all equal: a group GRPO learns from), the malformed share."""
    scored = ~torch.isnan(scores)
    says_correct, right = scores[scored] >= 0.5, correct[scored]
    return {
        "solved": correct.double().mean().item(),
        "judge_accuracy": (says_correct == right).double().mean().item(),
        "true_positive_rate": says_correct[right].double().mean().item(),
        "true_negative_rate": (~says_correct[~right]).double().mean().item(),
        "auroc": auroc(scores, correct),
        "within_group_auroc": within_group_auroc(scores, correct, group_size),
        "groups_split": groups_split(scores, group_size),
        "malformed": 1 - scored.double().mean().item(),
    }


FIGURES = ("pass@1", "judge", "auroc", "within_group_auroc", "groups_split", "malformed")


def load(plugin: str, method: str, seed: int, steps: int, folder: Path, overrides=()):
    """``plugin``'s CPU recipe as ``method`` runs it: label-free with the plugin, or ``grpo``: without it, on the
    answers the plugin never sees (exact_match), the same steps and settings otherwise."""
    from stackrl.testing.heldout import recipe_config

    grpo = method == "grpo"
    answers = ["rewards.exact_match=1.0", "data.label_free=false"] if grpo else []
    return recipe_config(RECIPES / f"{plugin}-cpu.yaml", plugins=not grpo, seed=seed, steps=steps,
                         output_dir=folder / f"{method}-{seed}",
                         overrides=["trainer.disable_tqdm=true", *answers, *overrides])


def train_judged(config, plugin: str):
    """Train ``config``; the trainer, and what the run's rewards said: the share of groups with a reward spread
    (``signal``), and where ``plugin`` judged, :func:`judge_figures` over every completion it judged and the mean
    advantage GRPO gave right and wrong completions."""
    from stackrl.testing.fixtures import train_steps

    judged = JudgedSteps(plugin)
    trainer = train_steps(config, monitor=judged)
    zero_std = [e["frac_reward_zero_std"] for e in trainer.state.log_history if "frac_reward_zero_std" in e]
    figures = {"signal": 1 - sum(zero_std) / len(zero_std)}
    if judged.rollouts:
        correct = torch.cat(judged.correct(config))
        advantages = torch.cat([r.advantages for r in judged.rollouts])
        figures.update(judge_figures(torch.cat(judged.judgements), correct, judged.rollouts[0].group_size))
        figures.update(advantage_figures(advantages, correct, ~correct))
    return trainer, figures


def heldout(model, tokenizer, config) -> dict[str, float]:
    """Held-out pass@1 (the recipe's eval section) and judging balanced accuracy (greedy, ``eval.skill: judge``)."""
    from stackrl.evaluation import evaluate

    def with_eval(**settings):
        return replace(config, host=replace(config.host, eval=replace(config.host.eval, **settings)))

    length = config.host.eval.max_new_tokens or config.host.trainer["max_completion_length"]
    judging = evaluate(model, tokenizer, with_eval(skill="judge", temperature=0.0), length)
    return {"pass@1": evaluate(model, tokenizer, config, length)["pass@1"], "judge": judging["balanced_accuracy"]}


def heldout_after(plugin: str, method: str, seed: int, steps: int, folder: Path, overrides=(), size: int = 200) -> dict:
    """:func:`heldout` after training ``plugin``'s CPU recipe as ``method`` runs it (:func:`load`) for ``steps``
    steps (0: the untrained model), measured on ``size`` held-out problems: a benchmark's ``run`` for
    :func:`stackrl.testing.benchmark.against_plain_grpo`."""
    from stackrl.run import build_trainer
    from stackrl.testing.fixtures import train_steps

    config = load(plugin, method, seed, steps, folder, [f"eval.size={size}", *overrides])
    trainer = train_steps(config) if steps else build_trainer(config)
    return heldout(trainer.model, trainer.processing_class, config)


class JudgingConformance(PluginConformance):
    """:class:`~stackrl.testing.conformance.PluginConformance` for a plugin on the judges block: its two-step run
    judges in 8 new tokens, the judgements' length being the run's cost, not what the suite checks."""

    @property
    def plugin_settings(self) -> dict:
        return {self.plugin_name: {"max_new_tokens": 8}}


def judge_prompt(plugin, solution: str, problem: str = "(4 * 2) + 3") -> str:
    """The prompt ``plugin``'s judge is given for ``solution`` to the built-in ``problem`` (a key of
    :data:`stackrl.testing.heldout.WRITTEN_PROBLEMS`), checked to show both: a judge judges the solution to the
    question it answers."""
    from transformers import AutoTokenizer

    from stackrl.tasks import arith_tiny_path
    from stackrl.testing.heldout import written_rollout

    rollout = written_rollout(AutoTokenizer.from_pretrained(arith_tiny_path()), [problem], [solution], group_size=1)
    [prompt] = plugin._judge.prompts(rollout)
    if f"What is {problem}?" not in prompt or solution not in prompt:
        raise AssertionError(f"the judge's prompt does not show the question and the solution: {prompt!r}")
    return prompt


def read_judgement(plugin, reply: str) -> float | None:
    """The judgement ``plugin``'s settings read from a judge's ``reply`` (``None``: malformed)."""
    return parse_judgement(reply, plugin.config.scale, plugin.config.verdict_prefix)


class JudgingMechanism:
    """The mechanism of a judging plugin, short: two label-free steps of its CPU recipe on stackrl/arith-skills,
    64 completions a step. The policy's judgements of its own solutions, made without the answers, rank its right
    solutions above its wrong ones, across the batch and within each question's group, so GRPO's advantages favour
    right solutions. The margins hold a judge of the model's measured quality (over seeds 0 to 2, AUROC 0.57 to
    0.65 across the batch and 0.58 to 0.69 within groups; advantages at least 0.09 on right solutions and at most
    -0.16 on wrong ones: a judge that lets through half of its wrong solutions) and fail an inverted judge or one blind to the attempt (AUROC 0.5 or below, advantages
    near 0 or of the wrong sign). A plugin's test module subclasses it as ``TestMechanism``, setting
    ``plugin_name``."""

    pytestmark = pytest.mark.mechanism  # inherited by each plugin's TestMechanism
    plugin_name = ""

    def test_its_judgements_of_its_own_solutions_rank_right_above_wrong(self, tmp_path):
        config = load(self.plugin_name, self.plugin_name, seed=0, steps=2, folder=tmp_path,
                      overrides=["trainer.per_device_train_batch_size=64"])
        _, figures = train_judged(config, self.plugin_name)
        assert figures["malformed"] < 0.2, figures  # the verdict line is read: few rewards lost to parsing
        assert figures["auroc"] > 0.55 and figures["within_group_auroc"] > 0.55, figures
        assert figures["groups_split"] > 0.3, figures  # groups GRPO learns from, with no answer read
        assert figures["advantage_right"] > 0.05 > -0.05 > figures["advantage_wrong"], figures


def benchmark(plugin: str, description: str) -> None:
    """The main of ``plugin``'s benchmarks/mechanism.py: the untrained model's held-out figures, then for each seed
    the plugin's label-free run and plain GRPO on the answers, and the means over the seeds."""
    from stackrl.run import build_trainer
    from stackrl.testing.benchmark import arguments, compare

    args = arguments(description, steps=20, eval_size=200).parse_args()
    # The judge's check of a 4-step attempt is about 90 tokens: room for it where judging is measured.
    overrides = [f"eval.size={args.eval_size}", "eval.max_new_tokens=128", *args.overrides]

    def untrained(folder: Path) -> dict[str, float]:
        config = load(plugin, plugin, 0, 0, folder, overrides)
        start = build_trainer(config)
        return heldout(start.model, start.processing_class, config)

    def run(method: str, seed: int, folder: Path) -> dict[str, float]:
        config = load(plugin, method, seed, args.steps, folder, overrides)
        trainer, figures = train_judged(config, plugin)
        return {**figures, **heldout(trainer.model, trainer.processing_class, config)}

    compare(args, (plugin, "grpo"), run, figures=(*FIGURES, "signal"), before=untrained)


def verified_rows(rollout: Rollout, tokenizer, *, verify: str, revise: str, answers: int) -> list[list[str]]:
    """Each row's segment kinds, after asserting that the rollout's rows are answers verified in turn
    (:func:`stackrl.blocks.turns.verify_then_revise` with ``answers`` answers at most): the segments trained, and
    between two of them the injected ``verify`` text after an answer, ``revise`` after a verification, out of the
    loss; a verification followed by a new answer exactly when its verdict is "wrong" and answers are left."""
    injected = {kind: tokenizer(text, add_special_tokens=False)["input_ids"] for kind, text in (("answer", verify), ("verify", revise))}
    kinds = []
    for ids, mask, segments in zip(rollout.completion_ids, rollout.loss_mask, rollout.columns["segments"]):
        for k, segment in enumerate(segments):
            assert set(mask[segment.start : segment.end]) == {1}
            if k + 1 < len(segments):
                gap = slice(segment.end, segments[k + 1].start)
                assert ids[gap] == injected[segment.kind] and set(mask[gap]) == {0}
            if segment.kind == "verify":
                left = sum(s.kind == "answer" for s in segments[: k + 1]) < answers
                assert (k + 1 < len(segments)) == (left and parse_verdict(segment.text) is False)
        kinds.append([s.kind for s in segments])
    return kinds
