"""Acceptance: ``torchrun --nproc_per_node 2`` on CPU (gloo): a group-level reward plugin sees whole groups, and
its rewards equal the single-process run's for the same seed; a stack of plugins trains and checkpoints.

One torchrun launch (tests/distributed_worker.py) trains two runs in the same two processes, to pay the start-up
of two interpreters once: ``greedy`` (group_rank + exact_match, greedy decoding) and ``stack`` (six test plugins,
sampled, checkpointing). The single-process reference of ``greedy`` trains in this process.

Layout: per_device_train_batch_size=6 on 2 processes, num_generations=4, so one generation batch is 12 rows = 3
groups and group 1 (rows 4..7) straddles the processes: rank 0 holds rows 4-5, rank 1 rows 6-7. Neither process
holds a whole number of groups (6 % 4 != 0), so a reward computed on local rows only could not even be reshaped
into groups. The single-process reference uses per_device_train_batch_size=12: the same global batch, so TRL's
seeded sampler feeds the same 3 prompts per step in both layouts.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch




NPROC = 2
PER_DEVICE = 6
GROUP = 4
GLOBAL = NPROC * PER_DEVICE
STEPS = 2
POOL_STEPS = 3
STACK = ["prompt_suffix", "digit_reward", "group_rank", "token_decay", "logp_loss", "step_counter"]
INJECTED = " Check it:"
EOS_BIAS = 4.0  # makes the random tiny model end completions early, so lengths vary and group_rank has work to do

assert GLOBAL % GROUP == 0 and PER_DEVICE % GROUP != 0, "a group must straddle the two processes"




def _eos_id(model_dir) -> int:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_dir).eos_token_id


def _runs(model_dir, out: Path) -> dict[str, dict]:
    eos_bias = [[[_eos_id(model_dir)], EOS_BIAS]]  # GenerationConfig.sequence_bias, in its list form
    return {
        # Why greedy: TRL seeds each process differently (set_seed(seed, device_specific=True)) and each process
        # samples its own rows in one batched generate call, so with sampling the same seed does NOT give the same
        # completions in the two layouts: the draws depend on the process index and on how many rows share the
        # call. Greedy decoding makes every completion a function of its prompt and the weights alone, so both
        # layouts generate the same rollout, and rewards (a function of the whole rollout) must be equal. Under
        # greedy the 4 completions of a group are identical, so group_rank's values here come from tie-breaking
        # alone; the sampled `stack` run below checks its ranking on varied lengths against a single-process
        # recomputation on the very rollout the two processes gathered.
        "greedy": {
            "name": "greedy",
            "plugins": ["group_rank"],
            "sections": {
                "rewards": {"exact_match": 1.0},
                "output_dir": str(out / "greedy" / "run"),
                "trainer": {
                    "per_device_train_batch_size": PER_DEVICE,
                    "num_generations": GROUP,
                    "max_steps": STEPS,
                    "generation_kwargs": {"do_sample": False, "sequence_bias": eos_bias},
                },
            },
        },
        "stack": {
            "name": "stack",
            "plugins": STACK,
            "sections": {
                "rewards": {"exact_match": 1.0},
                "output_dir": str(out / "stack" / "run"),
                "trainer": {
                    "per_device_train_batch_size": PER_DEVICE,
                    "num_generations": GROUP,
                    "max_steps": STEPS,
                    "save_strategy": "steps",
                    "save_steps": 2,
                    "generation_kwargs": {"sequence_bias": eos_bias},
                },
            },
        },
        # Roles: reset groups continue failed attempts of the built-in model, derived through ctx.generate.
        "roles": {
            "name": "roles",
            "plugins": ["rrpo", "group_rank"],
            "sections": {
                "model": {"name_or_path": "stackrl/arith-tiny"},
                "data": {"options": {"categories": ["3 steps, 2-digit"]}},
                "rewards": {"exact_match": 1.0},
                "output_dir": str(out / "roles" / "run"),
                "rrpo": {"reset": "oracle", "reset_share": 1.0},
                "trainer": {
                    "per_device_train_batch_size": PER_DEVICE,
                    "num_generations": GROUP,
                    "max_steps": STEPS,
                    "max_completion_length": 48,
                },
            },
        },
        # Episodes in an environment (stackrl.blocks.env): every turn one ctx.generate over the rows still playing,
        # split over the processes, the episodes seeded from the step and the group, each process with its own
        # environment instances. (Not compared with one process: the bandit's text is foreign to the built-in model,
        # whose greedy near-ties then flip with how a turn's rows are batched and padded.)
        "env": {
            "name": "env",
            "plugins": ["env", "group_rank"],
            "sections": {
                "model": {"name_or_path": "stackrl/arith-tiny"},
                "rewards": {"exact_match": None},
                "output_dir": str(out / "env" / "run"),
                "env": {"environment": "bandit", "kwargs": {"arms": 3, "pulls": 3}, "actions": r"(\d)",
                        "turn_tokens": 4, "max_tokens": 40, "observation_tokens": 6, "on_unparsed": "feedback",
                        "unparsed_feedback": "?"},
                "trainer": {
                    "per_device_train_batch_size": PER_DEVICE,
                    "num_generations": GROUP,
                    "max_steps": STEPS,
                    "max_completion_length": 40,
                    "generation_kwargs": {"do_sample": False},
                },
            },
        },
        # Multi-turn trajectories (stackrl.blocks.turns) sampled turn by turn through ctx.generate from token ids,
        # split over the processes: score's two attempts and pag's answer, check and revision. Greedy, so the rollout
        # and the rewards must be those of one process.
        **{
            name: {
                "name": name,
                "plugins": [name, "group_rank"],
                "sections": {
                    "model": {"name_or_path": "stackrl/arith-skills"},
                    "data": {"options": {"categories": ["2 steps, 1-digit", "3 steps, 1-digit"]}},
                    "rewards": {"exact_match": None},
                    "output_dir": str(out / name / "run"),
                    name: settings,
                    "trainer": {
                        "per_device_train_batch_size": PER_DEVICE,
                        "num_generations": GROUP,
                        "max_steps": STEPS,
                        "max_completion_length": 40,
                        "beta": 0.001,  # the reference model score's first-attempt KL is taken to
                        "generation_kwargs": {"do_sample": False},
                    },
                },
            }
            for name, settings in (("score", {"stage_two_step": 1}), ("pag", {"turns": 2}))
        },
        # A prompt pool steered from train_begin and post_step: both processes draw the same rows, and the same as
        # one process with the whole batch (greedy, so the rollouts must be equal too).
        "pool": {
            "name": "pool",
            "plugins": ["pool_steer", "group_rank"],
            "sections": {
                "rewards": {"exact_match": 1.0},
                "output_dir": str(out / "pool" / "run"),
                "pool_steer": {"category": "3 steps, 1-digit", "retire_at": 1},
                "trainer": {
                    "per_device_train_batch_size": PER_DEVICE,
                    "num_generations": GROUP,
                    "max_steps": POOL_STEPS,
                    "generation_kwargs": {"do_sample": False, "sequence_bias": eos_bias},
                },
            },
        },
        # Policy operations: eepo's scratch update (gradients summed over the processes) and sampling of the copy,
        # and a supervised phase restoring a snapshot at step 1. Greedy and SGD, so that the two layouts must agree.
        "policyops": {
            "name": "policyops",
            "plugins": ["eepo", "restart_phase", "group_rank"],
            "sections": {
                "rewards": {"exact_match": 1.0},
                "output_dir": str(out / "policyops" / "run"),
                "eepo": {"learning_rate": 0.5},
                "restart_phase": {"at_step": 1, "learning_rate": 0.05},
                "trainer": {
                    "per_device_train_batch_size": PER_DEVICE,
                    "num_generations": GROUP,
                    "max_steps": STEPS,
                    "optim": "sgd",
                    "learning_rate": 0.05,
                    "generation_kwargs": {"do_sample": False, "sequence_bias": eos_bias},
                },
            },
        },
        # Columns and an injected-text loss mask from the sample stage, across the gather and the scatter.
        "injected": {
            "name": "injected",
            "plugins": ["injected_turn"],
            "sections": {
                "rewards": {"exact_match": 1.0},
                "output_dir": str(out / "injected" / "run"),
                "injected_turn": {"inject": INJECTED},
                "trainer": {
                    "per_device_train_batch_size": PER_DEVICE,
                    "num_generations": GROUP,
                    "max_steps": STEPS,
                    "generation_kwargs": {"sequence_bias": eos_bias},
                },
            },
        },
    }


@pytest.fixture(scope="module")
def launched(tiny_model_dir, tmp_path_factory, worker):
    """Both runs trained by 2 processes; returns (runs, out folder)."""
    out = tmp_path_factory.mktemp("distributed")
    runs = _runs(tiny_model_dir, out)
    worker.launch(tiny_model_dir, list(runs.values()), out)
    return runs, out


def _check_whole_groups(report: dict) -> None:
    assert report["world_size"] == NPROC and report["distributed_type"] == "DistributedType.MULTI_CPU"
    assert report["backend"] == "gloo"
    assert report["global_step"] == STEPS
    assert [(s["group_size"], s["rows"]) for s in report["seen"]] == [(GROUP, GLOBAL)] * STEPS
    assert len(report["reward_calls"]) == STEPS
    for call in report["reward_calls"]:
        prompts = call["prompts"]
        assert len(prompts) == len(call["completion_ids"]) == GLOBAL
        groups = [prompts[i : i + GROUP] for i in range(0, GLOBAL, GROUP)]
        assert all(len(set(group)) == 1 for group in groups), f"rows of a group have different prompts: {groups}"


def _group_rank_single_process(call: dict) -> list[float]:
    """group_rank's rewards for ``call``'s rollout, computed in this one process."""
    from stackrl.context import Rollout
    from stackrl_test_plugins import GroupRankConfig, GroupRankReward

    n = len(call["prompts"])
    rollout = Rollout(
        prompts=call["prompts"],
        completions=[""] * n,
        prompt_ids=[[]] * n,
        completion_ids=call["completion_ids"],
        columns={},
        group_size=call["group_size"],
    )
    return GroupRankReward(GroupRankConfig(record=False)).reward(SimpleNamespace(rollout=rollout)).tolist()


def test_group_reward_sees_whole_groups_and_matches_single_process(launched, tiny_model_dir, tmp_path, worker):
    runs, out = launched
    ranks = worker.reports(out, "greedy")
    for report in ranks:
        _check_whole_groups(report)
    # Both processes saw the same, whole rollout and computed the same rewards; DDP kept the weights in step.
    assert ranks[0]["seen"] == ranks[1]["seen"]
    assert ranks[0]["reward_calls"] == ranks[1]["reward_calls"]
    assert ranks[0]["param_hash"] == ranks[1]["param_hash"]

    # The single-process reference: the same global batch on one process, same seed (threads as the workers').
    reference = worker.single_process(tiny_model_dir, runs["greedy"], tmp_path, GLOBAL)
    assert reference["world_size"] == 1 and reference["global_step"] == STEPS
    assert [(s["group_size"], s["rows"]) for s in reference["seen"]] == [(GROUP, GLOBAL)] * STEPS

    for got, want in zip(ranks[0]["reward_calls"], reference["reward_calls"], strict=True):
        assert got["prompts"] == want["prompts"]  # the seeded sampler fed the same prompts
        assert got["completion_ids"] == want["completion_ids"]  # greedy: the same completions
        assert got["builtin_rewards"] == want["builtin_rewards"]
        assert got["result"] == want["result"]
    assert ranks[0]["seen"] == reference["seen"]


def test_plugin_stack_two_processes_with_checkpoint(launched, worker):
    runs, out = launched
    ranks = worker.reports(out, "stack")
    for report in ranks:
        _check_whole_groups(report)
        assert report["steps_counted"] == STEPS
    # Each process sampled its own half with its own RNG, yet both hold the same gathered rollout.
    assert ranks[0]["reward_calls"] == ranks[1]["reward_calls"]
    assert ranks[0]["seen"] == ranks[1]["seen"]
    assert ranks[0]["param_hash"] == ranks[1]["param_hash"]

    straddling_varied = False
    for call in ranks[0]["reward_calls"]:
        # prompt_suffix changed what was generated from; the rollout keeps the dataset's prompts.
        assert all(text.endswith(" Answer:") for text in call["prompt_texts"]), call["prompt_texts"]
        assert not any(p.endswith(" Answer:") for p in call["prompts"])
        # The rewards the two processes computed equal a single-process computation on the whole rollout.
        assert call["result"] == _group_rank_single_process(call)
        lengths = [len(ids) for ids in call["completion_ids"]]
        straddling_varied |= len(set(lengths[GROUP : 2 * GROUP])) > 1
    assert straddling_varied, "sampled lengths never varied within the straddling group: the ranking check is void"

    checkpoints = sorted(p.name for p in (out / "stack" / "run").glob("checkpoint-*"))
    assert checkpoints == [f"checkpoint-{STEPS}"]
    folder = out / "stack" / "run" / checkpoints[0]
    for name in ("stackrl_plugins.pt", "stackrl_config.yaml", "stackrl_versions.json", "model.safetensors"):
        assert (folder / name).is_file(), name
    states = torch.load(folder / "stackrl_plugins.pt", weights_only=True)
    assert states["step_counter"]["steps"] == STEPS
    assert len(states["step_counter"]["reward_sums"]) == STEPS
    assert [s["rewards"] for s in states["group_rank"]["seen"]] == [s["rewards"] for s in ranks[0]["seen"]]


def test_pool_draws_the_same_rows_on_two_processes_as_on_one(launched, tiny_model_dir, tmp_path, worker):
    runs, out = launched
    ranks = worker.reports(out, "pool")
    assert ranks[0]["pool_drawn"] == ranks[1]["pool_drawn"]
    assert ranks[0]["param_hash"] == ranks[1]["param_hash"]
    reference = worker.single_process(tiny_model_dir, runs["pool"], tmp_path, GLOBAL)
    assert ranks[0]["pool_drawn"] == reference["pool_drawn"]
    drawn = reference["pool_drawn"]
    assert len(drawn) == POOL_STEPS and not set(drawn[0]) & set(drawn[1])  # retired after step 1
    for got, want in zip(ranks[0]["reward_calls"], reference["reward_calls"], strict=True):
        assert got["prompts"] == want["prompts"] and got["completion_ids"] == want["completion_ids"]
        assert len(set(got["prompts"])) == GLOBAL // GROUP


def test_columns_and_loss_mask_survive_gather_and_scatter(launched, tiny_model_dir, worker):
    """Each process's loss stage holds its own rows, tagged in the sample stage, each with its sampled tokens
    trained and the injected ones masked; together the two processes hold every row of every step once."""
    from transformers import AutoTokenizer

    runs, out = launched
    n_injected = len(AutoTokenizer.from_pretrained(tiny_model_dir)(INJECTED, add_special_tokens=False).input_ids)
    ranks = worker.reports(out, "injected")
    seen = [row for report in ranks for row in report["seen_in_loss"]]
    assert len(seen) == STEPS * GLOBAL and all(len(report["seen_in_loss"]) == STEPS * PER_DEVICE for report in ranks)
    assert sorted(tag for tag, *_ in seen) == sorted([f"row{i}" for i in range(GLOBAL)] * STEPS)
    for rank, report in enumerate(ranks):  # TRL shuffles rows within a process, never across
        assert {tag for tag, *_ in report["seen_in_loss"]} == {f"row{i}" for i in range(rank * PER_DEVICE, (rank + 1) * PER_DEVICE)}
    assert len({sampled for _, sampled, _, _ in seen}) > 1, "sampled lengths never varied: the row check is void"
    for tag, sampled, trained, whole in seen:
        assert (trained, whole) == (sampled, sampled + n_injected), tag


def test_role_groups_derived_on_two_processes_are_the_same_on_both(launched, worker):
    """Reset groups sample first attempts and continuations through ctx.generate, split over the processes: both
    processes derive the same prefixes and hold the same rollout, roles included, and train the same weights."""
    runs, out = launched
    ranks = worker.reports(out, "roles")
    assert ranks[0]["reward_calls"] == ranks[1]["reward_calls"]
    assert ranks[0]["param_hash"] == ranks[1]["param_hash"]
    resets = 0
    for call in ranks[0]["reward_calls"]:
        assert len(call["roles"]) == GLOBAL and all(call["roles"][i] == call["roles"][i - i % GROUP] for i in range(GLOBAL))
        for i, role in enumerate(call["roles"]):
            if role == "reset":  # trained on the question followed by the kept steps
                resets += 1
                assert call["prompt_texts"][i].startswith(call["prompts"][i].strip())
                assert len(call["prompt_texts"][i]) > len(call["prompts"][i].strip())
    assert resets, "no reset group in either step: the check is void"


@pytest.mark.parametrize("name", ["score", "pag"])
def test_multi_turn_rollouts_on_two_processes_are_rewarded_as_on_one(launched, tiny_model_dir, tmp_path, worker, name):
    """Each turn of every trajectory is sampled in one ctx.generate call split over the processes, from the
    tokens before it: both processes hold the same rollout and rewards, and they equal one process's."""
    runs, out = launched
    ranks = worker.reports(out, name)
    assert ranks[0]["reward_calls"] == ranks[1]["reward_calls"]
    assert ranks[0]["param_hash"] == ranks[1]["param_hash"]
    reference = worker.single_process(tiny_model_dir, runs[name], tmp_path, GLOBAL)
    assert len(reference["reward_calls"]) == STEPS
    for got, want in zip(ranks[0]["reward_calls"], reference["reward_calls"], strict=True):
        assert got["prompts"] == want["prompts"] and got["completion_ids"] == want["completion_ids"]
    rewards = [call for call in reference["plugin_rewards"] if call["plugin"] == name]
    assert len(rewards) == STEPS and ranks[0]["plugin_rewards"] == ranks[1]["plugin_rewards"] == reference["plugin_rewards"]


