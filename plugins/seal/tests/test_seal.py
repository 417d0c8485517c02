"""SEAL: each completion is a self-edit applied to a scratch copy of the policy; its reward is the copy's downstream
score less the live policy's. The rules on hand-built numbers, then on the built-in model against the same update
written out by hand."""

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from stackrl.cli import main
from stackrl.plots import METRICS_FILE
from stackrl.context import RewardContext
from stackrl.rewards import exact_match
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin, train_steps
from stackrl.testing.heldout import WRITTEN_PROBLEMS, WRITTEN_SLIPS, right_and_wrong_rollout, written_rollout
from stackrl_seal import Seal
from stackrl_seal.rewards import kept_edits, self_edit_rewards


class TestConformance(PluginConformance):
    plugin_name = "seal"
    refused_settings = [
        ({"learning_rate": 0.0}, "must be positive"),
        ({"steps": 0}, "must be at least 1"),
        ({"evaluation": "judge"}, "must be one of accuracy, likelihood"),
        ({"reward": "ratio"}, "must be one of gain, improved"),
        ({"max_new_tokens": 0}, "must be at least 1 or null"),
        ({"metric": "rouge"}, "must be a built-in outcome reward"),
        ({"rest_em_every": -1}, "must be 0"),
        ({"keep_per_prompt": 0}, "must be at least 1"),
        ({"rest_em_learning_rate": 0.0}, "must be positive"),
        ({"rest_em_epochs": 0}, "must be at least 1"),
    ]


def test_the_reward_is_the_gain_or_whether_there_was_one():
    baseline, adapted = [0.0, 1.0, 0.5, 1.0], [1.0, 1.0, 0.25, 0.0]
    assert self_edit_rewards(baseline, adapted, "gain") == [1.0, 0.0, -0.25, -1.0]
    assert self_edit_rewards(baseline, adapted, "improved") == [1.0, 0.0, 0.0, 0.0]


def test_rest_em_keeps_the_best_improving_self_edits_of_each_prompt():
    gains = [0.2, 0.5, None, -1.0, 0.0, 0.0, 0.3, 0.3]
    assert kept_edits(gains, 4, keep=1) == [1, 6]  # a tie goes to the earlier row
    assert kept_edits(gains, 4, keep=2) == [0, 1, 6, 7]  # never a gain of 0 or below, nor an unscored row
    assert kept_edits([0.0] * 4, 2, keep=2) == []


def _context(trainer, rollout, logged):
    return RewardContext(step=0, tokenizer=trainer.processing_class, policy=trainer._shared_policy,
                         _log=logged.__setitem__, _plugin="seal", rollout=rollout)


def _mean_logprob(ctx, model, rollout, i):
    target = ctx.tokenizer(rollout.columns["solution"][i], add_special_tokens=False)["input_ids"]
    scores = ctx.score([rollout.prompts[i]], [target], model=model)
    return float((scores.logprobs * scores.mask).sum() / scores.mask.sum())


def test_the_reward_is_the_updated_copys_likelihood_gain_and_rest_em_keeps_the_helpful_self_edit(built_in_trainer):
    """On the built-in model, each row's reward is what the same scratch update, made by hand, gives: the copy's
    mean log-prob of the reference solution after the question, less the live policy's; fine-tuning on the
    reference solution helps the copy more than fine-tuning on its slip, for both problems.

    ReST-EM: the reward stage keeps, per prompt, the best self-edit with a positive gain; every ``rest_em_every``
    steps post_step hands the buffer to a supervised phase and empties it; the buffer survives a checkpoint."""
    settings = {"evaluation": "likelihood", "learning_rate": 0.05, "steps": 2, "rest_em_every": 2,
                "rest_em_learning_rate": 3e-5}
    trainer = built_in_trainer(["seal"], seal=settings)
    plugin = trainer.plugins.plugins["seal"]
    rollout, logged = right_and_wrong_rollout(trainer.processing_class), {}
    ctx = _context(trainer, rollout, logged)
    rewards = plugin.reward(ctx)
    for i in range(4):
        ctx.scratch_update("by_hand", [rollout.prompt_ids[i]], [rollout.completion_ids[i]], objective="likelihood",
                           learning_rate=0.05, steps=2)
        gain = _mean_logprob(ctx, "by_hand", rollout, i) - _mean_logprob(ctx, "policy", rollout, i)
        assert rewards[i] == pytest.approx(gain, abs=1e-6)
    assert rewards[0] > rewards[1] and rewards[2] > rewards[3], rewards
    assert rewards[1] < 0 and rewards[3] < 0, "fine-tuning on a slip lowers the reference's likelihood"
    assert logged["seal/applied"] == 4 and logged["seal/improved"] == pytest.approx(sum(r > 0 for r in rewards) / 4)

    kept = [i for i in (0, 2) if rewards[i] > 0]
    assert kept, rewards
    assert plugin.kept_completions == [rollout.completion_ids[i] for i in kept]
    assert plugin.kept_prompts == [rollout.prompt_ids[i] for i in kept]
    resumed = make_plugin("seal", **settings)
    resumed.load_state_dict(plugin.state_dict())
    phases = []
    step = lambda number: SimpleNamespace(  # noqa: E731
        step=number, supervised_phase=lambda *args, **options: phases.append((args, options)))
    resumed.post_step(step(1))
    assert phases == []
    resumed.post_step(step(2))
    assert phases == [(("seal", plugin.kept_prompts, plugin.kept_completions),
                       {"learning_rate": 3e-5, "epochs": 1})]
    assert resumed.state_dict() == {"kept_prompts": [], "kept_completions": []}
    resumed.post_step(step(4))
    assert len(phases) == 1, "no self-edit kept since the last phase: no phase"


