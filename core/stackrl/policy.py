"""The two capabilities hooks get instead of the model: ``generate`` and ``score``.

Hooks of the sample, reward and advantage stages run on every process with the same whole batch. There, both
capabilities split their work across processes and return the full result to each, so a plugin that decides from
their results decides the same everywhere and its state stays identical on all ranks. In the loss stage they work
on the process's own rows only, and ``score`` may keep the gradient.
"""

from __future__ import annotations

import contextlib
import copy
import math
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from accelerate.utils import gather_object

from stackrl.aux_models import aux_models_of
from stackrl.errors import StackrlError

if TYPE_CHECKING:
    from trl import GRPOTrainer


@dataclass
class Generation:
    """One sampled completion and the prompt tokens it was sampled from.

    From an auxiliary model, the ids are that model's tokens (none from a server or a rule), and ``failed`` marks
    a reply its backend could not give (``text`` is then empty).
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    text: str
    failed: bool = False


def tool_schemas(tools: list) -> list[dict]:
    """The JSON schemas a chat template renders for ``tools``: a callable's from its signature and docstring
    (transformers' ``get_json_schema``, as TRL and ``apply_chat_template`` make them), a dict taken as a schema."""
    from transformers.utils import get_json_schema

    schemas = []
    for tool in tools:
        if isinstance(tool, dict):
            schemas.append(tool)
            continue
        try:
            schemas.append(get_json_schema(tool))
        except Exception as e:  # transformers' parsing errors name what the docstring or the hints lack
            raise StackrlError(f"tool {getattr(tool, '__name__', tool)!r}: no JSON schema: {e}") from None
    return schemas


def is_chat(prompt) -> bool:
    """Whether a prompt is chat messages (a list of dicts), not text or token ids."""
    return isinstance(prompt, list) and bool(prompt) and isinstance(prompt[0], dict)


@dataclass
class Scores:
    """Per-token log-probs of continuations, right-padded to the longest: ``logprobs`` and ``mask`` are ``(N, T)``.

    ``topk_logprobs``/``topk_ids`` are ``(N, T, k)`` when ``topk`` was asked, ``vocab_logprobs`` ``(N, T, V)`` when
    ``full_vocab`` was, ``hidden_states`` ``(N, T, H)`` when ``hidden_states`` was: the final hidden states the LM
    head projects. Position ``t`` holds what the model predicted continuation token ``t`` from. Scored at chosen
    ``positions``, ``mask`` marks those positions only and the others are packed ``(P, k)``, ``(P, V)`` and
    ``(P, H)``, one row per position in the order of ``mask.nonzero()``.
    """

    logprobs: torch.Tensor
    mask: torch.Tensor
    topk_logprobs: torch.Tensor | None = None
    topk_ids: torch.Tensor | None = None
    vocab_logprobs: torch.Tensor | None = None
    hidden_states: torch.Tensor | None = None


def _pad(rows: list[torch.Tensor], value: float = 0.0) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=value)


def _position_lists(positions, continuation_ids: list[list[int]]) -> list[torch.Tensor]:
    """``positions`` (index lists, or an ``(N, T)`` 0/1 mask) as one sorted index tensor per row, checked."""
    if isinstance(positions, torch.Tensor):
        if positions.dim() != 2:
            raise StackrlError(f"score(): positions as a tensor must be an (N, T) mask, not {tuple(positions.shape)}")
        positions = [row.nonzero().flatten().tolist() for row in positions.cpu()]
    if len(positions) != len(continuation_ids):
        raise StackrlError(f"score(): {len(positions)} position lists for {len(continuation_ids)} continuations")
    rows = []
    for i, (where, continuation) in enumerate(zip(positions, continuation_ids)):
        where = sorted({int(t) for t in where})
        if where and (where[0] < 0 or where[-1] >= len(continuation)):
            bad = where[0] if where[0] < 0 else where[-1]
            raise StackrlError(
                f"score(): position {bad} of row {i} is outside its continuation of {len(continuation)} tokens"
            )
        rows.append(torch.tensor(where, dtype=torch.long))
    return rows