def test_environment_episodes_on_two_processes_are_the_same_on_both(launched, worker):
    """Each process runs its own environment instances: both play the same episodes (every turn's generation split
    over them) and compute the same returns, turn by turn, without a deadlock."""
    runs, out = launched
    ranks = worker.reports(out, "env")
    assert ranks[0]["reward_calls"] == ranks[1]["reward_calls"] and len(ranks[0]["reward_calls"]) == STEPS
    returns = [call for call in ranks[0]["plugin_rewards"] if call["plugin"] == "env"]
    assert len(returns) == STEPS and ranks[0]["plugin_rewards"] == ranks[1]["plugin_rewards"]
    assert any(r for call in returns for r in call["result"]), "no episode earned a reward: the check is void"
    turn_tokens = runs["env"]["sections"]["env"]["turn_tokens"]
    assert max(len(ids) for call in ranks[0]["reward_calls"] for ids in call["completion_ids"]) > 2 * turn_tokens


def test_policy_operations_on_two_processes_match_one_process(launched, tiny_model_dir, tmp_path, worker):
    """eepo's copy (a scratch update whose gradients are summed over both processes) samples the same second
    halves as one process does, and the supervised phase restarting from a snapshot ends at the same weights."""
    runs, out = launched
    ranks = worker.reports(out, "policyops")
    for report in ranks:
        _check_whole_groups(report)
    assert ranks[0]["reward_calls"] == ranks[1]["reward_calls"]
    assert ranks[0]["param_hash"] == ranks[1]["param_hash"]
    reference = worker.single_process(tiny_model_dir, runs["policyops"], tmp_path, GLOBAL)
    for got, want in zip(ranks[0]["reward_calls"], reference["reward_calls"], strict=True):
        assert got["prompts"] == want["prompts"] and got["completion_ids"] == want["completion_ids"]
    got = torch.load(out / "policyops" / "rank0-trainable.pt", weights_only=True)
    want = torch.load(tmp_path / "single" / "rank0-trainable.pt", weights_only=True)
    for name, weight in want.items():
        torch.testing.assert_close(got[name], weight, atol=1e-5, rtol=1e-4, msg=name)
