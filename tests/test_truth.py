"""Monitoring against hidden truth: AUROC by hand, and a label-free run that logs it without showing the answers."""

import math

import pytest
import torch

from stackrl import Rollout
from stackrl.rewards import exact_match
from stackrl.tasks.arithmetic import make_dataset
from stackrl.testing.fixtures import train_steps
from stackrl.truth import TRUTH_COLUMN, auroc, truth_figures


def test_auroc_counts_pairs_ordered_by_score_with_ties_as_half():
    # Positives scored 0.9 and 0.3, negatives 0.8 and 0.3 (the NaN row is not scored): of the four pairs, one
    # positive is above both negatives, the other below one and tied with one: (1 + 1 + 0 + 0.5) / 4.
    scores = torch.tensor([0.9, 0.8, 0.3, 0.3, math.nan])
    correct = torch.tensor([True, False, True, False, True])
    assert auroc(scores, correct) == 0.625
    assert auroc(-scores, correct) == 0.375  # a reward that prefers wrong answers falls below one half
    assert auroc(torch.tensor([1.0, 0.0]), torch.tensor([True, False])) == 1.0
    assert auroc(torch.tensor([0.5, 0.5]), torch.tensor([True, False])) == 0.5
    assert auroc(torch.tensor([0.2, 0.7]), torch.tensor([True, True])) is None  # no wrong row: undefined
    assert auroc(torch.tensor([0.2, math.nan]), torch.tensor([True, False])) is None


def rollout(completions, rewards, pseudo_labels):
    return Rollout(
        prompts=["q"] * len(completions),
        completions=completions,
        prompt_ids=[[0]] * len(completions),
        completion_ids=[[0]] * len(completions),
        columns={},
        group_size=len(completions),
        rewards={name: torch.tensor(values) for name, values in rewards.items()},
        pseudo_labels=pseudo_labels,
    )


def test_truth_figures_for_every_component_and_every_declared_label():
    texts = ["The answer is 4.", "The answer is 5.", "The answer is 4.", "no answer"]
    truth = [4, 4, 4, 4]  # rows 0 and 2 are correct
    batch = rollout(
        texts,
        {"tracks": [1.0, 0.0, 0.6, 0.2], "inverts": [0.0, 1.0, 0.0, 1.0], "partial": [1.0, math.nan, math.nan, 0.0]},
        {"voter": ["4", "4", "5", None], "silent": [None] * 4},
    )
    figures = truth_figures(batch, truth, exact_match, math_verify=False)
    assert figures == {
        "truth/correct": 0.5,
        "truth/tracks/auroc": 1.0,
        "truth/inverts/auroc": 0.0,
        "truth/partial/auroc": 1.0,  # over the two rows it scored
        "truth/voter/pseudo_label_accuracy": 2 / 3,  # three labelled rows, two right
    }


def reference_auroc(scores, correct):
    pairs = [(p, n) for p, c in zip(scores, correct) if c for n, d in zip(scores, correct) if not d]
    return sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in pairs) / len(pairs)


def test_a_label_free_run_logs_each_component_against_answers_no_hook_sees(make_config):
    seen = []

    def record(hook, plugin, kwargs, result):
        if hook == "reward":
            ctx = kwargs["ctx"]
            seen.append((list(ctx.rollout.columns), list(ctx.rollout.prompts), list(ctx.rollout.completions), result))

    config = make_config(
        ["digit_reward"],
        model={"name_or_path": "stackrl/arith-tiny"},
        data={"label_free": True, "size": 16},
        rewards={"exact_match": None},
        trainer={"per_device_train_batch_size": 8, "max_completion_length": 40, "max_steps": 1},
        eval={"before_and_after": False},
    )
    trainer = train_steps(config, monitor=record)
    (columns, prompts, completions, rewards), = seen
    assert "answer" not in columns and TRUTH_COLUMN not in columns
    answers = dict(zip(*(make_dataset(split="train", size=16, seed=0)[k] for k in ("question", "answer"))))
    correct = [exact_match(text, answers[prompt]) == 1.0 for prompt, text in zip(prompts, completions)]
    assert any(correct) and not all(correct), "this seed samples right and wrong answers"
    logged = trainer.state.log_history[0]
    assert logged["truth/correct"] == pytest.approx(sum(correct) / len(correct))
    assert logged["truth/digit_reward/auroc"] == pytest.approx(reference_auroc(rewards, correct))


def test_the_truth_figure_is_drawn_only_for_runs_that_logged_it(tmp_path):
    import json

    from stackrl.plots import METRICS_FILE, plot_runs

    for name, extra in (("plain", {}), ("label_free", {"truth/covo/auroc": 0.7, "truth/correct": 0.4})):
        run = tmp_path / name
        run.mkdir()
        (run / METRICS_FILE).write_text(json.dumps({"step": 1, "reward": 0.5, **extra}) + "\n")
    assert [p.stem for p in plot_runs([tmp_path / "plain"])] == ["rewards", "accuracy", "completion_length", "loss"]
    drawn = plot_runs([tmp_path / "label_free"])
    assert [p.stem for p in drawn][-1] == "truth" and drawn[-1].stat().st_size > 1000
