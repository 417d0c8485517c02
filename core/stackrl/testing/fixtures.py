"""pytest fixtures for stackrl and its plugins (registered through the ``pytest11`` entry point)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from filelock import FileLock
from transformers import TrainerCallback

import stackrl.testing  # noqa: F401  (sets the offline environment before transformers is imported)
from stackrl import noise
from stackrl.cpu import available_cpus
from stackrl.testing.tiny import build_tiny_model, tiny_config


def pytest_configure(config):
    # pytest sets the warning filters anew around every test, from its own settings: the known noise goes there.
    for category, message in noise.KNOWN_WARNINGS:
        config.addinivalue_line("filterwarnings", f"ignore:{message}:{category.__name__}")
    share_cpus_between_workers()


def share_cpus_between_workers() -> None:
    """Under pytest-xdist, give each worker (and the runs it starts) its share of the CPUs: two workers of two
    torch threads each on two cores spin against each other (:mod:`stackrl.cpu`) and took twice the CPU time of
    one thread each."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers is None or "OMP_NUM_THREADS" in os.environ:
        return
    threads = max(1, available_cpus() // int(workers))
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)


@dataclass
class HookCall:
    hook: str
    plugin: str
    result: Any


@dataclass
class HookRecorder:
    """Pass as ``monitor=`` to a run; keeps every plugin hook call in order."""

    calls: list[HookCall] = field(default_factory=list)

    def __call__(self, hook: str, plugin: str, kwargs: dict, result: Any) -> None:
        self.calls.append(HookCall(hook, plugin, result))

    def order(self, hook: str) -> list[str]:
        """The plugins called for ``hook``, in call order, across the run."""
        return [c.plugin for c in self.calls if c.hook == hook]

    def hooks(self) -> set[str]:
        return {c.hook for c in self.calls}


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A random tiny Qwen2 and a tokenizer trained on the built-in task, saved once per session.

    Under pytest-xdist the session's processes share one folder, beside their own temporary folders: the first to
    take the lock builds the model, the others wait for it and read it."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))
    folder = tmp_path_factory.getbasetemp().parent / "tiny-model"
    with FileLock(f"{folder}.lock"):
        if not folder.is_dir():
            build_tiny_model(folder.with_name("tiny-model.partial")).rename(folder)
    return folder


@pytest.fixture
def make_config(tiny_model_dir, tmp_path):
    """``make_config(plugins=(), overrides=(), **sections)``: a validated quick CPU config on the tiny model."""

    def make(plugins=(), overrides=(), **sections):
        sections.setdefault("output_dir", str(tmp_path / "run"))
        return tiny_config(tiny_model_dir, plugins, tmp_dir=tmp_path, overrides=overrides, **sections)

    return make


@pytest.fixture
def built_in_trainer(make_config):
    """``built_in_trainer(plugins, **sections)``: an untrained trainer of ``make_config``'s run on the built-in model
    ``stackrl/arith-tiny``, which follows a reference solution placed before the question: its contexts and its
    policy's scores are what a rule test of a privileged-context teacher reads."""

    def build(plugins, **sections):
        from stackrl.run import build_trainer

        return build_trainer(make_config(plugins, model={"name_or_path": "stackrl/arith-tiny"}, **sections))

    return build


@pytest.fixture
def hook_recorder():
    return HookRecorder()


@dataclass
class DistilledCompletions:
    """The (prompt ids, completion ids) of every student score taken with gradient: in a run of a loss term that
    distils, the completions it distilled."""

    scored: list[tuple[list[int], list[int]]] = field(default_factory=list)

    def correct(self, trainer) -> list[bool]:
        """Whether each completion reaches its prompt's answer in the trainer's dataset (``exact_match``)."""
        from stackrl.rewards import exact_match

        decode = lambda ids: trainer.processing_class.decode(ids, skip_special_tokens=True)  # noqa: E731
        answers = dict(zip(trainer.train_dataset["prompt"], trainer.train_dataset["answer"]))
        return [exact_match(decode(completion), answers[decode(prompt)]) == 1.0 for prompt, completion in self.scored]


