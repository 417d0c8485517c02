"""PMD level 1: the memory keeps each prompt's latest verified solution, the teacher reads it, the loss is the JSD."""

import pytest
import torch

from stackrl import Rollout
from stackrl.blocks.teacher import teacher_prompts
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl.testing.heldout import WRITTEN_PROBLEMS, WRITTEN_SLIPS, completion_logits, written_rollout
from stackrl_pmd import PmdConfig, memory_divergence
from stackrl_pmd.config import MEMORY, MEMORY_TEMPLATE


class TestConformance(PluginConformance):
    plugin_name = "pmd"
    refused_settings = [
        ({"beta": 2.0}, r"must lie in \[0, 1\], not 2.0"),
        ({"distill": "wrong"}, "must be one of all, failed, not 'wrong'"),
        ({"update": "never"}, "must be one of latest, first, not 'never'"),
        ({"teacher": "ema"}, "must be one of policy, reference, not 'ema'"),
    ]


def stub(completions, rewards, prompts=("a", "a", "b", "b")) -> Rollout:
    """Two groups of two: prompt ``a`` (tokens [1]) then ``b`` (tokens [2])."""
    return Rollout(prompts=list(prompts), completions=list(completions),
                   prompt_ids=[[1] if p == "a" else [2] for p in prompts], completion_ids=[[5]] * len(completions),
                   columns={"answer": ["x"] * len(completions)}, group_size=2,
                   rewards={"exact_match": torch.tensor(rewards)})


class StepStub:
    def __init__(self, rollout, step=1):
        self.rollout, self.step, self.logged = rollout, step, {}

    def log(self, name, value):
        self.logged[name] = value


def test_memory_keeps_each_groups_first_verified_completion_and_only_verified_ones():
    plugin = make_plugin("pmd")
    plugin.post_step(StepStub(stub(["a wrong", "a right", "b wrong", "b wrong too"], [0.0, 1.0, 0.0, 0.0])))
    assert plugin.memory.values == {(1,): "a right"}  # prompt b had no verified completion: no memory


def test_latest_memory_follows_the_policy_and_first_stays_frozen():
    steps = [stub(["a one", "a two", "b one", "b two"], [1.0, 1.0, 1.0, 0.0]),
             stub(["a three", "a four", "b three", "b four"], [0.0, 1.0, 0.0, 0.0])]
    latest, first = make_plugin("pmd"), make_plugin("pmd", update="first")
    for rollout in steps:
        for plugin in (latest, first):
            plugin.post_step(StepStub(rollout))
    assert latest.memory.values == {(1,): "a four", (2,): "b one"}
    assert first.memory.values == {(1,): "a one", (2,): "b one"}


def test_the_advantage_stage_gives_each_row_its_prompts_earlier_memory_and_leaves_advantages(tmp_path):
    plugin = make_plugin("pmd")
    plugin.memory.values = {(1,): "a remembered"}
    rollout = stub(["a now right", "a wrong", "b right", "b wrong"], [1.0, 0.0, 1.0, 0.0])
    ctx = StepStub(rollout)
    ctx.training = True
    assert plugin.reshape_advantages(torch.ones(4), ctx) is None
    # This step's own successes are not yet memory: b has none, a keeps the earlier one.
    assert rollout.columns[MEMORY] == ["a remembered", "a remembered", None, None]
    failed = make_plugin("pmd", distill="failed")
    failed.memory.values = dict(plugin.memory.values)
    failed.reshape_advantages(torch.ones(4), ctx)
    assert rollout.columns[MEMORY] == [None, "a remembered", None, None]


def test_memory_survives_a_checkpoint(tmp_path):
    plugin = make_plugin("pmd")
    plugin.post_step(StepStub(stub(["a right", "a wrong", "b wrong", "b right"], [1.0, 0.0, 0.0, 1.0])))
    torch.save(plugin.state_dict(), tmp_path / "state.pt")
    resumed = make_plugin("pmd")
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    assert resumed.memory.values == {(1,): "a right", (2,): "b right"}
    assert resumed.memory.recall(stub(["x"] * 4, [0.0] * 4).prompt_ids) == ["a right", "a right", "b right", "b right"]


SAMPLING_TEMPERATURE = 1.5


def direct_jsd(trainer, rollout, beta: float) -> torch.Tensor:
    """The generalized JSD at every completion token from the raw logits in float64: the student after the bare
    question, the teacher after the row's memory then the question (the built-in reference layout)."""
    teacher_ids = trainer._tokenize_prompts(teacher_prompts(rollout.prompts, rollout.columns, MEMORY_TEMPLATE))[0]
    values = []
    for student_ids, teacher_context, completion in zip(rollout.prompt_ids, teacher_ids, rollout.completion_ids):
        student, teacher = (completion_logits(trainer.model, ids, completion) / SAMPLING_TEMPERATURE
                            for ids in (student_ids, list(teacher_context)))
        p, q = student.softmax(-1), teacher.softmax(-1)
        m = beta * q + (1 - beta) * p
        values.append(beta * (q * (q / m).log()).sum(-1) + (1 - beta) * (p * (p / m).log()).sum(-1))
    return torch.cat(values)


def test_the_loss_is_the_jsd_to_the_policy_shown_its_memory(built_in_trainer):
    """On the built-in model: a remembered right solution before the question, and a wrong attempt scored."""
    trainer = built_in_trainer(["pmd"], trainer={"temperature": SAMPLING_TEMPERATURE})
    problem = "(4 * 2) + 3"
    rollout = written_rollout(trainer.processing_class, [problem] * 2,
                              [WRITTEN_SLIPS[problem], WRITTEN_PROBLEMS[problem]])
    rollout.columns[MEMORY] = [WRITTEN_PROBLEMS[problem]] * 2  # a verified solution of an earlier step
    got = memory_divergence(trainer._shared_policy, rollout, PmdConfig(beta=0.3), grad=False)
    expected = direct_jsd(trainer, rollout, 0.3)
    assert torch.allclose(got.double(), expected, rtol=1e-4, atol=1e-7)
    # The memory moves the teacher: the slip departs from it, the right attempt follows it; a teacher without
    # the memory (the bare question) would give no divergence at all.
    slip, right = expected.split([len(ids) for ids in rollout.completion_ids])
    assert slip.max() > 0.1 and slip.max() > 2 * right.max()