def test_the_accuracy_reward_is_the_copys_greedy_answer_against_the_policys(built_in_trainer):
    """With the paper's evaluation, a row's reward is 1 or 0 for the copy's greedy answer less the same for the
    live policy's: at this step size the copy fine-tuned on the slip answers wrong, the one fine-tuned on the
    solution still right. Identical self-edits of a prompt are applied once and share their reward; rows without
    a reference answer are not scored."""
    trainer = built_in_trainer(["seal"], seal={"learning_rate": 0.05, "max_new_tokens": 24})
    first, second = WRITTEN_PROBLEMS
    rows = [WRITTEN_PROBLEMS[first], WRITTEN_SLIPS[first], WRITTEN_PROBLEMS[first],
            WRITTEN_PROBLEMS[second], WRITTEN_SLIPS[second], WRITTEN_SLIPS[second]]
    rollout = written_rollout(trainer.processing_class, [first] * 3 + [second] * 3, rows, group_size=3)
    rollout.columns["answer"][:3] = [None] * 3
    logged, acted = {}, []
    ctx = _context(trainer, rollout, logged)
    ctx._acted = lambda plugin, n, of, hint: acted.append((n, of))
    rewards = trainer.plugins.plugins["seal"].reward(ctx)
    assert rewards[:3] == [None] * 3 and acted == [(3, 6)]
    answer = rollout.columns["answer"][3]
    greedy = lambda model: exact_match(  # noqa: E731
        ctx.generate([rollout.prompts[3]], model=model, do_sample=False, max_new_tokens=24)[0].text, answer)
    for i in (3, 4):
        ctx.scratch_update("by_hand", [rollout.prompt_ids[i]], [rollout.completion_ids[i]], objective="likelihood",
                           learning_rate=0.05)
        assert rewards[i] == greedy("by_hand") - greedy("policy")
    assert rewards[3:] == [0.0, -1.0, -1.0]
    assert logged["seal/applied"] == 2


def _validate(tmp_path, settings, capsys) -> tuple[int, str]:
    """``stackrl config validate`` of the built-in task's run with these seal settings: its code and output."""
    path = tmp_path / "seal.yaml"
    path.write_text(yaml.safe_dump({"model": {"name_or_path": "stackrl/arith-tiny"}, "data": {"source": "arithmetic"},
                                    "plugins": ["seal"], "seal": settings, "trainer": {"max_steps": 2}}))
    code = main(["config", "validate", str(path)])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize("settings, key", [
    ({"question_column": "passage_questions"}, "seal.question_column"),
    ({"evaluation": "likelihood", "target_column": "worked"}, "seal.target_column"),
    ({"answer_column": "label"}, "seal.answer_column"),
])
def test_a_column_the_data_lacks_is_refused(tmp_path, capsys, settings, key):
    code, out = _validate(tmp_path, settings, capsys)
    assert code == 2 and re.search(f"{key}: data.source .* has no column", out), out


def test_a_rest_em_phase_after_the_last_step_is_noted(tmp_path, capsys):
    code, out = _validate(tmp_path, {"rest_em_every": 50}, capsys)
    assert code == 0 and "seal.rest_em_every: the ReST-EM phase acts from step 50" in out, out


def test_a_rest_em_run_fine_tunes_on_the_kept_self_edits_between_steps(make_config, monkeypatch):
    """Two steps with a phase after each, every self-edit made to help (the copy scores 1, the policy 0): each phase
    fine-tunes on the `keep_per_prompt` self-edits of every group of its step, and the buffer is empty after it."""
    monkeypatch.setattr(Seal, "downstream", lambda self, ctx, model, questions, references: [
        float(model != "policy")] * len(questions))
    config = make_config(["seal"], seal={"rest_em_every": 1, "keep_per_prompt": 2})
    trainer = train_steps(config, steps=2)
    records = map(json.loads, (Path(trainer.args.output_dir) / METRICS_FILE).read_text().splitlines())
    phases = [(r["step"], r["phase/seal/pairs"]) for r in records if "phase/seal/pairs" in r]
    kept = 2 * trainer.args.per_device_train_batch_size // trainer.args.num_generations  # two a group
    assert phases == [(1, kept), (2, kept)], phases
    assert trainer.plugins.plugins["seal"].kept_prompts == []
