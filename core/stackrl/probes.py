"""Many short continuations ("probes") of one trajectory, scored in one forward.

A probe is ``(branch, probe_ids)``: ``probe_ids`` continue ``context + trajectory[:branch]``. Scoring each probe
on its own re-reads the whole prefix every time; here the trajectory and every probe of it become one prefix tree
of tokens, laid out in one row. A token attends to its ancestors in the tree and sits at the position its depth
gives, so its hidden state is the one it would have in its own sequence. Probe tokens that follow the trajectory
(or an earlier probe) reuse that node, so only the tokens where a probe diverges are added: the trajectory's own
tokens and a shared probe prefix such as ``"\\nThe answer is: "`` are computed once. The context comes before the
tree as a KV cache, read once per batch for all the trees that share it (a group's completions of one prompt).

The tree travels as a 4-D attention mask over cache and tree, which transformers hands unchanged to the attention
of models built on its mask utilities, with ``sdpa`` (a boolean mask) or ``eager`` (an additive one).
:func:`supports_tree_mask` says whether a model qualifies; callers score the probes one by one otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers.cache_utils import Cache

from stackrl.errors import StackrlError

TREE_ATTENTION = ("sdpa", "eager")


def supports_tree_mask(model) -> bool:
    """Whether ``model`` takes a 4-D mask in every layer: sdpa/eager attention, attention layers only."""
    config = model.config
    layer_types = getattr(config, "layer_types", None) or ["full_attention"]
    return getattr(config, "_attn_implementation", None) in TREE_ATTENTION and set(layer_types) == {"full_attention"}


def check_probes(contexts, trajectories, probes) -> None:
    """Refuse a trajectory without context and a branch position outside its trajectory, naming the row."""
    for row, (context, trajectory, branches) in enumerate(zip(contexts, trajectories, probes)):
        if not context:
            raise StackrlError(f"score_probes(): context {row} is empty; the first token needs one to follow")
        for branch, _ in branches:
            if not 0 <= branch <= len(trajectory):
                raise StackrlError(
                    f"score_probes(): branch position {branch} of trajectory {row} is outside 0..{len(trajectory)}"
                )


@dataclass
class _Tree:
    """One row: tokens in insertion order (a parent always precedes its children) and their parents.

    It starts as the single path of ``chain`` (a trajectory after its context's last token): node ``i`` is its
    ``i``-th token.
    """

    chain: list[int]
    tokens: list[int] = field(init=False)
    parents: list[int] = field(init=False)
    depths: list[int] = field(init=False)
    children: dict[tuple[int, int], int] = field(init=False)

    def __post_init__(self):
        n = len(self.chain)
        self.tokens, self.parents, self.depths = list(self.chain), list(range(-1, n - 1)), list(range(n))
        self.children = {(i - 1, token): i for i, token in enumerate(self.chain)}

    def child(self, parent: int, token: int) -> int:
        """The node of ``token`` under ``parent``, added if the tree has none yet."""
        node = self.children.get((parent, token))
        if node is None:
            node = len(self.tokens)
            self.tokens.append(token)
            self.parents.append(parent)
            self.depths.append(self.depths[parent] + 1)
            self.children[(parent, token)] = node
        return node


def _build(context: list[int], trajectory: list[int], probes) -> tuple[_Tree, list[list[int]]]:
    """The prefix tree of one trajectory and, per probe, the node each of its tokens is predicted from.

    The tree is rooted at the context's last token (it predicts the first trajectory token and any probe at
    branch 0); the rest of the context is read once per batch into the KV cache. A probe's last token predicts
    nothing, so it is only a target, never a node.
    """
    tree = _Tree([context[-1], *trajectory])
    child, predicted_from = tree.child, []
    for branch, probe_ids in probes:
        parents = [branch]  # the chain's node of the last token before the branch
        for token in probe_ids[:-1]:
            parents.append(child(parents[-1], token))
        predicted_from.append(parents[: len(probe_ids)])
    return tree, predicted_from


def _lay_out(trees: list[_Tree], starts: list[int], pad_id: int):
    """Trees one per row from column 0: token ids, position ids (``start`` + depth) and the ``(B, W, W)`` mask.

    Node ``q`` may attend to node ``k`` when ``k`` is ``q`` or one of its ancestors; padding attends to itself only.
    A tree's chain is a single path, whose mask is the causal triangle. A probe node's row is its parent's row plus
    itself; the nodes of the whole batch are filled a generation at a time (those whose parent is already filled),
    so the loop runs once per token of the longest probe rather than once per node or per tree.
    """
    width = max(len(tree.tokens) for tree in trees)
    ids = torch.full((len(trees), width), pad_id, dtype=torch.long)
    positions = torch.zeros_like(ids)
    mask = torch.eye(width, dtype=torch.bool).repeat(len(trees), 1, 1)
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    pending, parents = [], []
    for row, (tree, start) in enumerate(zip(trees, starts)):
        n, chain, first = len(tree.tokens), len(tree.chain), row * width
        ids[row, :n] = torch.tensor(tree.tokens)
        positions[row, :n] = torch.tensor(tree.depths) + start
        mask[row, :chain, :chain] = causal[:chain, :chain]
        pending += range(first + chain, first + n)
        parents += [first + parent for parent in tree.parents[chain:]]
    rows = mask.view(-1, width)
    pending, parents = torch.tensor(pending, dtype=torch.long), torch.tensor(parents, dtype=torch.long)
    filled = torch.ones(len(rows), dtype=torch.bool)
    filled[pending] = False
    while len(pending):
        ready = filled[parents]
        nodes = pending[ready]
        rows[nodes] = rows[parents[ready]]
        rows[nodes, nodes % width] = True
        filled[nodes] = True
        pending, parents = pending[~ready], parents[~ready]
    return ids, positions, mask


def _attention_mask(model, mask: torch.Tensor, device) -> torch.Tensor:
    """A ``(B, Q, K)`` boolean mask as the model's attention takes it: ``(B, 1, Q, K)``, additive for eager."""
    mask = mask.unsqueeze(1).to(device)
    if model.config._attn_implementation == "eager":  # eager adds the mask to the attention scores
        dtype = model.get_input_embeddings().weight.dtype
        mask = torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill(~mask, torch.finfo(dtype).min)
    return mask


