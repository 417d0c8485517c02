"""Many short continuations ("probes") of one trajectory, scored in one forward.

A probe is ``(branch, probe_ids)``: ``probe_ids`` continue ``context + trajectory[:branch]``. Scoring each probe
on its own re-reads the whole prefix every time; here the context, the trajectory and every probe of it become one
prefix tree of tokens, laid out in one row. A token attends to its ancestors in the tree and sits at the position
its depth gives, so its hidden state is the one it would have in its own sequence. Probe tokens that follow the
trajectory (or an earlier probe) reuse that node, so only the tokens where a probe diverges are added: the
trajectory's own tokens and a shared probe prefix such as ``"\\nThe answer is: "`` are computed once.

The tree travels as a 4-D attention mask, which transformers hands unchanged to the attention of models built on
its mask utilities, with ``sdpa`` (a boolean mask) or ``eager`` (an additive one). :func:`supports_tree_mask`
says whether a model qualifies; callers score the probes one by one otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

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

    It starts as the single path of ``chain`` (context then trajectory): node ``i`` is its ``i``-th token.
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
    """The prefix tree of one trajectory and, per probe, the node each of its tokens is predicted from."""
    tree = _Tree([*context, *trajectory])
    predicted_from = []
    for branch, probe_ids in probes:
        node = len(context) + branch - 1  # the chain's node of the last token before the branch
        parents = []
        for token in probe_ids:
            parents.append(node)
            node = tree.child(node, token)
        predicted_from.append(parents)
    return tree, predicted_from


def _ancestor_mask(tree: _Tree, chain: int) -> torch.Tensor:
    """``(n, n)``: node ``q`` may attend to node ``k`` when ``k`` is ``q`` or one of its ancestors.

    The first ``chain`` nodes (context and trajectory) form a single path, whose mask is the causal triangle. A
    probe node's row is its parent's row plus itself; nodes are filled a generation at a time (those whose parent
    is already filled), so the loop runs once per token of the longest probe rather than once per node.
    """
    n = len(tree.tokens)
    mask = torch.zeros(n, n, dtype=torch.bool)
    mask[:chain, :chain] = torch.ones(chain, chain, dtype=torch.bool).tril()
    parents = torch.tensor(tree.parents[chain:], dtype=torch.long)
    pending = torch.arange(chain, n)
    filled = torch.zeros(n, dtype=torch.bool)
    filled[:chain] = True
    while len(pending):
        ready = filled[parents]
        nodes = pending[ready]
        mask[nodes] = mask[parents[ready]]
        mask[nodes, nodes] = True
        filled[nodes] = True
        pending, parents = pending[~ready], parents[~ready]
    return mask


def probe_logprobs(model, items, *, pad_id: int, topk: int | None = None, temperature: float = 1.0) -> list:
    """Per-token log-probs of every probe of ``items``, one forward for the whole batch.

    ``items`` holds ``(context_ids, trajectory_ids, [(branch, probe_ids), ...])``. Returns, per item, one
    ``(logprobs, topk_logprobs, topk_ids)`` tuple per probe (the top-k entries ``None`` without ``topk``), each
    ``(len(probe_ids), ...)``: what scoring ``context + trajectory[:branch]`` followed by ``probe_ids`` alone gives.
    Runs under the caller's grad mode and autocast.
    """
    device = model.get_input_embeddings().weight.device
    built = [_build(context, trajectory, probes) for context, trajectory, probes in items]
    # Contexts are left-padded to end in one column, so logits are needed only from that column on.
    context_end = max(len(context) for context, _, _ in items)
    offsets = [context_end - len(context) for context, _, _ in items]
    width = max(offset + len(tree.tokens) for offset, (tree, _) in zip(offsets, built))
    ids = torch.full((len(items), width), pad_id, dtype=torch.long)
    positions = torch.zeros_like(ids)
    mask = torch.eye(width, dtype=torch.bool).repeat(len(items), 1, 1)  # padding attends to itself only
    for row, (offset, (tree, _), (context, trajectory, _)) in enumerate(zip(offsets, built, items)):
        span = slice(offset, offset + len(tree.tokens))
        ids[row, span] = torch.tensor(tree.tokens)
        positions[row, span] = torch.tensor(tree.depths)
        mask[row, span, span] = _ancestor_mask(tree, len(context) + len(trajectory))
    mask = mask.unsqueeze(1).to(device)
    if model.config._attn_implementation == "eager":  # eager adds the mask to the attention scores
        dtype = model.get_input_embeddings().weight.dtype
        mask = torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill(~mask, torch.finfo(dtype).min)
    keep = width - context_end + 1
    logits = model(
        input_ids=ids.to(device), attention_mask=mask, position_ids=positions.to(device), logits_to_keep=keep
    ).logits
    first_kept = width - keep
    # Every probe token of the batch at once: the column it is predicted from, then one log-softmax, gather and
    # top-k over just those columns, split back per probe.
    rows, columns, tokens, lengths = [], [], [], []
    for row, (offset, (_, predicted_from), (_, _, probes)) in enumerate(zip(offsets, built, items)):
        for parents, (_, probe_ids) in zip(predicted_from, probes):
            rows += [row] * len(parents)
            columns += [parent + offset - first_kept for parent in parents]
            tokens += probe_ids
            lengths.append(len(probe_ids))
    picked = logits[torch.tensor(rows, device=device), torch.tensor(columns, device=device)]
    logps = torch.log_softmax(picked.float() / temperature, dim=-1)
    token_lp = logps.gather(-1, torch.tensor(tokens, device=device).unsqueeze(-1)).squeeze(-1).split(lengths)
    top_lp, top_ids = logps.topk(topk, dim=-1) if topk else (None, None)
    top_lp = top_lp.split(lengths) if topk else [None] * len(lengths)
    top_ids = top_ids.split(lengths) if topk else [None] * len(lengths)
    per_probe = iter(zip(token_lp, top_lp, top_ids))
    return [[next(per_probe) for _ in probes] for _, _, probes in items]
