"""AntiSD: the advantage form adds -(softplus(u) - log 2) / 2 of each sampled token's teacher-student gap to GRPO's
advantage, bounded above by log(2) / 2; the loss form ascends the bounded JSD to the privileged teacher; the gate
reads the teacher's entropy, switches the term off below its threshold, and survives a resume."""

import math

import pytest
import torch

from stackrl import ConfigError
from stackrl.run import build_trainer
from stackrl.tasks.arithmetic import REFERENCE_TEMPLATE
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import StopAt, train_steps
from stackrl.testing.heldout import advantage_context, completion_logits, written_rollout
from stackrl_antisd import Antisd, AntisdConfig
from stackrl_antisd.plugin import ascent_term, bounded_advantage


class TestConformance(PluginConformance):
    plugin_name = "antisd"


def _logps(trainer, context, completion, temperature):
    """The built-in model's log-probs at each completion position, from its raw logits in float64."""
    return (completion_logits(trainer.model, context, completion).double() / temperature).log_softmax(-1)


def test_the_advantage_is_minus_half_of_softplus_of_the_gap_less_log_two():
    """Written out as -(log(1 + e^u) - log 2) / 2: a flipped sign, a missing log 2 or a missing half all differ."""
    gap = torch.tensor([-60.0, -3.0, -0.5, 0.0, 0.5, 3.0, 60.0])
    expected = torch.tensor([-(math.log1p(math.exp(u)) - math.log(2)) / 2 for u in gap.tolist()])
    got = bounded_advantage(gap)
    assert torch.allclose(got, expected, atol=1e-6)
    assert got[3] == 0  # no gap, nothing added: padding and rows without a teacher keep GRPO's advantage
    assert (got[:3] > 0).all() and (got[4:] < 0).all()  # tokens the teacher expects less gain credit


def test_the_advantage_is_bounded_above_by_half_log_two_and_linear_below():
    """However far below the student the teacher puts a token, its bonus stays under log(2) / 2 (the bound the
    abstract calls natural); a token the teacher expects more loses about u / 2, without bound."""
    gap = torch.linspace(-1e4, 1e4, 20001, dtype=torch.float64)
    got = bounded_advantage(gap)
    assert got.max().item() <= math.log(2) / 2
    assert got[0].item() == pytest.approx(math.log(2) / 2, abs=1e-6)
    assert (got.diff() <= 0).all()  # the more the teacher expects a token, the less credit it gets
    assert got[-1].item() == pytest.approx(-(1e4 - math.log(2)) / 2, rel=1e-6)