def _padded_scores(rows: list, topk, full_vocab, hidden_states=False) -> Scores:
    """Scores from per-row ``(logprobs, topk_logprobs, topk_ids, vocab_logprobs, hidden_states)``, right-padded to
    the longest."""
    logprobs, topk_lp, topk_ids, vocab, hidden = (list(f) for f in zip(*rows))
    lengths = torch.tensor([len(x) for x in logprobs])
    return Scores(
        logprobs=_pad(logprobs),
        mask=(torch.arange(int(lengths.max())).unsqueeze(0) < lengths.unsqueeze(1)).long(),
        topk_logprobs=_pad(topk_lp) if topk else None,
        topk_ids=_pad(topk_ids, 0).long() if topk else None,
        vocab_logprobs=_pad(vocab) if full_vocab else None,
        hidden_states=_pad(hidden) if hidden_states else None,
    )


def _packed_scores(rows: list, wanted: list[torch.Tensor], width: int, topk, full_vocab, hidden_states) -> Scores:
    """Scores at chosen positions: ``(N, T)`` log-probs and mask set there, the other outputs packed ``(P, ...)``."""
    logprobs, topk_lp, topk_ids, vocab, hidden = (list(f) for f in zip(*rows))
    index = (torch.cat([torch.full_like(w, r) for r, w in enumerate(wanted)]), torch.cat(wanted))
    values = torch.cat(logprobs)
    index = tuple(i.to(values.device) for i in index)
    return Scores(
        logprobs=values.new_zeros(len(rows), width).index_put(index, values),
        mask=torch.zeros(len(rows), width, dtype=torch.long, device=values.device).index_put(
            index, torch.ones_like(index[0])
        ),
        topk_logprobs=torch.cat(topk_lp) if topk else None,
        topk_ids=torch.cat(topk_ids) if topk else None,
        vocab_logprobs=torch.cat(vocab) if full_vocab else None,
        hidden_states=torch.cat(hidden) if hidden_states else None,
    )


@contextlib.contextmanager
def _project_only_at(head: torch.nn.Module, rows: torch.Tensor, cols: torch.Tensor):
    """Hand the LM head only the hidden states at ``(rows, cols)``: logits are ``(1, P, V)``, never ``(B, T, V)``.

    A pre-hook on the output embedding keeps whatever the model does after its head (soft-capping, scaling).
    """
    handle = head.register_forward_pre_hook(lambda _, args: (args[0][rows, cols].unsqueeze(0), *args[1:]))
    try:
        yield
    finally:
        handle.remove()


@contextlib.contextmanager
def _head_inputs(head: torch.nn.Module, into: list):
    """Keep what the LM head is handed (after the pre-hooks registered before this one): the hidden states it
    projects, from the forward that computes the logits, so features cost no second forward."""
    handle = head.register_forward_pre_hook(lambda _, args: into.append(args[0]))
    try:
        yield
    finally:
        handle.remove()


