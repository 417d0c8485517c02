"""SCoRe: two attempts per row, stage I's KL on first-attempt tokens only, stage II's self-correction bonus."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from stackrl.blocks.turns import Segment, segment_advantages
from stackrl.rewards import exact_match
from stackrl.tasks import RETRY_INSTRUCTION
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import train_steps
from stackrl_score import Score, ScoreConfig, attempt_rewards

SKILLS = {"name_or_path": "stackrl/arith-skills"}
EASY = {"options": {"categories": ["2 steps, 1-digit", "3 steps, 1-digit"]}}


class TestConformance(PluginConformance):
    plugin_name = "score"
    refused_settings = [({"stage_two_step": -1}, "must be 0 or more"),
                        ({"first_attempt_kl": -0.1}, "must be 0 or more"), ({"bonus": -1.0}, "must be 0 or more"),
                        ({"metric": "score"}, "must be a built-in outcome reward"),
                        ({"instruction": "\n"}, "must hold the instruction")]


@pytest.mark.parametrize(
    "first, second, stage, rewards",
    [
        (False, True, 1, (0.0, 1.0)),  # stage I: the second attempt alone is rewarded
        (True, False, 1, (0.0, 0.0)),
        (True, True, 1, (0.0, 1.0)),
        (False, True, 2, (0.0, 1.0 + 0.5)),  # stage II: a fix earns the bonus
        (True, False, 2, (1.0, 0.0 - 0.5)),  # a break pays it
        (True, True, 2, (1.0, 1.0)),
        (False, False, 2, (0.0, 0.0)),
    ],
)
def test_attempt_rewards_by_stage(first, second, stage, rewards):
    assert attempt_rewards(first, second, stage, bonus=0.5) == rewards


def test_stage_two_begins_once_the_step_stage_two_step_is_done():
    plugin = Score(ScoreConfig(stage_two_step=2))
    stages = []
    for step in (1, 2, 3):
        plugin.post_step(SimpleNamespace(step=step, log=lambda name, value: None))
        stages.append(plugin.stage)
    assert stages == [1, 2, 2] and plugin.switched_at == 2
    assert Score(ScoreConfig(stage_two_step=0)).stage == 2  # no stage I at all


def test_the_kl_term_covers_the_first_attempt_of_stage_one_rows_only(monkeypatch):
    # Row 0 (stage I): first attempt at tokens 0:3, the second at 5:8; row 1 was sampled in stage II.
    segments = [[Segment("answer", 0, 0, 3, ""), Segment("answer", 1, 5, 8, "")]] * 2
    rollout = SimpleNamespace(columns={"segments": segments, "score_stage": [1, 2]})
    masks = []

    def reference_kl(ctx, mask, model):
        masks.append(mask.clone())
        return torch.tensor(0.3)

    monkeypatch.setattr("stackrl.blocks.turns.reference_kl", reference_kl)  # the two-stage block's KL
    ctx = SimpleNamespace(rollout=rollout, loss_mask=torch.ones(2, 8), log=lambda name, value: None)
    assert Score(ScoreConfig(first_attempt_kl=0.5)).loss_term(ctx).item() == pytest.approx(0.5 * 0.3)
    assert masks[0].tolist() == [[1, 1, 1, 0, 0, 0, 0, 0], [0] * 8]
    rollout.columns["score_stage"] = [2, 2]
    assert Score(ScoreConfig(first_attempt_kl=0.5)).loss_term(ctx) is None  # stage II drops the KL


def _run(make_config, steps, monitor=None, learning_rate=1e-3, **score):
    config = make_config(
        ["score"],
        model=SKILLS,
        data=EASY,
        rewards={"exact_match": None},
        score={"stage_two_step": 1, **score},
        trainer={"per_device_train_batch_size": 16, "max_completion_length": 40, "beta": 0.0,
                 "learning_rate": learning_rate},
    )
    return train_steps(config, steps=steps, monitor=monitor)


class LossCalls:
    """Keeps, for each of score's loss terms, the term, its gradient on the policy's log-probs, and the k3 KL to
    the starting policy (score's snapshot; the run has no reference model) recomputed on every completion token
    and on the first attempt's."""

    def __init__(self):
        self.calls = []

    def __call__(self, hook, plugin, kwargs, result):
        if hook != "loss_term" or plugin != "score" or result is None:
            return
        ctx = kwargs["ctx"]
        reference = ctx.score(ctx.rollout.prompt_ids, ctx.rollout.completion_ids, model="score",
                              temperature=ctx.sampling_temperature).logprobs  # fmt: skip
        policy = ctx.policy_logps[:, : reference.size(1)]
        gap = reference - policy
        k3 = (torch.exp(gap) - gap - 1).detach()
        first = torch.zeros_like(k3)
        for row, segments in enumerate(ctx.rollout.columns["segments"]):
            first[row, segments[0].start : segments[0].end] = 1
        trained = ctx.loss_mask[:, : k3.size(1)].float()
        (grad,) = torch.autograd.grad(result, ctx.policy_logps, retain_graph=True)
        self.calls.append(
            {
                "term": result.item(),
                "first": ((k3 * first).sum() / first.sum()).item(),
                "every": ((k3 * trained).sum() / trained.sum()).item(),
                "grad_outside_first": grad[:, : k3.size(1)][first == 0].abs().max().item(),
                "grad_inside_first": grad[:, : k3.size(1)][first == 1].abs().max().item(),
                "step": ctx.step,
            }
        )


def test_stage_one_keeps_only_first_attempt_tokens_near_the_reference_and_stage_two_drops_it(make_config):
    calls = LossCalls()
    trainer = _run(make_config, steps=3, monitor=calls, stage_two_step=2, first_attempt_kl=0.5)
    steps = [c["step"] for c in calls.calls]
    assert set(steps) == {0, 1}  # stage II (step 2) adds no term
    moved = [c for c in calls.calls if c["step"] == 1]  # after one update the policy has left the reference
    assert moved
    for call in moved:
        assert call["term"] == pytest.approx(0.5 * call["first"], rel=1e-4)
        assert call["first"] > 0 and abs(call["first"] - call["every"]) > 1e-3 * call["first"]
        assert call["grad_outside_first"] == 0.0 and call["grad_inside_first"] > 0
    assert trainer.plugins.plugins["score"].stage == 2


def test_each_attempt_gets_its_own_advantage_and_the_instruction_is_never_trained(make_config):
    # Step 0 is stage I, step 1 stage II, sampled by a policy the small step left a retrier whose groups split.
    trainer = _run(make_config, steps=2, learning_rate=1e-5)
    rollout, decode = trainer._rollouts["train"], trainer.processing_class.decode
    assert set(rollout.columns["score_stage"]) == {2}
    instruction = trainer.processing_class("\n" + RETRY_INSTRUCTION + "\n", add_special_tokens=False)["input_ids"]
    values = []
    for i, segments in enumerate(rollout.columns["segments"]):
        first, second = segments
        ids, mask = rollout.completion_ids[i], rollout.loss_mask[i]
        assert ids[first.end : second.start] == instruction and set(mask[first.end : second.start]) == {0}
        assert set(mask[: first.end]) == {1} and set(mask[second.start :]) == {1}
        assert decode(ids[: first.end], skip_special_tokens=True) == first.text
        answer = rollout.columns["answer"][i]
        correct = [exact_match(s.text, answer) == 1.0 for s in segments]
        values.append(attempt_rewards(*correct, 2, 1.0))
    expected = segment_advantages(values, rollout.columns["segments"], rollout.group_size, rollout.advantages.size(1))
    assert torch.allclose(rollout.advantages, expected)
    assert rollout.advantages.abs().sum() > 0, "no reward spread in the batch: the check is void"


def test_the_stage_is_checkpointed_and_a_resumed_run_keeps_it(make_config, tmp_path):
    from stackrl.testing.fixtures import StopAt

    config = make_config(
        ["score"], model=SKILLS, data=EASY, rewards={"exact_match": None},
        score={"stage_two_step": 1, "first_attempt_kl": 0.0},
        trainer={"per_device_train_batch_size": 8, "max_completion_length": 40, "save_strategy": "steps", "save_steps": 1},
    )  # fmt: skip
    first = train_steps(config, steps=3, callbacks=[StopAt(1)])
    assert first.state.global_step == 1 and first.plugins.plugins["score"].stage == 2
    states = torch.load(tmp_path / "run" / "checkpoint-1" / "stackrl_plugins.pt", weights_only=True)
    assert states["score"] == {"stage": 2, "switched_at": 1}
    later = make_config(
        ["score"], model=SKILLS, data=EASY, rewards={"exact_match": None},
        score={"stage_two_step": 50, "first_attempt_kl": 0.0},
        trainer={"per_device_train_batch_size": 8, "max_completion_length": 40, "save_strategy": "steps", "save_steps": 1},
    )  # fmt: skip
    resumed = train_steps(later, steps=2, resume=str(tmp_path / "run" / "checkpoint-1"))
    assert resumed.state.global_step == 2
    assert set(resumed._rollouts["train"].columns["score_stage"]) == {2}  # stage II survives the resume


@pytest.mark.parametrize("recipe", ["score.yaml", "score-cpu.yaml"])
def test_the_recipes_add_no_kl_of_trls_on_every_token(recipe):
    """Stage II has no KL and stage I only the first attempt's, taken to the plugin's snapshot: trainer.beta is 0."""
    config = yaml.safe_load((Path(__file__).resolve().parents[3] / "configs" / "recipes" / recipe).read_text())
    assert config["trainer"]["beta"] == 0.0