def test_the_plugin_adds_the_scaled_bonus_of_the_teachers_gap_to_grpos_advantage(make_config):
    """On the built-in model: each token's advantage is GRPO's plus scale times the bounded term of
    log pi(y_t | solution, question) - log pi(y_t | question), written out on raw logits at the sampling
    temperature; the gap taken the other way round gives another advantage."""
    temperature = 1.3
    trainer = build_trainer(make_config(["antisd"], model={"name_or_path": "stackrl/arith-tiny"},
                                        antisd={"scale": 0.5, "gate_threshold": 0.0},
                                        trainer={"temperature": temperature}))
    plugin = trainer.plugins.plugins["antisd"]
    rollout = written_rollout(trainer.processing_class, ["(4 * 2) + 3", "(3 + 5) - 2"],
                              ["4 * 2 = 9\n9 + 3 = 12\nThe answer is 12.", "3 + 5 = 8\n8 - 2 = 6\nThe answer is 6."])
    advantages = torch.tensor([-0.7, 0.7])
    got = plugin.reshape_advantages(advantages, advantage_context(trainer, rollout, "antisd"))

    def sampled_logps(contexts):
        return [_logps(trainer, context, completion, temperature).gather(-1, torch.tensor(completion)[:, None])[:, 0]
                for context, completion in zip(contexts, rollout.completion_ids)]

    encode = lambda text: trainer.processing_class(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    teacher = sampled_logps([encode(REFERENCE_TEMPLATE.format(solution=s, prompt=p))
                             for s, p in zip(rollout.columns["solution"], rollout.prompts)])
    student = sampled_logps(rollout.prompt_ids)
    bonus = lambda u: -(torch.nn.functional.softplus(u) - math.log(2)) / 2  # noqa: E731
    for row, (t, s) in enumerate(zip(teacher, student)):
        n = len(t)
        assert torch.allclose(got[row, :n].double(), advantages[row] + 0.5 * bonus(t - s), atol=1e-4)
        assert (got[row, n:] == 0).all()
        assert not torch.allclose(got[row, :n].double(), advantages[row] + 0.5 * bonus(s - t), atol=1e-2)


def _jsd_by_hand(p: torch.Tensor, q: torch.Tensor, beta: float) -> torch.Tensor:
    """beta KL(q || m) + (1 - beta) KL(p || m), m = beta q + (1 - beta) p; p the student's, q the teacher's."""
    m = beta * q + (1 - beta) * p
    kl = lambda a, b: torch.where(a > 0, a * (a / b).log(), torch.zeros_like(a)).sum(-1)  # noqa: E731
    return beta * kl(q, m) + (1 - beta) * kl(p, m)


STUDENT = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
TEACHER = torch.tensor([[0.2, 0.5, 0.3], [0.6, 0.3, 0.1]])


@pytest.mark.parametrize("beta", [0.5, 0.2])
def test_the_term_is_minus_the_mean_jsd_of_student_and_teacher(beta):
    """An asymmetric beta tells the teacher's weight from the student's (swapping them gives another value)."""
    got = ascent_term(STUDENT.log(), TEACHER.log(), beta)
    expected = -_jsd_by_hand(STUDENT, TEACHER, beta).mean()
    assert torch.allclose(got, expected, atol=1e-6)
    assert got < 0
    if beta != 0.5:
        assert not torch.allclose(got, -_jsd_by_hand(STUDENT, TEACHER, 1 - beta).mean(), atol=1e-3)


def test_descending_the_term_moves_the_student_away_from_the_teacher():
    logits = STUDENT.log().clone().requires_grad_(True)
    optimizer = torch.optim.SGD([logits], lr=1.0)
    before = _jsd_by_hand(STUDENT, TEACHER, 0.5)
    for _ in range(5):
        optimizer.zero_grad()
        ascent_term(logits.log_softmax(-1), TEACHER.log(), 0.5).backward()
        optimizer.step()
    after = _jsd_by_hand(logits.detach().softmax(-1), TEACHER, 0.5)
    assert (after > before).all(), (before, after)


def test_each_token_contributes_at_least_minus_log_two():
    """Disjoint distributions are as far apart as they get: the JSD is log 2, where a KL would be infinite."""
    student = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]])
    teacher = torch.tensor([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]])
    assert torch.allclose(ascent_term(student.log(), teacher.log(), 0.5), torch.tensor(-math.log(2)))
    binary_entropy = -(0.2 * math.log(0.2) + 0.8 * math.log(0.8))
    assert torch.allclose(ascent_term(student.log(), teacher.log(), 0.2), torch.tensor(-binary_entropy))