class Snapshot:
    """A frozen copy of a model, moved toward the live one by ``update(decay)``: an EMA, or a periodic copy.

    Frozen parameters (a LoRA model's base weights, quantized weights) are shared with the live model rather
    than copied, so a snapshot of a LoRA policy costs only the adapter's memory.
    """

    def __init__(self, live: torch.nn.Module):
        shared = {id(p): p for p in live.parameters() if not p.requires_grad}
        self.model = copy.deepcopy(live, memo=shared)
        for module in self.model.modules():
            # A forward set on the instance is a patch whose closure may call the live model's forward (TRL's
            # fused LM head does): the copy runs its class's own forward.
            module.__dict__.pop("forward", None)
            # bitsandbytes' 4-bit layers repack their weight in place for a CPU kernel on an eval-mode forward;
            # the weight is shared with the live model, which would then train on the repacked one.
            if getattr(module, "support_avx512bf16_for_cpu", False):
                module.support_avx512bf16_for_cpu = False
        self.model.train(False)
        # The copied weights, by name: what an update moves, a checkpoint saves and a restore copies back.
        self.own = {n: p for n, p in self.model.named_parameters() if id(p) not in shared}
        for p in self.own.values():
            p.requires_grad_(False)
        self.checkpointed = False  # saved in checkpoints (update_snapshot(..., checkpoint=True))

    @torch.no_grad()
    def update(self, live: torch.nn.Module, decay: float) -> None:
        """``snapshot <- decay * snapshot + (1 - decay) * live`` for every parameter not shared; 0 copies."""
        if not 0.0 <= decay < 1.0:
            raise StackrlError(f"update_snapshot: decay must lie in [0, 1), not {decay}")
        for own, current in zip(self.model.parameters(), live.parameters(), strict=True):
            if own is not current:
                own.lerp_(current.detach().to(own.dtype), 1.0 - decay)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {n: p.detach().cpu().clone() for n, p in self.own.items()}

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, torch.Tensor], where: str) -> None:
        if set(state) != set(self.own):
            raise StackrlError(f"{where}: the saved snapshot's weights do not match this run's model")
        for n, p in self.own.items():
            p.copy_(state[n])


# Snapshots of a run's policy (``update_snapshot``), per trainer, so that every PolicyAccess of the run sees them.
_SNAPSHOTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def snapshots_of(trainer: GRPOTrainer) -> dict[str, Snapshot]:
    """The trainer's snapshots by name (the checkpoint saves the ``checkpointed`` ones)."""
    return _SNAPSHOTS.setdefault(trainer, {})


def _refuse_sharded(trainer: GRPOTrainer, what: str) -> None:
    if trainer._dist.is_zero3 or trainer._dist.is_fsdp:
        raise StackrlError(
            f"{what}: the policy's weights are sharded (ZeRO-3/FSDP); snapshots and the operations on them need "
            "DDP or ZeRO-2"
        )


