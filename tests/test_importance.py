"""Truncated importance weights of rows another policy wrote (Samples.behaviour_logprobs), through the real trainer.

The test plugin ``snapshot_replay`` samples each group's last row from a snapshot of the starting policy and hands
its behaviour log-probs over; the other rows are sampled by the policy now. The weights the host applied are read
where TRL's loss receives them (the micro-batch's advantages in ``loss_term``) and checked against a computation by
hand: the policy that generated each step's rollout loaded from the run's checkpoint, the behaviour policy from the
tiny model's folder, each scored by a plain forward. The lesson of TRL's replay buffer (huggingface/trl#6804),
whose unit tests passed on hand-built tensors while the real call path degenerated: check the real path.
"""

from __future__ import annotations

import math

import pytest
import torch
from transformers import AutoModelForCausalLM

from stackrl.errors import ConfigError, PluginError
from stackrl.importance import checked_behaviour_logprobs, importance_weights, weighted
from stackrl.testing.fixtures import StopAt, train_steps

C = 1.0  # low enough that the policy's first update pushes some tokens' ratio past it
TRAINER = {"per_device_train_batch_size": 8, "num_generations": 4, "learning_rate": 1e-2, "max_steps": 2,
           "save_strategy": "steps", "save_steps": 1}
# experience_keeper keeps each group's best row in an experience library: its state lives through the same resume
# and two processes.
PLUGINS = ["snapshot_replay", "digit_reward", "experience_keeper"]


