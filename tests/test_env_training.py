"""The environment runner in real runs of the built-in tiny model through the ``env`` plugin: what TRL trains on
(masks, attention and padding where pad is eos), a user's TRL-style environment from a config alone, and a resumed
run playing the same episodes."""

from __future__ import annotations

import pytest
import torch

from stackrl.blocks.env import END_COLUMN, RETURN_COLUMN, SEED_COLUMN
from stackrl.run import build_trainer
from stackrl.samples import read_samples
from stackrl.testing.benchmark import one_thread
from stackrl.testing.fixtures import StopAt, train_steps

# The bandit read from the first digit the tiny (random) model writes, a turn without one answered "?": several
# turns, observations injected between them.
BANDIT = {"environment": "bandit", "kwargs": {"arms": 3, "pulls": 3}, "actions": r"(\d)", "turn_tokens": 4,
          "max_tokens": 40, "observation_tokens": 6, "on_unparsed": "feedback", "unparsed_feedback": "?"}
TRAINER = {"max_completion_length": 40}


def capture_inputs(trainer) -> list[dict]:
    """The padded batches TRL's loss receives."""
    seen, compute = [], trainer._compute_loss

    def recording(model, inputs):
        seen.append({k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)})
        return compute(model, inputs)

    trainer._compute_loss = recording
    return seen


def test_trl_trains_the_actions_only_and_attends_to_every_token_of_the_episode(make_config):
    with one_thread():
        trainer = build_trainer(make_config(["env"], env=BANDIT, trainer={**TRAINER, "max_steps": 1}))
        seen = capture_inputs(trainer)
        trainer.train()
    rollout = trainer._rollouts["train"]
    assert max(len(m) - sum(m) for m in rollout.loss_mask) > 0  # observations were injected
    eos = trainer.processing_class.eos_token_id
    inputs = seen[0]
    for row in range(inputs["completion_ids"].size(0)):  # TRL may shuffle the batch: find each row's episode
        padded = inputs["completion_ids"][row].tolist()
        match = [j for j, ids in enumerate(rollout.completion_ids) if padded[: len(ids)] == ids]
        assert len(match) == 1
        ids, n = rollout.completion_ids[match[0]], len(rollout.completion_ids[match[0]])
        # attention reaches every token of the episode, observations included, and stops at the padding: TRL's mask
        # ends at a completion's first eos, so an eos held inside (TRL issue 4974's class of bug) would cut it
        assert inputs["completion_mask"][row, :n].all() and not inputs["completion_mask"][row, n:].any()
        assert eos not in ids[:-1]
        # TRL's loss-only mask is the runner's: actions 1, observations 0
        assert inputs["tool_mask"][row, :n].tolist() == rollout.loss_mask[match[0]]
    assert rollout.columns[END_COLUMN] and all(isinstance(r, float) for r in rollout.columns[RETURN_COLUMN])
    assert torch.equal(rollout.rewards["env"], torch.tensor(rollout.columns[RETURN_COLUMN]))
    logged = read_samples(trainer.args.output_dir)  # samples.jsonl shows whole episodes
    assert any("\n?\n" in record["completion"] or "arms" in record["completion"] for record in logged)


class Counter:
    """A user's TRL-style environment, untouched: reset(**row) -> observation, a public method as a tool, get_reward."""

    def reset(self, **row):
        self.question, self.calls = row["question"], 0
        return "You may call <count>text</count>."

    def count(self, text: str) -> int:
        self.calls += 1
        return len(text)

    def get_reward(self) -> float:
        return 1.0 / (1 + self.calls)


def test_a_users_trl_environment_runs_from_a_config_alone(make_config):
    config = make_config(["env"], env={"environment": f"{__name__}:Counter"}, trainer={**TRAINER, "max_steps": 1})
    with one_thread():
        trainer = train_steps(config)
    rollout = trainer._rollouts["train"]
    assert all("You may call <count>text</count>." in trainer.processing_class.decode(p) for p in rollout.prompt_ids)
    assert rollout.columns[END_COLUMN] == ["done"] * len(rollout)  # no tool call: the answer ends the episode
    assert rollout.rewards["env"].tolist() == [1.0] * len(rollout)  # get_reward() of an environment called 0 times