class PolicyAccess:
    """``generate`` and ``score`` against a trainer's models, without handing the trainer to plugins.

    The trainer is the run's :class:`stackrl.trainer.StackTrainer`, typed as the TRL trainer it extends: the trainer
    builds the contexts that hold this, so naming it here would close an import circle.
    """

    def __init__(self, trainer: GRPOTrainer, *, sharded: bool, model: torch.nn.Module | None = None):
        self._trainer = trainer
        self._sharded = sharded and trainer.accelerator.num_processes > 1
        self._grad_model = model

    @property
    def sampling_temperature(self) -> float:
        """The run's sampling temperature (``trainer.temperature``), by which TRL's loss also divides the logits."""
        return self._trainer.temperature

    @property
    def eos_token_ids(self) -> list[int]:
        """The tokens that end a completion: the tokenizer's end-of-sequence and every one the model declares."""
        return list(self._trainer.eos_token_ids)

    @property
    def aux_model_names(self) -> tuple[str, ...]:
        """The names of the run's auxiliary models (``aux_models:``), in the config's order; empty where none."""
        aux = aux_models_of(self._trainer)
        return () if aux is None else tuple(aux.models)

    # -- splitting work over processes --------------------------------------------------------------------------

    def _local(self, items: list) -> list:
        """This process's equal share of ``items``, padded with repeats so every rank runs the same forwards."""
        if not self._sharded:
            return items
        world, rank = self._trainer.accelerator.num_processes, self._trainer.accelerator.process_index
        per_rank = math.ceil(len(items) / world)
        padded = items + [items[-1]] * (per_rank * world - len(items))
        return padded[rank * per_rank : (rank + 1) * per_rank]

    def _token_ids(self, contexts: list, tools: list | None = None) -> list:
        """Contexts as token ids: prompts (text or chat messages) are tokenized as training prompts are; chat
        messages with ``tools`` (JSON schemas) render them through the chat template, as TRL's tool loop does."""
        if tools and contexts and is_chat(contexts[0]) and self._renders_chat():
            trainer = self._trainer
            return trainer.processing_class.apply_chat_template(
                conversation=list(contexts), tools=[*(getattr(trainer, "tools", None) or []), *tools],
                chat_template=trainer.chat_template, add_generation_prompt=True, tokenize=True, return_dict=True,
                **getattr(trainer, "chat_template_kwargs", {}),
            )["input_ids"]
        if contexts and (not isinstance(contexts[0], list) or (contexts[0] and isinstance(contexts[0][0], dict))):
            return self._trainer._tokenize_prompts(list(contexts))[0]
        return contexts

    def _renders_chat(self) -> bool:
        """Whether the policy's tokenizer has a chat template (a text tokenizer, or a processor of images, has not
        one this renders tools through)."""
        trainer = self._trainer
        template = getattr(trainer, "chat_template", None) or getattr(trainer.processing_class, "chat_template", None)
        return bool(template) and not getattr(trainer, "_is_vlm", False)

    def _whole(self, local: list, n: int) -> list:
        return gather_object(local)[:n] if self._sharded else local

    # -- generate ---------------------------------------------------------------------------------------------------

    def generate(
        self, prompts: list, *, model: str = "policy", caller: str = "", tools: list | None = None, **sampling
    ) -> list[Generation]:
        """Sample one completion per prompt (text, chat messages or token ids), no gradient.

        ``model`` is ``"policy"`` (the live model), ``"reference"``, a snapshot name or an auxiliary model
        (:meth:`_aux_generate`).
        ``sampling`` overrides the run's generation settings for this call (``temperature``, ``top_p``,
        ``max_new_tokens``, ``do_sample``, ...). Prompts go through the chat template as training prompts do; a
        prompt given as token ids is generated from as it is (a later turn continues the exact tokens before it).
        With vLLM generation (``trainer.use_vllm``) vLLM samples, and the same names apply (see
        :meth:`_vllm_sampling`); vLLM's own ``SamplingParams`` names (``seed``, ``stop``, ...) are accepted too.
        ``caller``, the plugin asking, is named where its prompts pass the model's context.
        ``tools`` (callables, or JSON schemas as dicts) are shown to the model as TRL's tool loop shows them: their
        JSON schemas (:func:`tool_schemas`) go to the chat template with chat-message prompts where the tokenizer
        has one; text prompts, token ids and a tokenizer without a chat template are generated from unchanged.
        """
        if not prompts:
            return []
        aux = aux_models_of(self._trainer)
        if aux is not None and model in aux:
            if tools:
                raise StackrlError(f"generate(model={model!r}, tools=...): tools are shown to the policy and its "
                                   "snapshots only, not to an auxiliary model")
            return self._aux_generate(aux, model, prompts, sampling)
        trainer = self._trainer
        prompt_ids = self._token_ids(self._local(list(prompts)), tool_schemas(tools) if tools else None)
        if caller:
            budget = sampling.get("max_new_tokens") or trainer.args.max_completion_length
            setting = "max_new_tokens" if "max_new_tokens" in sampling else "trainer.max_completion_length"
            trainer.check_context(caller, "asked ctx.generate for", prompt_ids, budget, setting)
        with self._sampling_overrides(sampling), self._generating_with(model):
            completion_ids, _ = trainer._generate_single_turn(prompt_ids, None, {}, 1)
        texts = trainer.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
        results = [Generation(list(p), list(c), t) for p, c, t in zip(prompt_ids, completion_ids, texts)]
        return self._whole(results, len(prompts))

    def _aux_generate(self, aux, model: str, prompts: list, sampling: dict) -> list[Generation]:
        """Replies of auxiliary model ``model`` (``aux_models``): each distinct request once per step, sent by the
        main process where every process asks the same (the sample, reward and advantage stages); at most
        ``trainer.max_completion_length`` new tokens unless ``max_new_tokens`` says otherwise."""
        sampling = {"max_new_tokens": self._trainer.args.max_completion_length, **sampling}
        replies = aux.generate(model, list(prompts), sampling, step=self._trainer.state.global_step,
                               shared=self._sharded)
        return [Generation(r.prompt_ids, r.completion_ids, r.text or "", failed=r.text is None) for r in replies]

    @contextlib.contextmanager
    def _generating_with(self, which: str):
        """TRL's generation path, run on another model: TRL samples ``trainer.model_wrapped``, so that is lent."""
        if which == "policy":
            yield
            return
        trainer = self._trainer
        if trainer.use_vllm:
            raise StackrlError(
                f"generate(model={which!r}): vLLM holds the live policy's weights only; sampling another model "
                "needs trainer.use_vllm: false"
            )
        _refuse_sharded(trainer, f"generate(model={which!r})")
        with self._frozen_model(which, "generate") as net:
            original = trainer.model_wrapped
            trainer.model_wrapped = net
            try:
                yield
            finally:
                trainer.model_wrapped = original

    @contextlib.contextmanager
    def _sampling_overrides(self, sampling: dict):
        trainer = self._trainer
        if not sampling:
            yield
            return
        if trainer.use_vllm:
            with self._vllm_sampling(trainer.vllm_generation, sampling):
                yield
            return
        original = trainer.generation_config
        updated = copy.deepcopy(original)
        unknown = [k for k in sampling if not hasattr(updated, k)]
        if unknown:
            raise StackrlError(f"generate(): unknown sampling setting(s) {', '.join(unknown)}")
        updated.update(**sampling)
        trainer.generation_config = updated
        try:
            yield
        finally:
            trainer.generation_config = original

    # transformers' generate() names whose vLLM SamplingParams field is named differently
    _VLLM_NAMES = {"max_new_tokens": "max_tokens"}

    @classmethod
    @contextlib.contextmanager
    def _vllm_sampling(cls, engine, sampling: dict):
        """Overrides for TRL's vLLM backend (``trl.generation.vllm_generation.VLLMGeneration``), for one call.

        TRL builds vLLM's ``SamplingParams`` from the engine's settings and then lets the engine's
        ``generation_kwargs`` (SamplingParams fields) override them, in colocate and server mode alike; so the
        overrides go there, under vLLM's names, and the run's own ``generation_kwargs`` come back afterwards.
        ``do_sample=False`` is vLLM's greedy decoding, ``temperature=0``.
        """
        settings = dict(sampling)
        if settings.pop("do_sample", True) is False:
            settings["temperature"] = 0.0
        settings = {cls._VLLM_NAMES.get(k, k): v for k, v in settings.items()}
        try:
            from vllm import SamplingParams
        except ImportError:  # the settings are checked by vLLM when it builds them
            known = None
        else:
            known = set(getattr(SamplingParams, "__struct_fields__", ())) or None
        unknown = [k for k in settings if known is not None and k not in known]
        if unknown:
            raise StackrlError(f"generate(): {', '.join(unknown)}: not vLLM SamplingParams fields")
        original = engine.generation_kwargs
        engine.generation_kwargs = {**original, **settings}
        try:
            yield
        finally:
            engine.generation_kwargs = original

    # -- score ------------------------------------------------------------------------------------------------------

    def score(
        self,
        contexts: list,
        continuation_ids: list[list[int]],
        *,
        model: str = "policy",
        topk: int | None = None,
        full_vocab: bool = False,
        grad: bool = False,
        temperature: float = 1.0,
        batch_size: int | None = None,
        positions=None,
        hidden_states: bool = False,
    ) -> Scores:
        """Log-probs of each continuation given its context, batched, one forward per batch.

        ``contexts`` are token-id lists, or prompts (text or chat messages) tokenized as training prompts are.
        ``model`` is ``"policy"`` (the live model), ``"reference"`` (the frozen reference model, or the base
        model with the LoRA adapter disabled), the name of a snapshot kept by :meth:`update_snapshot`, or an
        auxiliary ``hf`` model whose tokenizer is the policy's (``aux_models``). Without
        ``grad`` no graph is kept; ``grad=True`` is for loss terms. Logits are divided by ``temperature`` before
        the softmax. ``positions`` (a list of continuation positions per row, or an ``(N, T)`` 0/1 mask) projects
        onto the vocabulary only there, so ``full_vocab`` costs ``P x V`` for ``P`` positions. ``hidden_states``
        keeps the final hidden states the LM head projects at each position (token features); see :class:`Scores`.
        """
        if len(contexts) != len(continuation_ids):
            raise StackrlError(
                f"score(): {len(contexts)} contexts but {len(continuation_ids)} continuations; give one each"
            )
        if grad and self._grad_model is None:
            raise StackrlError("score(grad=True) is only available in the loss stage (loss_term)")
        if not contexts:
            return Scores(torch.zeros(0, 0), torch.zeros(0, 0, dtype=torch.long))
        trainer = self._trainer
        contexts = self._token_ids(contexts)
        wanted = [None] * len(contexts) if positions is None else _position_lists(positions, continuation_ids)
        items = self._local(list(zip(contexts, continuation_ids, wanted)))
        batch_size = batch_size or trainer.args.per_device_train_batch_size
        rows = []
        with self._scoring_model(model, grad) as net, torch.set_grad_enabled(grad):
            for start in range(0, len(items), batch_size):
                batch = items[start : start + batch_size]
                rows.extend(self._score_batch(net, batch, topk, full_vocab, temperature, hidden_states=hidden_states))
        rows = self._whole(rows, len(contexts))
        if positions is not None:
            width = max(len(k) for k in continuation_ids)
            return _packed_scores(rows, wanted, width, topk, full_vocab, hidden_states)
        return _padded_scores(rows, topk, full_vocab, hidden_states)

    def update_snapshot(self, name: str, decay: float = 0.0, *, checkpoint: bool = False) -> None:
        """Keep a frozen copy of the policy under ``name``, to score with as ``score(..., model=name)``.

        The first call copies the live policy; each later call moves the copy to ``decay * copy + (1 - decay) *
        policy``: ``decay=0`` copies again (a teacher synced every N steps), ``0.999`` each step is an EMA. Frozen
        weights (a LoRA model's base, quantized weights) are shared, not copied. Every process must make the same
        calls. A snapshot made with ``checkpoint=True`` is saved in every checkpoint and comes back on resume; the
        others start again from the restored policy.
        """
        trainer = self._trainer
        aux = aux_models_of(trainer)
        if name in ("policy", "reference") or (aux is not None and name in aux):
            raise StackrlError(f"update_snapshot(): '{name}' names a model already; choose another snapshot name")
        _refuse_sharded(trainer, "update_snapshot()")
        live = trainer.accelerator.unwrap_model(trainer.model)
        snapshots = _SNAPSHOTS.setdefault(trainer, {})
        if name in snapshots:
            snapshots[name].update(live, decay)
        else:
            snapshots[name] = Snapshot(live)
        snapshots[name].checkpointed = snapshots[name].checkpointed or checkpoint

    def snapshot(self, name: str) -> Snapshot:
        """The snapshot ``name``; an error listing the run's snapshots if there is none."""
        snapshots = _SNAPSHOTS.get(self._trainer, {})
        if name not in snapshots:
            kept = ", ".join(repr(n) for n in snapshots) or "none yet"
            raise StackrlError(f"no snapshot {name!r} (snapshots come from update_snapshot; this run has {kept})")
        return snapshots[name]

    @contextlib.contextmanager
    def _unwrapped(self):
        """The policy without its DDP/DeepSpeed/FSDP wrapper; FSDP1 keeps the root's own weights sharded unless
        summoned, as TRL does for generation."""
        trainer = self._trainer
        with trainer._dist.summon_full_params(trainer.model_wrapped, recurse=False):
            yield trainer.accelerator.unwrap_model(trainer.model)

    @contextlib.contextmanager
    def _frozen_model(self, which: str, caller: str):
        """The reference model (the base with the LoRA adapter off, or TRL's reference) or a snapshot."""
        trainer = self._trainer
        snapshots = _SNAPSHOTS.get(trainer, {})
        aux = aux_models_of(trainer)
        if which in snapshots:
            yield snapshots[which].model
        elif aux is not None and which in aux:
            with aux.scoring_model(which, trainer.processing_class, caller) as net:
                yield net
        elif which == "reference":
            if hasattr(trainer.accelerator.unwrap_model(trainer.model), "disable_adapter"):
                with self._unwrapped() as unwrapped, unwrapped.disable_adapter():
                    yield unwrapped
            elif trainer.ref_model is not None:
                yield trainer.ref_model
            else:
                raise StackrlError(
                    f"{caller}(model='reference'): this run has no reference model; use LoRA (model.lora) "
                    "or set trainer.beta > 0 so TRL loads one"
                )
        else:
            names = ", ".join(repr(n) for n in ("policy", "reference", *snapshots, *(aux.models if aux else ())))
            raise StackrlError(
                f"{caller}(): model must be one of {names} (snapshots come from update_snapshot, auxiliary models "
                f"from aux_models), not {which!r}"
            )

    @contextlib.contextmanager
    def _scoring_model(self, which: str, grad: bool):
        if which == "policy" and grad:
            yield self._grad_model
        elif which == "policy":
            with self._unwrapped() as unwrapped:
                yield unwrapped
        else:
            with self._frozen_model(which, "score") as net:
                if grad:
                    kind = "snapshot" if which in snapshots_of(self._trainer) else "aux model"
                    frozen = "the reference model" if which == "reference" else f"{kind} {which!r}"
                    raise StackrlError(f"score(): {frozen} is frozen; grad=True needs model='policy'")
                yield net

    def _score_batch(self, net, items, topk, full_vocab, temperature, *, hidden_states=False):
        device = self._trainer.accelerator.device
        pad_id = self._trainer.processing_class.pad_token_id
        ctx_len = max(len(c) for c, _, _ in items)
        cont_len = max(len(k) for _, k, _ in items)
        ids = torch.full((len(items), ctx_len + cont_len), pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, (context, continuation, _) in enumerate(items):
            # Contexts end at one column so every continuation starts there: the model need only project
            # the last cont_len + 1 hidden states onto the vocabulary.
            ids[row, ctx_len - len(context) : ctx_len] = torch.tensor(context, dtype=torch.long)
            ids[row, ctx_len : ctx_len + len(continuation)] = torch.tensor(continuation, dtype=torch.long)
            mask[row, ctx_len - len(context) : ctx_len + len(continuation)] = 1
        positions = (mask.cumsum(1) - 1).clamp(min=0)
        ids, mask, positions = ids.to(device), mask.to(device), positions.to(device)
        inputs = dict(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=cont_len + 1)
        head = self._trainer.accelerator.unwrap_model(net).get_output_embeddings()
        kept: list[torch.Tensor] = []
        if items[0][2] is None:  # every position: (B, T, V), sliced per row
            with self._trainer.accelerator.autocast(), _head_inputs(head, kept) if hidden_states else contextlib.nullcontext():
                logits = net(**inputs).logits[:, :-1]
            hidden = kept[0][:, -cont_len - 1 : -1] if hidden_states else None
            targets = ids[:, ctx_len:]
            counts = None
        else:  # chosen positions only: (P, V), split per row
            wanted = [w for _, _, w in items]
            rows = torch.cat([torch.full_like(w, r) for r, w in enumerate(wanted)]).to(device)
            cols = torch.cat(wanted).to(device)
            with self._trainer.accelerator.autocast(), _project_only_at(head, rows, cols):
                with _head_inputs(head, kept) if hidden_states else contextlib.nullcontext():
                    logits = net(**inputs).logits[0]
            hidden = kept[0][0] if hidden_states else None
            targets = ids[:, ctx_len:][rows, cols]
            counts = [len(w) for w in wanted]
        logps = F.log_softmax(logits.float() / temperature, dim=-1)
        token_lp = logps.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        top_lp, top_ids = logps.topk(topk, dim=-1) if topk else (None, None)

        def per_row(values):
            if values is None:
                return [None] * len(items)
            if counts is not None:
                return list(values.split(counts))
            return [values[row, : len(k)] for row, (_, k, _) in enumerate(items)]

        vocab = logps if full_vocab else None
        return list(zip(per_row(token_lp), per_row(top_lp), per_row(top_ids), per_row(vocab), per_row(hidden)))

    # -- score_probes -----------------------------------------------------------------------------------------------

    def score_probes(
        self,
        contexts: list,
        trajectories: list[list[int]],
        probes: list[list[tuple[int, list[int]]]],
        *,
        model: str = "policy",
        topk: int | None = None,
        temperature: float = 1.0,
        batch_size: int | None = None,
    ) -> Scores:
        """Log-probs of many probes branching off each trajectory: one forward per trajectory and all its probes.

        ``probes[i]`` lists ``(branch, probe_ids)`` pairs: ``probe_ids`` continue ``contexts[i] +
        trajectories[i][:branch]``. ``contexts`` are token-id lists or prompts, as for :meth:`score`. The result
        has one row per probe, trajectory after trajectory, and equals ``score`` of each ``context +
        trajectory[:branch]`` with its ``probe_ids``; the shared prefix is read once, and a context shared by
        trajectories of one batch once for all of them (:mod:`stackrl.probes`).
        Models whose attention takes no 4-D mask are scored exactly that way, probe by probe. No gradient.
        """
        from stackrl.probes import check_probes, probe_logprobs, supports_tree_mask

        if not len(contexts) == len(trajectories) == len(probes):
            raise StackrlError(
                f"score_probes(): {len(contexts)} contexts, {len(trajectories)} trajectories and {len(probes)} probe "
                "lists; give one of each per trajectory"
            )
        trainer = self._trainer
        contexts = self._token_ids(contexts)
        check_probes(contexts, trajectories, probes)
        if not any(probes):
            return Scores(torch.zeros(0, 0), torch.zeros(0, 0, dtype=torch.long))
        with self._scoring_model(model, False) as net:
            tree_mask = supports_tree_mask(net)
        if not tree_mask:
            prefixes, continuations = zip(
                *[([*c, *t[:b]], ids) for c, t, branches in zip(contexts, trajectories, probes) for b, ids in branches]
            )
            return self.score(
                list(prefixes), list(continuations), model=model, topk=topk, temperature=temperature,
                batch_size=batch_size,
            )
        items = self._local([item for item in zip(contexts, trajectories, probes) if item[2]])
        batch_size = batch_size or trainer.args.per_device_train_batch_size
        pad_id = trainer.processing_class.pad_token_id
        # Batched by size, so that a batch's rows pad to about the same width (a group's completions, alike in size,
        # tend to share a batch and with it one read of their prompt); the results go back in order.
        order = sorted(range(len(items)), key=lambda i: len(items[i][0]) + len(items[i][1]) + sum(
            len(ids) for _, ids in items[i][2]))
        rows = [None] * len(items)
        with self._scoring_model(model, False) as net, torch.no_grad(), trainer.accelerator.autocast():
            for start in range(0, len(items), batch_size):
                batch = order[start : start + batch_size]
                scored = probe_logprobs(net, [items[i] for i in batch], pad_id=pad_id, topk=topk, temperature=temperature)
                for i, row in zip(batch, scored):
                    rows[i] = row
        per_probe = [(*probe, None, None) for row in self._whole(rows, sum(map(bool, probes))) for probe in row]
        return _padded_scores(per_probe, topk, full_vocab=False)
