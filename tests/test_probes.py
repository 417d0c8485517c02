"""score_probes: one forward per trajectory and its probes gives what scoring every probe on its own gives."""

import pytest
import torch

from stackrl import StackrlError
from stackrl.probes import supports_tree_mask
from stackrl.run import build_trainer

CONTEXTS = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14, 15]]
TRAJECTORIES = [[20, 21, 22, 23, 24, 25], [26, 27, 28], [29, 30, 31, 32, 33, 34, 35, 36]]
PROBES = [
    # off the trajectory, on it (read off its own positions), partly on it, sharing a prefix, at both ends
    [(2, [40, 41, 42]), (2, [22, 23]), (3, [23, 24, 43]), (3, [40, 41, 44, 45]), (0, [46]), (6, [47, 48])],
    [(1, [40]), (3, [41, 42, 43, 44, 45])],
    [(4, [40, 41]), (4, [40, 42]), (7, [36, 49]), (8, [50, 51, 52])],
]


@pytest.fixture(scope="module")
def policy(tiny_model_dir, tmp_path_factory):
    from stackrl.testing.tiny import tiny_config

    tmp = tmp_path_factory.mktemp("probes")
    config = tiny_config(tiny_model_dir, ["digit_reward"], tmp_dir=tmp, output_dir=str(tmp / "run"))
    return build_trainer(config)._shared_policy


def one_by_one(policy, contexts, trajectories, probes, **options):
    """Each probe scored alone, as its own context + trajectory[:branch] and continuation."""
    rows = []
    for context, trajectory, probes in zip(contexts, trajectories, probes):
        for branch, ids in probes:
            alone = policy.score([context + trajectory[:branch]], [ids], **options)
            rows.append(alone)
    return rows


def assert_equal_to_one_by_one(policy, batch_size, contexts=CONTEXTS, trajectories=TRAJECTORIES, probes=PROBES,
                               **options):
    fast = policy.score_probes(contexts, trajectories, probes, batch_size=batch_size, **options)
    naive = one_by_one(policy, contexts, trajectories, probes, **options)
    assert fast.logprobs.shape[0] == len(naive) == sum(map(len, probes))
    for row, alone in enumerate(naive):
        n = int(alone.mask.sum())
        assert fast.mask[row].sum() == n
        assert torch.allclose(fast.logprobs[row, :n], alone.logprobs[0, :n], atol=1e-4), row
        if options.get("topk"):
            assert torch.allclose(fast.topk_logprobs[row, :n], alone.topk_logprobs[0, :n], atol=1e-4), row
            assert torch.equal(fast.topk_ids[row, :n], alone.topk_ids[0, :n]), row


@pytest.mark.parametrize("batch_size", [1, 3])
def test_one_forward_equals_probe_by_probe(policy, batch_size):
    assert supports_tree_mask(policy._trainer.model)
    assert_equal_to_one_by_one(policy, batch_size, topk=2, temperature=0.7)


@pytest.fixture
def forwards(policy):
    """The shapes of ``input_ids`` and of the attention mask of every forward of the policy, in order."""
    shapes = []
    hook = policy._trainer.model.register_forward_pre_hook(
        lambda _, args, kwargs: shapes.append((tuple(kwargs["input_ids"].shape), tuple(kwargs["attention_mask"].shape))),
        with_kwargs=True,
    )
    yield shapes
    hook.remove()


def test_trees_of_one_prompt_read_it_once(policy, forwards):
    # Trajectories 0, 1 and 3 share a prompt, 2 has a one-token context (nothing to cache), 4 a prompt of its own.
    contexts = [CONTEXTS[0], CONTEXTS[0], [10], CONTEXTS[0], CONTEXTS[2]]
    trajectories = [*TRAJECTORIES, TRAJECTORIES[0], TRAJECTORIES[1]]
    probes = [*PROBES, PROBES[2][:2], PROBES[1]]
    assert_equal_to_one_by_one(policy, 5, contexts, trajectories, probes, topk=2)
    # One forward over the three distinct prompts less their last tokens (4, 0 and 3 tokens), then one over the
    # five trees (their roots, trajectories and probes), whose mask spans the cache and the tree.
    (prompts, prompt_mask), (trees, tree_mask) = forwards[:2]
    assert prompts == (3, 4) and prompt_mask == (3, 1, 4, 4)
    assert trees[0] == 5 and tree_mask == (5, 1, trees[1], 4 + trees[1])


def test_one_token_contexts_need_no_cache(policy, forwards):
    contexts = [[10], [11]]
    assert_equal_to_one_by_one(policy, 2, contexts, TRAJECTORIES[:2], PROBES[:2], topk=1)
    trees, tree_mask = forwards[0]
    assert trees[0] == 2 and tree_mask == (2, 1, trees[1], trees[1])


def test_a_model_that_returns_no_cache_is_refused(policy):
    hook = policy._trainer.model.register_forward_hook(lambda _, args, output: setattr(output, "cache", None))
    try:
        with pytest.raises(StackrlError, match="returned no KV cache"):
            policy.score_probes(CONTEXTS, TRAJECTORIES, PROBES)
    finally:
        hook.remove()


def test_eager_attention_takes_the_additive_mask(policy):
    model = policy._trainer.model
    model.set_attn_implementation("eager")
    try:
        assert_equal_to_one_by_one(policy, batch_size=3)
    finally:
        model.set_attn_implementation("sdpa")


def test_models_a_4d_mask_cannot_steer_are_refused(policy):
    config = policy._trainer.model.config
    original = config.layer_types
    config.layer_types = ["linear_attention"] * len(original)  # read here only; the built layers keep theirs
    try:
        assert not supports_tree_mask(policy._trainer.model)
    finally:
        config.layer_types = original


def test_they_are_scored_probe_by_probe(policy, monkeypatch):
    import stackrl.probes

    monkeypatch.setattr(stackrl.probes, "supports_tree_mask", lambda model: False)
    monkeypatch.setattr(stackrl.probes, "probe_logprobs", None)  # the tree forward must not run
    assert_equal_to_one_by_one(policy, batch_size=2)


def test_trajectories_without_probes_and_text_contexts(policy):
    tokenizer = policy._trainer.processing_class
    prompt = "What is 2 + 3?\n"
    trajectory = tokenizer("2 + 3 = 5\nThe answer is 5.", add_special_tokens=False)["input_ids"]
    probe = tokenizer("\nThe answer is 6", add_special_tokens=False)["input_ids"]
    scores = policy.score_probes([prompt, prompt], [trajectory, trajectory], [[], [(3, probe)]])
    alone = policy.score([tokenizer(prompt)["input_ids"] + trajectory[:3]], [probe])
    assert scores.logprobs.shape == (1, len(probe))
    assert torch.allclose(scores.logprobs, alone.logprobs, atol=1e-4)
    assert policy.score_probes([prompt], [trajectory], [[]]).logprobs.numel() == 0


def test_bad_input_names_the_row(policy):
    with pytest.raises(StackrlError, match="branch position 4 of trajectory 1 is outside 0..3"):
        policy.score_probes(CONTEXTS[:2], TRAJECTORIES[:2], [[(0, [1])], [(4, [1])]])
    with pytest.raises(StackrlError, match="2 contexts, 1 trajectories and 2 probe lists"):
        policy.score_probes(CONTEXTS[:2], TRAJECTORIES[:1], PROBES[:2])
    with pytest.raises(StackrlError, match="context 0 is empty"):
        policy.score_probes([[]], [[1, 2]], [[(1, [3])]])