def test_the_gate_reads_the_teachers_entropy_not_the_students(make_config):
    """On the built-in model, the batch mean entropy the gate takes is the teacher's (shown the solution), from its
    softmax at the sampling temperature; the student's, from the bare question, is another number."""
    temperature = 1.3
    trainer = build_trainer(make_config(["antisd"], model={"name_or_path": "stackrl/arith-tiny"},
                                        trainer={"temperature": temperature}))
    plugin = trainer.plugins.plugins["antisd"]
    rollout = written_rollout(trainer.processing_class, ["(4 * 2) + 3", "(3 + 5) - 2"],
                              ["4 * 2 = 8\n8 + 3 = 12\nThe answer is 12.", "3 + 5 = 8\n8 - 2 = 6\nThe answer is 6."])
    got = plugin.teacher_entropy(advantage_context(trainer, rollout, "antisd"))

    def mean_entropy(contexts):
        logps = torch.cat([_logps(trainer, context, completion, temperature)
                           for context, completion in zip(contexts, rollout.completion_ids)])
        return -(logps.exp() * logps).sum(-1).mean().item()

    encode = lambda text: trainer.processing_class(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    teacher = [encode(REFERENCE_TEMPLATE.format(solution=s, prompt=p))
               for s, p in zip(rollout.columns["solution"], rollout.prompts)]
    assert got == pytest.approx(mean_entropy(teacher), rel=1e-4)
    assert got != pytest.approx(mean_entropy(rollout.prompt_ids), rel=1e-2)


def test_the_gate_closes_below_its_threshold_and_then_removes_the_term(make_config):
    """A threshold above any entropy closes the gate on the first batch: no AntiSD term is ever added. A gate
    that never closed, or closed without removing the term, would log one."""
    def losses(**gate):
        config = make_config(["antisd"], antisd={"form": "loss", "gate_relative": False, **gate})
        trainer = train_steps(config, steps=2)
        logged = [log for log in trainer.state.log_history if "antisd/gate_open" in log]
        return trainer.plugins.plugins["antisd"].gate, logged

    closed, logged = losses(gate_threshold=1e3)
    assert closed.closed_at == 0 and not closed.is_open
    assert [log["antisd/gate_open"] for log in logged] == [0.0, 0.0]
    assert all("loss/antisd" not in log for log in logged)
    opened, logged = losses(gate_threshold=0.0)
    assert opened.is_open and opened.closed_at is None
    assert all(-math.log(2) <= log["loss/antisd"] < 0 for log in logged)


def test_a_closed_gate_leaves_grpos_advantage_in_the_advantage_form(make_config):
    """The bounded term follows the gate: a gate above any entropy closes on the first batch and no token's
    advantage is changed; a gate at 0 adds the term (logged) at every step."""
    def logs(threshold):
        config = make_config(["antisd"], antisd={"gate_relative": False, "gate_threshold": threshold})
        return [log for log in train_steps(config, steps=2).state.log_history if "antisd/gate_open" in log]

    assert all("antisd/bonus_mean" not in log for log in logs(1e3))
    assert all(log["antisd/bonus_mean"] <= math.log(2) / 2 for log in logs(0.0))


def test_the_gate_survives_a_resume(make_config, tmp_path):
    """The gate closes on the first batch. A resumed run that lost its state would take step 2's entropy as its
    baseline and close there; the checkpoint keeps both the first batch's entropy and the step it closed at."""
    saving = {"save_strategy": "steps", "save_steps": 2, "max_steps": 4}

    def run(name, **how):
        config = make_config(["antisd"], antisd={"gate_relative": False, "gate_threshold": 1e3},
                             trainer=saving,
                             output_dir=str(tmp_path / name))
        return train_steps(config, **how).plugins.plugins["antisd"].state_dict()

    straight = run("straight")
    run("resumed", callbacks=[StopAt(2)])
    resumed = run("resumed", resume=True)
    assert resumed == straight
    assert straight["closed_at"] == 0 and straight["baseline"] > 0


def test_bad_settings_name_the_key():
    with pytest.raises(ConfigError, match=r"antisd.form: must be one of advantage, loss"):
        Antisd(AntisdConfig(form="ascent"))
    with pytest.raises(ConfigError, match=r"antisd.scale: must be non-negative"):
        Antisd(AntisdConfig(scale=-0.1))
    with pytest.raises(ConfigError, match=r"antisd.beta: must lie strictly inside \(0, 1\)"):
        Antisd(AntisdConfig(beta=1.0))
    with pytest.raises(ConfigError, match=r"antisd.gate_threshold: must lie in \[0, 1\]"):
        Antisd(AntisdConfig(gate_threshold=1.5))