def test_weights_per_token_and_per_sequence_by_hand():
    now = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, -1.0, 0.0]])
    behaviour = torch.tensor([[-1.5, -1.0, -3.0], [-0.2, -1.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])  # the third token injected (or padding): weight 1
    weights, ratios, counted = importance_weights(now, behaviour, mask, 1.2, "token")
    want = torch.tensor([[min(1.2, math.exp(0.5)), math.exp(-1.0), 1.0], [math.exp(-0.8), 1.0, 1.0]])
    assert torch.allclose(weights, want)
    assert counted.tolist() == [[True, True, False], [True, True, False]]
    assert ratios[0, 0] == pytest.approx(math.exp(0.5))
    weights, _, _ = importance_weights(now, behaviour, mask, 1.2, "sequence")
    assert torch.allclose(weights, torch.tensor([math.exp(-0.5), math.exp(-0.8)]))
    weights, _, _ = importance_weights(now, behaviour, mask, 0.5, "sequence")
    assert torch.allclose(weights, torch.tensor([0.5, math.exp(-0.8)]))
    assert weighted(torch.tensor([2.0, -1.0]), torch.tensor([[0.5, 1.0], [1.0, 0.25]])).tolist() == [[1.0, 2.0], [-1.0, -0.25]]
    assert weighted(torch.tensor([[2.0, 4.0]]), torch.tensor([0.5])).tolist() == [[1.0, 2.0]]


def test_behaviour_log_probs_are_checked_against_the_completions():
    where = "plugin 'replay' hook 'generate_rollout' at step 3"
    assert checked_behaviour_logprobs(where, [None, [-0.5, 0]], [[1], [2, 3]]) == [None, [-0.5, 0.0]]
    assert checked_behaviour_logprobs(where, [None, None], [[1], [2]]) is None  # no row marked: nothing to weigh
    with pytest.raises(PluginError, match="returned 1 behaviour_logprobs rows; expected 2"):
        checked_behaviour_logprobs(where, [None], [[1], [2]])
    with pytest.raises(PluginError, match="2 behaviour log-probs for row 1, whose completion has 3 tokens"):
        checked_behaviour_logprobs(where, [None, [-1.0, -1.0]], [[1], [2, 3, 4]])
    with pytest.raises(PluginError, match=r"at step 3 returned behaviour log-prob 0.5 for row 0"):
        checked_behaviour_logprobs(where, [[0.5]], [[1]])  # a probability given for a log-prob
    with pytest.raises(PluginError, match="behaviour log-prob nan for row 0"):
        checked_behaviour_logprobs(where, [[math.nan]], [[1]])


def _logprobs(model, prompt_ids, completion_ids) -> torch.Tensor:
    """The completion's token log-probs by one plain forward of prompt and completion (sampling temperature 1)."""
    ids = torch.tensor([list(prompt_ids) + list(completion_ids)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
    return torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(completion_ids).unsqueeze(1)).squeeze(1)


def _check_by_hand(seen: dict, run_dir, model_dir, in_loss=None) -> int:
    """Check every step's weights against the hand computation, and the loss's advantages where given; returns how
    many replayed tokens had a ratio past C (so a truncation that never bit cannot pass for one that works)."""
    behaviour_model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    past = 0
    for step, view in sorted(seen.items(), key=lambda item: int(item[0])):
        step = int(step)
        policy = AutoModelForCausalLM.from_pretrained(run_dir / f"checkpoint-{step}").eval() if step else behaviour_model
        weights = torch.tensor(view["weights"])
        assert weights.dim() == 2, "token level: one weight per token"
        replayed = 0
        for row, (prompt, completion) in enumerate(zip(view["prompt_ids"], view["completion_ids"])):
            n = len(completion)
            if view["behaviour"][row] is None:  # sampled now: weight exactly 1
                assert torch.equal(weights[row], torch.ones(weights.size(1))), (step, row)
                continue
            replayed += 1
            behaviour = _logprobs(behaviour_model, prompt, completion)
            assert torch.allclose(torch.tensor(view["behaviour"][row]), behaviour, atol=1e-4)
            ratio = torch.exp(_logprobs(policy, prompt, completion) - behaviour)
            past += int((ratio > C + 1e-3).sum())
            assert torch.allclose(weights[row, :n], ratio.clamp(max=C), atol=1e-4), (step, row)
            assert torch.equal(weights[row, n:], torch.ones(weights.size(1) - n))
        assert replayed == len(view["prompt_ids"]) // 4
    for step, row, received in in_loss or ():
        view = seen[step]
        n = len(view["completion_ids"][row])
        want = torch.tensor(view["advantages"][row]) * torch.tensor(view["weights"][row][:n])
        if view["behaviour"][row] is None:  # a fresh row's advantage reaches the loss unchanged, bit for bit
            assert torch.equal(torch.tensor(received[:n]), torch.full((n,), view["advantages"][row])), (step, row)
        else:
            assert torch.allclose(torch.tensor(received[:n]), want, atol=1e-6), (step, row)
    return past


@pytest.fixture(scope="module")
def straight(tiny_model_dir, tmp_path_factory):
    """Two steps straight, checkpointing each, and the same run stopped after one and resumed."""
    from stackrl.testing.tiny import tiny_config

    folder = tmp_path_factory.mktemp("importance")
    runs = {}
    for name in ("straight", "resumed"):
        config = tiny_config(tiny_model_dir, PLUGINS, tmp_dir=folder / name, output_dir=str(folder / name / "run"),
                             trainer=TRAINER, importance={"truncation": C})
        if name == "resumed":
            train_steps(config, callbacks=[StopAt(1)])
            runs[name] = train_steps(config, resume=True)
        else:
            runs[name] = train_steps(config)
    return runs, folder


def test_replayed_rows_get_the_truncated_ratio_and_fresh_rows_exactly_one(straight, tiny_model_dir):
    runs, folder = straight
    plugin = runs["straight"].plugins.plugins["snapshot_replay"]
    assert sorted(plugin.seen) == [0, 1]
    past = _check_by_hand(plugin.seen, folder / "straight" / "run", tiny_model_dir, plugin.in_loss)
    assert past, "no replayed token's ratio passed the truncation: the check of truncation is void"
    assert {step for step, _, _ in plugin.in_loss} == {0, 1}
    logged = [row for row in runs["straight"].state.log_history if "importance/ratio_mean" in row]
    assert len(logged) == 2 and all(row["importance/rows"] == 2 for row in logged)
    assert 0 < logged[-1]["importance/clipped_share"] < 1


def test_a_resumed_run_gives_the_same_weights(straight):
    runs, _ = straight
    want, got = runs["straight"].plugins.plugins["snapshot_replay"], runs["resumed"].plugins.plugins["snapshot_replay"]
    assert list(got.seen) == [1], "the resumed run trains the second step only"
    assert got.seen[1] == want.seen[1]


def test_a_resumed_run_keeps_the_same_experience_library(straight):
    runs, _ = straight
    want, got = (runs[name].plugins.plugins["experience_keeper"].summary() for name in ("straight", "resumed"))
    assert got == want
    assert len(want["records"]) == 3, "the library never filled: its eviction went untested"
    assert any(want["found"]), "no step retrieved anything: retrieval went untested"


def test_sequence_level_gives_one_weight_per_row(make_config):
    """At the first step the snapshot is the policy: each replayed row's weight is 1 up to rounding, a fresh row's
    exactly 1, and the advantages stay one per row."""
    trainer = train_steps(make_config(["snapshot_replay", "digit_reward"], importance={"level": "sequence"},
                                      trainer={**TRAINER, "max_steps": 1, "save_strategy": "no"}))
    view = trainer.plugins.plugins["snapshot_replay"].seen[0]
    weights = torch.tensor(view["weights"])
    assert weights.shape == (8,)
    fresh = torch.tensor([b is None for b in view["behaviour"]])
    assert torch.equal(weights[fresh], torch.ones(6)) and torch.allclose(weights[~fresh], torch.ones(2), atol=1e-4)
    assert trainer._rollouts["train"].advantages.shape == (8,)


def test_a_run_without_behaviour_log_probs_is_unchanged(make_config, hook_recorder):
    """A generate_rollout that gives no behaviour log-probs: no weights, no scoring pass, nothing logged."""
    trainer = train_steps(make_config(["greedy_rollout"], trainer={"max_steps": 1}))
    assert trainer._rollouts["train"].importance_weights is None
    assert not any("importance/ratio_mean" in row for row in trainer.state.log_history)


def test_two_processes_give_the_weights_one_computes_by_hand_and_keep_one_library(tiny_model_dir, tmp_path, worker):
    out = tmp_path / "two"
    run = {"name": "replay", "plugins": PLUGINS, "sections": {
        "output_dir": str(out / "replay" / "run"), "importance": {"truncation": C},
        "trainer": {**TRAINER, "per_device_train_batch_size": 4}}}
    out.mkdir()
    worker.launch(tiny_model_dir, [run], out)
    ranks = worker.reports(out, "replay")
    assert ranks[0]["replayed"] == ranks[1]["replayed"]
    assert ranks[0]["param_hash"] == ranks[1]["param_hash"]
    assert ranks[0]["experience"] == ranks[1]["experience"] and ranks[0]["experience"]["records"]
    assert _check_by_hand(ranks[0]["replayed"], out / "replay" / "run", tiny_model_dir)


@pytest.mark.parametrize("setting, message", [
    ({"truncation": 0.0}, "importance.truncation must be above 0"),
    ({"level": "row"}, "importance.level must be one of token, sequence"),
])
def test_bad_settings_are_refused(make_config, setting, message):
    with pytest.raises(ConfigError, match=message):
        make_config(importance=setting)
