"""Auxiliary models: named models beside the policy (the config's ``aux_models:``), asked by name wherever a model
is named: ``ctx.generate(..., model="critic")``, ``ctx.score(..., model="teacher")``, ``TokenSignals.gap(...,
model=...)``, a judge's ``judge_model``.

Three backends: ``hf``, a Transformers model loaded by the policy's loader (:mod:`stackrl.modeling`), frozen, which
generates and, if its tokenizer is the policy's, scores; ``openai``, a model behind an OpenAI-compatible server
(:mod:`stackrl.aux_remote`), which generates text only; ``rule``, a registered Python function
(:mod:`stackrl.aux_rules`) that writes a reply per prompt as a judge does.

Generation is cached for the step: a request (model, prompt as formatted from its template, sampling settings) is
sent once per step however many rows or plugins ask for it. In the stages that run on every process with the whole
batch, the main process alone sends what is not cached and broadcasts the replies (or the error), so every process
sees the same text and a server the same count of requests as in a one-process run. Each model's figures (calls,
cache hits, failures, latency) are logged under ``aux/<name>/``; its memory footprint goes to the run summary.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
import weakref
from dataclasses import dataclass, field

import torch
from accelerate import PartialState
from accelerate.utils import broadcast_object_list

from stackrl.aux_remote import RemoteModel
from stackrl.aux_rules import RULES
from stackrl.config import AuxModelSection, ModelSection
from stackrl.errors import ConfigError, StackrlError
from stackrl.modeling import load_model, load_tokenizer


@dataclass
class AuxReply:
    """One generated reply: its text (``None``: the backend failed) and, from an ``hf`` model, the token ids of
    the prompt and of the completion in that model's tokenizer (empty from the other backends)."""

    text: str | None
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)