@pytest.fixture
def distilled_completions(monkeypatch):
    """A :class:`DistilledCompletions` that every score with gradient in the test adds to."""
    from stackrl.policy import PolicyAccess

    recorded, score = DistilledCompletions(), PolicyAccess.score

    def recording(self, contexts, continuation_ids, **options):
        if options.get("grad"):  # the student's score in a loss term: its contexts are the prompts' tokens
            recorded.scored.extend(zip(contexts, continuation_ids))
        return score(self, contexts, continuation_ids, **options)

    monkeypatch.setattr(PolicyAccess, "score", recording)
    return recorded


class StopAt(TrainerCallback):
    """Interrupts training after ``step``, saving a checkpoint there: the first half of a resume test."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_training_stop = True
            control.should_save = True


def make_plugin(name: str, **settings):
    """The installed plugin ``name`` with its ``Config(**settings)``, named as a run names it: for calling its hooks
    on hand-built contexts."""
    from stackrl.manager import installed_plugins

    cls = installed_plugins()[name].load()
    plugin = cls(cls.Config(**settings))
    plugin.name = name
    return plugin


class Scripted:
    """A sample-stage context whose policy writes each row's scripted replies in turn, for the tests of multi-turn
    rollouts (:mod:`stackrl.blocks.turns`): one character a token, the end-of-sequence token ``9`` after each
    reply, a row told by the prompt its context starts with (a key of ``replies``)."""

    eos_token_ids = [9]

    def __init__(self, replies: dict[str, list[str]]):
        self.replies = {prompt: list(texts) for prompt, texts in replies.items()}

    def tokenizer(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def generate(self, contexts):
        from stackrl.policy import Generation

        out = []
        for context in contexts:
            text = context if isinstance(context, str) else "".join(map(chr, context))
            reply = self.replies[next(p for p in self.replies if text.startswith(p))].pop(0)
            ids = self.tokenizer(text)["input_ids"]
            out.append(Generation(ids, [ord(c) for c in reply] + self.eos_token_ids, reply))
        return out


def train_steps(config, steps: int | None = None, monitor=None, resume=None, **trainer_kwargs):
    """Build the run's trainer from ``config`` and train (``steps`` overrides ``trainer.max_steps``)."""
    from stackrl.run import build_trainer

    trainer = build_trainer(config, monitor=monitor, **trainer_kwargs)
    if steps is not None:
        trainer.args.max_steps = steps
    trainer.train(resume_from_checkpoint=resume)
    return trainer


@dataclass
class DrawnGroup:
    step: int
    row: int  # the pool row the group's prompt came from
    prompt: Any
    completions: list[str]
    rewards: list[float]  # the plugin's

    def reaching(self, answer: str) -> list[bool]:
        """Whether each completion ends on the built-in task's answer line with ``answer``."""
        return [completion.strip().endswith(f"The answer is {answer}.") for completion in self.completions]


class DrawnGroups:
    """Pass as ``monitor=`` to a run: at each of ``plugin``'s ``post_step`` calls, keeps each group of the batch
    (:class:`DrawnGroup`), in order, in ``groups``."""

    def __init__(self, plugin: str):
        self.plugin = plugin
        self.groups: list[DrawnGroup] = []

    def __call__(self, hook: str, plugin: str, kwargs: dict, result: Any) -> None:
        if hook == "post_step" and plugin == self.plugin:
            ctx = kwargs["ctx"]
            rollout, size = ctx.rollout, ctx.rollout.group_size
            rewards = rollout.rewards[self.plugin].view(-1, size).tolist()
            for g, row in enumerate(ctx.pool.last_batch):
                span = slice(g * size, (g + 1) * size)
                self.groups.append(DrawnGroup(ctx.step, row, rollout.prompts[g * size],
                                              list(rollout.completions[span]), rewards[g]))

    def first_groups(self, rows) -> dict[int, DrawnGroup]:
        """The first group drawn of each of ``rows`` that was drawn."""
        first = {}
        for group in self.groups:
            if group.row in rows:
                first.setdefault(group.row, group)
        return first