def _prompt_cache(model, prompts: list[tuple[int, ...]], which: list[int], pad_id: int, device):
    """The KV cache of ``prompts`` (each read once), one row per tree: row ``i`` holds ``prompts[which[i]]``.

    ``None`` when every prompt is empty (contexts of one token: the trees' roots hold them whole).
    """
    if not any(prompts):
        return None
    ids, positions, mask = _lay_out([_Tree(list(prompt)) for prompt in prompts], [0] * len(prompts), pad_id)
    cache = model(
        input_ids=ids.to(device), attention_mask=_attention_mask(model, mask, device),
        position_ids=positions.to(device), use_cache=True, logits_to_keep=1,
    ).cache
    if not isinstance(cache, Cache):
        raise StackrlError(
            f"score_probes(): {type(model).__name__} returned no KV cache (transformers' Cache) for the prompts; "
            "the probe trees continue from it"
        )
    cache.batch_select_indices(torch.tensor(which, device=device))
    return cache


def probe_logprobs(model, items, *, pad_id: int, topk: int | None = None, temperature: float = 1.0) -> list:
    """Per-token log-probs of every probe of ``items``: one forward over the batch's distinct prompts, one over
    its trees.

    ``items`` holds ``(context_ids, trajectory_ids, [(branch, probe_ids), ...])``. Returns, per item, one
    ``(logprobs, topk_logprobs, topk_ids)`` tuple per probe (the top-k entries ``None`` without ``topk``), each
    ``(len(probe_ids), ...)``: what scoring ``context + trajectory[:branch]`` followed by ``probe_ids`` alone gives.
    Items that share a context (a group's completions of one prompt) read it once: the first forward caches each
    distinct ``context[:-1]``, and every tree attends to its own prompt's columns of that cache. Runs under the
    caller's grad mode and autocast.
    """
    device = model.get_input_embeddings().weight.device
    built = [_build(context, trajectory, probes) for context, trajectory, probes in items]
    prompt_of = {}
    which = [prompt_of.setdefault(tuple(context[:-1]), len(prompt_of)) for context, _, _ in items]
    cache = _prompt_cache(model, list(prompt_of), which, pad_id, device)
    trees = [tree for tree, _ in built]
    ids, positions, mask = _lay_out(trees, [len(context) - 1 for context, _, _ in items], pad_id)
    # A tree's nodes see its own prompt's columns of the cache (prompts are right-padded there); padding sees none.
    cached = max(map(len, prompt_of))
    sizes = torch.tensor([len(tree.tokens) for tree in trees])
    prompt_lengths = torch.tensor([len(context) - 1 for context, _, _ in items])
    real = torch.arange(ids.shape[1]) < sizes[:, None]
    seen = (torch.arange(cached) < prompt_lengths[:, None, None]) & real[:, :, None]
    mask = _attention_mask(model, torch.cat([seen, mask], dim=-1), device)
    logits = model(
        input_ids=ids.to(device), attention_mask=mask, position_ids=positions.to(device), cache=cache,
        use_cache=cache is not None,
    ).logits
    # Every probe token of the batch at once: the node it is predicted from, then one log-softmax and top-k over
    # just the distinct such nodes (probes that share a prefix share them), read per token, split back per probe.
    nodes, tokens, lengths = [], [], []
    for row, ((_, predicted_from), (_, _, probes)) in enumerate(zip(built, items)):
        for parents, (_, probe_ids) in zip(predicted_from, probes):
            nodes += [row * ids.shape[1] + parent for parent in parents]
            tokens += probe_ids
            lengths.append(len(probe_ids))
    distinct, index = torch.tensor(nodes, device=device).unique(return_inverse=True)
    logps = torch.log_softmax(logits.flatten(0, 1)[distinct].float() / temperature, dim=-1)
    token_lp = logps[index, torch.tensor(tokens, device=device)].split(lengths)
    top_lp, top_ids = (values[index].split(lengths) for values in logps.topk(topk, dim=-1)) if topk else (
        [None] * len(lengths), [None] * len(lengths))
    per_probe = iter(zip(token_lp, top_lp, top_ids))
    return [[next(per_probe) for _ in probes] for _, _, probes in items]