@dataclass
class AuxFigures:
    """What one model was asked: ``calls`` (requests its backend answered or failed), ``cache_hits`` (requests
    answered from the step's cache), ``failures``, and ``seconds``, the time the run waited for the backend (a
    server's requests run ``concurrency`` at a time)."""

    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    seconds: float = 0.0

    def add(self, other: AuxFigures) -> None:
        for name in ("calls", "cache_hits", "failures", "seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


class HfModel:
    """A frozen Transformers model, loaded as the policy is (dtype, bitsandbytes quantization), on ``device``, or on
    the CPU between calls with ``offload``."""

    kind = "hf"

    def __init__(self, section: AuxModelSection, key: str, device: torch.device):
        loaded = ModelSection(
            name_or_path=section.name_or_path, dtype=section.dtype, quantization=section.quantization,
            quant_type=section.quant_type, double_quant=section.double_quant,
            trust_remote_code=section.trust_remote_code,
        )
        try:
            self.tokenizer = load_tokenizer(loaded)
            model, _ = load_model(loaded, device)
        except (OSError, ConfigError) as exc:
            raise ConfigError(f"{key}.name_or_path: cannot load '{section.name_or_path}': {exc}") from exc
        model.requires_grad_(False)
        model.train(False)
        if not section.quantization:  # bitsandbytes placed quantized weights on the device as it loaded them
            model.to("cpu" if section.offload else device)
        self.model, self.device, self.offload, self.key = model, device, section.offload, key
        self.footprint = model.get_memory_footprint()
        self._same_vocab: dict[int, bool] = {}

    @contextlib.contextmanager
    def on_device(self):
        """The model on its device for one call (an offloaded model goes back to the CPU afterwards)."""
        if self.offload:
            self.model.to(self.device)
        try:
            yield self.model
        finally:
            if self.offload:
                self.model.to("cpu")

    def shares_tokenizer(self, tokenizer) -> bool:
        """Whether ``tokenizer`` (the policy's) maps every token to the same id as this model's."""
        if id(tokenizer) not in self._same_vocab:
            self._same_vocab[id(tokenizer)] = tokenizer.get_vocab() == self.tokenizer.get_vocab()
        return self._same_vocab[id(tokenizer)]

    def _prompt_ids(self, prompts: list) -> list[list[int]]:
        """Prompts as this model's token ids: text and chat messages tokenized as TRL tokenizes training prompts."""
        if isinstance(prompts[0], str):
            return self.tokenizer(text=list(prompts))["input_ids"]
        if prompts[0] and isinstance(prompts[0][0], dict):
            return self.tokenizer.apply_chat_template(prompts, add_generation_prompt=True, tokenize=True,
                                                      return_dict=True)["input_ids"]
        return [list(p) for p in prompts]

    @torch.no_grad()
    def replies(self, prompts: list, sampling: dict) -> list[AuxReply]:
        prompt_ids = self._prompt_ids(prompts)
        pad = self.tokenizer.pad_token_id
        width = max(len(p) for p in prompt_ids)
        ids = torch.full((len(prompt_ids), width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, p in enumerate(prompt_ids):  # left-padded, as TRL pads prompts for generation
            ids[row, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[row, width - len(p) :] = 1
        config = copy.deepcopy(self.model.generation_config)
        unknown = [k for k in sampling if not hasattr(config, k)]
        if unknown:
            raise StackrlError(f"generate(model='{self.key.split('.')[-1]}'): unknown sampling setting(s) {unknown}")
        config.update(**sampling, pad_token_id=pad)
        eos = config.eos_token_id if config.eos_token_id is not None else self.tokenizer.eos_token_id
        eos = set(eos if isinstance(eos, list) else [eos])
        with self.on_device() as model:
            out = model.generate(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                                 generation_config=config).cpu()
        results = []
        for p, row in zip(prompt_ids, out[:, width:].tolist()):
            end = next((t + 1 for t, token in enumerate(row) if token in eos), len(row))
            completion = row[:end]
            results.append(AuxReply(self.tokenizer.decode(completion, skip_special_tokens=True), list(p), completion))
        return results


class ServerModel:
    """A model behind an OpenAI-compatible server; failed replies are ``None``, or an error with ``on_failure:
    error``."""

    kind = "openai"
    footprint = 0

    def __init__(self, section: AuxModelSection, key: str):
        self.remote, self.key, self.section = RemoteModel(section, key), key, section

    def replies(self, prompts: list, sampling: dict) -> list[AuxReply]:
        replies = self.remote.complete(prompts, sampling)
        failed = [r for r in replies if r.text is None]
        if failed and self.section.on_failure == "error":
            raise StackrlError(
                f"{self.key}: {len(failed)} of {len(replies)} requests to {self.section.base_url} failed after "
                f"{self.section.retries + 1} tries (on_failure: error), the first: {failed[0].error}"
            )
        return [AuxReply(r.text) for r in replies]


class RuleModel:
    """A registered rule (:func:`stackrl.aux_rules.register_rule`): one reply text per prompt."""

    kind = "rule"
    footprint = 0

    def __init__(self, section: AuxModelSection, key: str):
        self.rule, self.key, self.name = RULES[section.rule], key, section.rule

    def replies(self, prompts: list, sampling: dict) -> list[AuxReply]:
        texts = list(self.rule(list(prompts)))
        if len(texts) != len(prompts) or any(t is not None and not isinstance(t, str) for t in texts):
            raise StackrlError(
                f"{self.key}: rule '{self.name}' must return one text (or None) per prompt; it returned "
                f"{len(texts)} values for {len(prompts)} prompts"
            )
        return [AuxReply(t) for t in texts]


def _request_key(name: str, prompt, sampling: dict) -> str:
    """What identifies a request within a step: the model, the prompt as formatted, the sampling settings."""
    return json.dumps([name, prompt, sorted(sampling.items())], default=str)


class AuxModels:
    """The run's auxiliary models by name, with the step's cache of replies and each model's figures."""

    def __init__(self, models: dict):
        self.models = models
        self.totals = {name: AuxFigures() for name in models}
        self._window = {name: AuxFigures() for name in models}
        self._cache: dict[str, AuxReply] = {}
        self._cache_step: int | None = None

    def __contains__(self, name: str) -> bool:
        return name in self.models

    def generate(self, name: str, prompts: list, sampling: dict, *, step: int, shared: bool) -> list[AuxReply]:
        """One reply per prompt from model ``name``: each distinct request of step ``step`` is sent once. With
        ``shared`` (every process asks the same), the main process sends and broadcasts."""
        if step != self._cache_step:
            self._cache, self._cache_step = {}, step
        keys = [_request_key(name, prompt, sampling) for prompt in prompts]
        missing = list(dict.fromkeys(k for k in keys if k not in self._cache))
        asked = [prompts[keys.index(k)] for k in missing]
        figures = AuxFigures(calls=len(missing), cache_hits=len(prompts) - len(missing))
        if asked:
            replies, seconds = self._answer(name, asked, sampling, shared)
            figures.seconds = seconds
            figures.failures = sum(r.text is None for r in replies)
            self._cache.update(zip(missing, replies))
        self.totals[name].add(figures)
        self._window[name].add(figures)
        return [self._cache[k] for k in keys]

    def _answer(self, name: str, prompts: list, sampling: dict, shared: bool) -> tuple[list[AuxReply], float]:
        """The backend's replies and the seconds they took, computed on the main process and broadcast when
        ``shared``; an error there is raised on every process, so none waits for a broadcast that never comes."""
        state = PartialState()
        broadcast = shared and state.num_processes > 1
        outcome: tuple = (None, 0.0, None)
        if not broadcast or state.is_main_process:
            start = time.perf_counter()
            try:
                replies = self.models[name].replies(prompts, sampling)
                outcome = (replies, time.perf_counter() - start, None)
            except Exception as exc:  # noqa: BLE001 (whatever stops the main process must stop every process)
                if not broadcast:
                    raise
                outcome = (None, 0.0, str(exc) if isinstance(exc, StackrlError) else
                           f"aux_models.{name}: {type(exc).__name__}: {exc}")
        if broadcast:
            outcome = broadcast_object_list([outcome], from_process=0)[0]
        replies, seconds, error = outcome
        if error is not None:
            raise StackrlError(error)
        return replies, seconds

    @contextlib.contextmanager
    def scoring_model(self, name: str, tokenizer, caller: str):
        """Model ``name`` to score with: an ``hf`` model whose tokenizer is the policy's ``tokenizer``."""
        model = self.models[name]
        if model.kind != "hf":
            raise StackrlError(
                f"{caller}(model={name!r}): aux model '{name}' (backend {model.kind}) gives no log-probs; only an "
                "hf model scores"
            )
        if not model.shares_tokenizer(tokenizer):
            raise StackrlError(
                f"{caller}(model={name!r}): aux model '{name}' has another tokenizer than the policy, so the "
                "policy's token ids mean other tokens to it; it may generate and judge, but not score"
            )
        with model.on_device() as net:
            yield net

    def window_figures(self) -> dict[str, float]:
        """Each model's figures since the last call, as metrics ``aux/<name>/<figure>`` (``latency_s``: seconds
        waited per call)."""
        figures = {}
        for name, window in self._window.items():
            figures.update({
                f"aux/{name}/calls": window.calls, f"aux/{name}/cache_hits": window.cache_hits,
                f"aux/{name}/failures": window.failures,
                f"aux/{name}/latency_s": window.seconds / window.calls if window.calls else 0.0,
            })
        self._window = {name: AuxFigures() for name in self.models}
        return figures

    def summary(self) -> list[str]:
        """One line per model for the run summary: backend, memory footprint, and what it was asked."""
        lines = []
        for name, model in self.models.items():
            total = self.totals[name]
            memory = f", {model.footprint / 2**20:.1f} MiB of weights" if model.kind == "hf" else ""
            lines.append(
                f"{name} ({model.kind}{memory}): {total.calls} calls, {total.cache_hits} cache hits, "
                f"{total.failures} failures, {total.seconds:.2f} s"
            )
        return lines


def load_aux_models(sections: dict[str, AuxModelSection], device: torch.device) -> AuxModels:
    """The config's ``aux_models``, each loaded on every process (``hf`` models on ``device``)."""
    models = {}
    for name, section in sections.items():
        key = f"aux_models.{name}"
        if section.backend == "hf":
            models[name] = HfModel(section, key, device)
        elif section.backend == "openai":
            models[name] = ServerModel(section, key)
        else:
            models[name] = RuleModel(section, key)
    return AuxModels(models)


# The auxiliary models of each trainer (set by stackrl.run.build_trainer), read by stackrl.policy.
_BY_TRAINER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def attach_aux_models(trainer, models: AuxModels) -> None:
    """Make ``models`` the auxiliary models of ``trainer``'s run."""
    _BY_TRAINER[trainer] = models


def aux_models_of(trainer) -> AuxModels | None:
    """The auxiliary models of ``trainer``'s run, or ``None`` where it has none."""
    return _BY_TRAINER.get(trainer)