def test_a_resumed_run_plays_the_same_episodes(make_config, tmp_path):
    saving = {**TRAINER, "save_strategy": "steps", "save_steps": 1, "max_steps": 2}
    with one_thread():
        straight = train_steps(make_config(["env"], env=BANDIT, trainer=saving, output_dir=str(tmp_path / "straight")))
        interrupted = make_config(["env"], env=BANDIT, trainer=saving, output_dir=str(tmp_path / "resumed"))
        train_steps(interrupted, callbacks=[StopAt(1)])
        resumed = train_steps(interrupted, resume=True)
    want, got = straight._rollouts["train"], resumed._rollouts["train"]
    assert got.columns[SEED_COLUMN] == want.columns[SEED_COLUMN]
    assert got.completion_ids == want.completion_ids and got.columns == want.columns
    assert all(torch.equal(a, b) for a, b in zip(straight.model.parameters(), resumed.model.parameters()))


def test_a_two_seat_game_trains_from_a_file_of_prompts(make_config, tmp_path):
    """Tic-tac-toe with the live policy in both seats: a group's rows are its episodes' seats in pairs, each
    rewarded with its own seat's zero-sum return."""
    prompts = tmp_path / "games.jsonl"
    prompts.write_text('{"question": "Tic-tac-toe. Play with move: N.", "answer": null}\n' * 8)  # no answer
    config = make_config(["env"], data={"source": str(prompts), "size": None}, rewards={"exact_match": None},
                         env={"environment": "tictactoe", "actions": r"([1-9])", "on_unparsed": "feedback",
                              "max_turns": 9, "turn_tokens": 3, "max_tokens": 60, "unparsed_feedback": "?"},
                         trainer={**TRAINER, "max_completion_length": 60, "max_steps": 1})
    with one_thread():
        trainer = train_steps(config)
    rollout = trainer._rollouts["train"]
    assert rollout.columns["env_seat"] == [0, 1] * (len(rollout) // 2)
    returns = rollout.columns[RETURN_COLUMN]
    assert all(returns[i] == -returns[i + 1] for i in range(0, len(rollout), 2))  # the pair's seats, zero-sum
    assert rollout.columns["env_episode"][::2] == rollout.columns["env_episode"][1::2]


class Chatter:
    """Two seats taking turns whatever they say, four turns; a seat earns the length of what it says."""

    seats = 2

    def reset(self, **row):
        self.turn, self.said = 0, 0
        return "say"

    def step(self, action):
        rewards = [0.0, 0.0]
        rewards[self.turn] = float(len(action))
        self.turn, self.said = 1 - self.turn, self.said + 1
        return "say", rewards, self.said == 4, {}


def test_a_snapshot_seat_plays_the_policy_as_it_was_when_first_needed(make_config):
    config = make_config(["env"], env={"environment": f"{__name__}:Chatter", "seats": ["policy", "snapshot:rival"],
                                       "actions": "text", "turn_tokens": 3},
                         rewards={"exact_match": None}, trainer={**TRAINER, "max_steps": 2})
    with one_thread():
        trainer = build_trainer(config)
        initial = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
        trainer.train()
    rival = trainer._shared_policy.snapshot("rival")
    assert rival.checkpointed  # saved with checkpoints, so a resumed run plays the same opponent
    assert all(torch.equal(p, initial[name]) for name, p in rival.model.named_parameters())  # made at the first rollout
    assert any(not torch.equal(p, initial[name]) for name, p in trainer.model.named_parameters())  # the policy trained
    assert trainer._rollouts["train"].columns["env_seat"] == [0] * len(trainer._rollouts["train"])
