"""The self-teacher block: teacher prompts, scoring at chosen positions, divergences, snapshots of the policy, and
the check of the config keys its plugins share, and the config piece and plugin base that hold them."""

import math
import re
from dataclasses import dataclass
from types import SimpleNamespace
from typing import ClassVar

import pytest
import torch

from stackrl import ConfigError, Rollout, StackrlError
from stackrl.blocks.teacher import (
    SelfTeacherPlugin,
    TeacherSettings,
    check_teacher_settings,
    forward_kl,
    forward_kl_clip_scale,
    generalized_jsd,
    geometric_interpolation,
    position_weights,
    privileged,
    privileged_rows,
    privileged_student_and_teacher,
    relative_positions,
    restrict_to_teacher_topk,
    returns_to_go,
    reverse_kl,
    student_and_teacher,
    teacher_prompts,
)
from stackrl.policy import _SNAPSHOTS, PolicyAccess
from stackrl.run import build_trainer

CONTEXTS = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]]
CONTINUATIONS = [[20, 21], [22, 23, 24, 25], [26]]


@pytest.fixture
def trainer(make_config):
    return build_trainer(make_config(["digit_reward"]))


# -- teacher prompts -------------------------------------------------------------------------------------------------


def test_teacher_prompt_is_the_template_filled_with_prompt_and_columns():
    prompts = ["What is 2 + 3?\n", "What is 4 * 2?\n"]
    columns = {"solution": ["2 + 3 = 5", "4 * 2 = 8"], "answer": ["5", "8"]}
    built = teacher_prompts(prompts, columns, "{prompt}Solution: {solution} ({answer})\n{prompt}")
    assert built == [
        "What is 2 + 3?\nSolution: 2 + 3 = 5 (5)\nWhat is 2 + 3?\n",
        "What is 4 * 2?\nSolution: 4 * 2 = 8 (8)\nWhat is 4 * 2?\n",
    ]


def test_chat_prompt_gets_the_template_in_its_last_user_message():
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 1 + 1?"}]
    (built,) = teacher_prompts([chat], {"solution": ["1 + 1 = 2"]}, "{prompt}\nReference: {solution}")
    assert built == [chat[0], {"role": "user", "content": "What is 1 + 1?\nReference: 1 + 1 = 2"}]
    assert chat[1]["content"] == "What is 1 + 1?", "the student's prompt is left alone"


def test_a_row_without_an_answer_or_a_value_the_template_uses_has_no_privileged_context():
    rollout = Rollout(
        prompts=["a", "b", "c", "d"], completions=["x"] * 4, prompt_ids=[[1]] * 4, completion_ids=[[2]] * 4,
        columns={"solution": ["s", "s", None, "s"], "answer": ["1", "1", "2", None], "hint": ["h", None, "h", "h"]},
        group_size=2,
    )
    assert privileged_rows(rollout) == [0, 1, 2]  # the answer alone
    assert privileged_rows(rollout, "{solution}\n\n{prompt}") == [0, 1]
    assert privileged_rows(rollout, "{solution}", "{hint} {label}") == [0]  # {label} is no column: the template's
    assert privileged(rollout, "{solution}").prompts == ["a", "b"]
    assert privileged(rollout.select([0, 1]), "{prompt}").prompts == ["a", "b"]
    assert privileged(rollout.select([3]), "{prompt}") is None  # nothing to distil
    renamed = Rollout(**{**vars(rollout), "answer_column": "target"})
    assert privileged_rows(renamed) == [0, 1, 2, 3]  # only the column data.answer_column names holds the answers
    del rollout.columns["answer"]  # a label-free run: no answer to check
    assert privileged_rows(rollout, "{solution}") == [0, 1, 3]


def test_template_field_without_a_column_is_named():
    with pytest.raises(StackrlError) as error:
        teacher_prompts(["q"], {"answer": ["1"]}, "{prompt}{solution}", where="opsd.teacher_template")
    assert str(error.value) == (
        "opsd.teacher_template: the template uses {solution}, which the rollout has no column for; columns: answer"
    )


# -- scoring at chosen positions -------------------------------------------------------------------------------------


def test_positions_give_the_full_result_packed(trainer):
    policy = trainer._shared_policy
    full = policy.score(CONTEXTS, CONTINUATIONS, topk=3, full_vocab=True)
    wanted = [[1], [0, 2, 3], []]
    packed = policy.score(CONTEXTS, CONTINUATIONS, topk=3, full_vocab=True, positions=wanted)
    at = torch.zeros_like(full.mask)
    for row, where in enumerate(wanted):
        at[row, where] = 1
    assert torch.equal(packed.mask, at)
    chosen = at.bool()
    assert packed.vocab_logprobs.shape == (4, full.vocab_logprobs.size(-1))
    assert torch.allclose(packed.vocab_logprobs, full.vocab_logprobs[chosen], atol=1e-5)
    assert torch.allclose(packed.topk_logprobs, full.topk_logprobs[chosen], atol=1e-5)
    assert torch.equal(packed.topk_ids, full.topk_ids[chosen])
    assert torch.allclose(packed.logprobs, full.logprobs * at, atol=1e-5)
    as_mask = policy.score(CONTEXTS, CONTINUATIONS, full_vocab=True, positions=at)
    assert torch.allclose(as_mask.vocab_logprobs, packed.vocab_logprobs)


def test_gradient_reaches_only_the_chosen_positions(trainer):
    """With grad, the LM head sees only the asked hidden states: nothing else gets a gradient through it."""
    policy = PolicyAccess(trainer, sharded=False, model=trainer.model)
    hidden = []
    head = trainer.model.get_output_embeddings()
    handle = head.register_forward_hook(lambda module, args, out: hidden.append(args[0]))
    scores = policy.score(CONTEXTS, CONTINUATIONS, grad=True, full_vocab=True, positions=[[1], [3], []])
    handle.remove()
    assert hidden[0].shape[:2] == (1, 2), "the head projected two hidden states, not B x T"
    scores.vocab_logprobs.sum().backward()
    assert head.weight.grad is not None and torch.isfinite(head.weight.grad).all()


def test_positions_outside_a_continuation_are_refused(trainer):
    with pytest.raises(StackrlError, match=r"score\(\): position 2 of row 0 is outside its continuation of 2 tokens"):
        trainer._shared_policy.score(CONTEXTS, CONTINUATIONS, positions=[[2], [], []])


@pytest.mark.parametrize("top_k", [None, 3])
def test_student_and_teacher_pair_the_two_at_every_completion_token(trainer, top_k):
    """The student on its trained prompt, the teacher on the template's, both at the temperature, packed over every
    completion token; with top_k, both restricted to the teacher's top tokens."""
    policy, tokenizer = trainer._shared_policy, trainer.processing_class
    prompts, completions = ["12+3=", "4*5="], ["15", "20 ok"]
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    rollout = Rollout(prompts=prompts, completions=completions, prompt_ids=[encode(p) for p in prompts],
                      completion_ids=[encode(c) for c in completions], columns={"solution": ["15", "20"]},
                      group_size=2)
    template = "{solution} {prompt}"
    student, teacher = student_and_teacher(
        policy, rollout, template, teacher="policy", temperature=1.7, top_k=top_k, grad=False
    )
    everywhere = [range(len(ids)) for ids in rollout.completion_ids]
    common = dict(positions=everywhere, temperature=1.7, full_vocab=True)
    own = policy.score(rollout.prompt_ids, rollout.completion_ids, **common).vocab_logprobs
    shown = policy.score(["15 12+3=", "20 4*5="], rollout.completion_ids, **common).vocab_logprobs
    assert student.shape[0] == sum(len(ids) for ids in rollout.completion_ids)
    if top_k is not None:
        top = shown.topk(top_k, dim=-1)
        own, shown = restrict_to_teacher_topk(own, top.values, top.indices)
    assert torch.allclose(student, own, atol=1e-5) and torch.allclose(teacher, shown, atol=1e-5)
    assert not torch.allclose(student, teacher, atol=1e-3)


def test_privileged_student_and_teacher_scores_the_rows_with_the_teachers_context_from_a_plugins_section(trainer):
    """A loss term's pair: only the rows with a solution, scored as student_and_teacher scores them with the
    section's teacher, temperature and top-k; the section names the template in errors; no row, no pair."""
    policy, tokenizer = trainer._shared_policy, trainer.processing_class
    prompts, completions = ["12+3=", "7-2=", "4*5="], ["15", "5", "20 ok"]
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    rollout = Rollout(prompts=prompts, completions=completions, prompt_ids=[encode(p) for p in prompts],
                      completion_ids=[encode(c) for c in completions], columns={"solution": ["15", None, "20"]},
                      group_size=3)
    reports = []
    ctx = SimpleNamespace(rollout=rollout, score=policy.score, sampling_temperature=1.3, training=False,
                          acted=lambda n, of, hint=None: reports.append((n, of)))
    section = SimpleNamespace(teacher_template="{solution} {prompt}", teacher="policy", temperature=1.7, top_k=3)
    kept, student, teacher = privileged_student_and_teacher(ctx, "someplugin", section)
    assert kept.prompts == ["12+3=", "4*5="]
    assert reports == [(2, 3)]  # the plugin's activity: the rows with the teacher's context
    expected = student_and_teacher(policy, kept, "{solution} {prompt}", teacher="policy", temperature=1.7, top_k=3,
                                   grad=False)
    assert torch.allclose(student, expected[0]) and torch.allclose(teacher, expected[1])
    assert student.shape == (sum(len(ids) for ids in kept.completion_ids), 3)
    with pytest.raises(StackrlError, match=r"someplugin.teacher_template: the template uses \{hint\}"):
        privileged_student_and_teacher(ctx, "someplugin", SimpleNamespace(
            teacher_template="{hint} {prompt}", teacher="policy", temperature=None))
    ctx.rollout = rollout.select([1])
    assert privileged_student_and_teacher(ctx, "someplugin", section) is None
    assert reports[-1] == (0, 1)


# -- divergences on hand-built distributions -------------------------------------------------------------------------

P = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])  # student
Q = torch.tensor([[0.25, 0.25, 0.5], [0.5, 0.25, 0.25]])  # teacher


def _kl(a, b):
    return sum(x * math.log(x / y) for x, y in zip(a, b) if x > 0)


def test_forward_and_reverse_kl_match_the_definition():
    fkl = forward_kl(P.log(), Q.log())  # KL(teacher || student): infinite where the student has 0 mass
    assert fkl[0] == math.inf
    assert fkl[1].item() == pytest.approx(_kl(Q[1].tolist(), P[1].tolist()), abs=1e-6)
    rkl = reverse_kl(P.log(), Q.log())
    assert rkl.tolist() == pytest.approx([math.log(2), _kl(P[1].tolist(), Q[1].tolist())], abs=1e-6)


def _logit_gradient(divergence, student_logits, teacher_logps, clip):
    logits = student_logits.clone().requires_grad_(True)
    divergence(torch.log_softmax(logits, -1), teacher_logps, clip).sum().backward()
    return logits.grad


@pytest.mark.parametrize("divergence", [forward_kl, reverse_kl])
def test_clip_bounds_the_push_on_each_logit_and_keeps_its_direction(divergence):
    torch.manual_seed(0)
    student_logits = torch.randn(64, 11) * 2
    noise = torch.randn(64, 11) * torch.tensor([2.0, 0.05]).repeat_interleave(32).unsqueeze(1)  # far, then near
    teacher = torch.log_softmax(student_logits + noise, -1)
    free = _logit_gradient(divergence, student_logits, teacher, None)
    clipped = _logit_gradient(divergence, student_logits, teacher, 0.05)
    largest = free.abs().amax(-1)
    assert (largest > 0.05).sum() > 10 and (largest <= 0.05).sum() > 0, "both kinds of position are tested"
    # Each position's push scaled as a whole: the largest entry lands exactly on the clip, none changes sign.
    scale = (0.05 / largest).clamp(max=1.0)
    assert torch.allclose(clipped, free * scale.unsqueeze(-1), atol=1e-7)
    student = torch.log_softmax(student_logits, -1)
    assert torch.allclose(divergence(student, teacher, 0.05), divergence(student, teacher) * scale)
    if divergence is forward_kl:  # the factor a clipped forward KL applies, as a plugin logs it
        assert torch.allclose(forward_kl_clip_scale(student, teacher, 0.05), scale)


def test_generalized_jsd():
    s, t = P[1:].log(), Q[1:].log()
    m = (0.5 * P[1] + 0.5 * Q[1]).tolist()
    expected = 0.5 * _kl(Q[1].tolist(), m) + 0.5 * _kl(P[1].tolist(), m)
    assert generalized_jsd(s, t, beta=0.5).item() == pytest.approx(expected, abs=1e-6)
    assert generalized_jsd(s, t, beta=0.0).item() == pytest.approx(forward_kl(s, t).item())
    assert generalized_jsd(s, t, beta=1.0).item() == pytest.approx(reverse_kl(s, t).item())
    with pytest.raises(StackrlError, match="beta must lie in"):
        generalized_jsd(s, t, beta=1.5)


def test_topk_restriction_renormalises_over_the_teachers_top_tokens():
    top = torch.tensor([[0.5, 0.3, 0.2]]).log().topk(2)  # the teacher's top-2: tokens 0 and 1
    student, kept = restrict_to_teacher_topk(P[1:].log(), top.values, top.indices)
    assert kept.exp().tolist()[0] == pytest.approx([0.625, 0.375])
    assert student.exp().tolist()[0] == pytest.approx([0.4, 0.6])


def test_geometric_interpolation_mixes_the_logits_and_renormalises():
    first, second = torch.tensor([[0.7, 0.2, 0.1]]), torch.tensor([[0.1, 0.3, 0.6]])
    unnormalised = first**0.75 * second**0.25  # weight 0.25 toward the second
    expected = unnormalised / unnormalised.sum()
    got = geometric_interpolation(first.log(), second.log(), 0.25).exp()
    assert got.tolist()[0] == pytest.approx(expected.tolist()[0], abs=1e-6)
    shifted = geometric_interpolation(first.log() + 3.0, second.log() - 1.0, 0.25)  # raw logits: same distribution
    assert torch.allclose(shifted.exp(), got, atol=1e-6)
    assert torch.allclose(geometric_interpolation(first.log(), second.log(), 0.0).exp(), first, atol=1e-6)
    assert torch.allclose(geometric_interpolation(first.log(), second.log(), 1.0).exp(), second, atol=1e-6)
    beyond = geometric_interpolation(first.log(), second.log(), 2.0).exp()  # past the second, away from the first
    assert beyond[0, 2] > second[0, 2] and beyond[0, 0] < second[0, 0]


def test_position_weights_grow_with_the_relative_position_and_average_one_per_row():
    assert relative_positions([2, 4]).tolist() == pytest.approx([0.5, 1.0, 0.25, 0.5, 0.75, 1.0])
    assert position_weights([2, 4]).tolist() == pytest.approx([2 / 3, 4 / 3, 0.4, 0.8, 1.2, 1.6])
    squared = [0.25 + 0.75 * u**2 for u in (0.25, 0.5, 0.75, 1.0)]  # floor 0.25, power 2
    got = position_weights([4], power=2.0, floor=0.25)
    assert got.tolist() == pytest.approx([w / (sum(squared) / 4) for w in squared])
    assert position_weights([3, 1], power=0.0).tolist() == pytest.approx([1.0] * 4)
    with pytest.raises(StackrlError, match="power must be >= 0 and floor in"):
        position_weights([3], floor=1.5)


def test_returns_to_go_sum_the_rest_of_each_row():
    values = torch.tensor([1.0, 2.0, 4.0, 8.0, 16.0])
    assert returns_to_go(values, [3, 2]).tolist() == [7.0, 6.0, 4.0, 24.0, 16.0]
    assert returns_to_go(values, [3, 2], include_current=False).tolist() == [6.0, 4.0, 0.0, 16.0, 0.0]
    with pytest.raises(StackrlError, match="5 values for rows of 4 tokens"):
        returns_to_go(values, [2, 2])


# -- snapshots -------------------------------------------------------------------------------------------------------


def _nudge(model):
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))


def test_snapshot_is_a_frozen_copy_and_moves_as_an_ema(trainer):
    policy = trainer._shared_policy
    policy.update_snapshot("teacher")
    same = policy.score(CONTEXTS, CONTINUATIONS, model="teacher")
    assert torch.equal(same.logprobs, policy.score(CONTEXTS, CONTINUATIONS).logprobs)
    weight = trainer.model.get_output_embeddings().weight
    before = weight.detach().clone()
    _nudge(trainer.model)
    assert not torch.equal(policy.score(CONTEXTS, CONTINUATIONS, model="teacher").logprobs,
                           policy.score(CONTEXTS, CONTINUATIONS).logprobs)
    policy.update_snapshot("teacher", decay=0.75)
    copy = _SNAPSHOTS[trainer]["teacher"].model.get_output_embeddings().weight
    assert torch.allclose(copy, 0.75 * before + 0.25 * weight.detach(), atol=1e-6)
    assert not copy.requires_grad
    policy.update_snapshot("teacher")  # decay 0: a plain copy
    assert torch.equal(copy, weight.detach())


def test_snapshot_of_a_lora_policy_shares_the_base_weights(make_config):
    trainer = build_trainer(make_config(["digit_reward"], model={"lora": {"r": 4}}))
    trainer._shared_policy.update_snapshot("teacher")
    copy = _SNAPSHOTS[trainer]["teacher"].model
    live = dict(trainer.model.named_parameters())
    for name, p in copy.named_parameters():
        assert (p is live[name]) == (not live[name].requires_grad), name


def test_snapshot_names_and_grad(trainer):
    policy = trainer._shared_policy
    with pytest.raises(StackrlError, match="'reference' names a model already"):
        policy.update_snapshot("reference")
    with pytest.raises(StackrlError, match=r"model must be one of 'policy', 'reference' \(snapshots"):
        policy.score(CONTEXTS, CONTINUATIONS, model="teacher")
    policy.update_snapshot("teacher")
    with pytest.raises(StackrlError, match="snapshot 'teacher' is frozen"):
        PolicyAccess(trainer, sharded=False, model=trainer.model).score(CONTEXTS, CONTINUATIONS, model="teacher", grad=True)


@pytest.mark.parametrize(
    ("settings", "teachers", "message"),
    [
        ({"teacher": "ema"}, ("policy", "reference"), "x.teacher: must be one of policy, reference, not 'ema'"),
        ({"temperature": 0.0}, ("policy", "reference"), "x.temperature: must be positive, not 0.0"),
        ({"top_k": 0}, ("policy", "reference"), r"x.top_k: must be at least 1 \(or null"),
    ],
)
def test_check_teacher_settings_names_the_key(settings, teachers, message):
    config = SimpleNamespace(**{"teacher": "policy", "temperature": None, "top_k": None, **settings})
    with pytest.raises(ConfigError, match=message):
        check_teacher_settings("x", config, teachers)


def test_check_teacher_settings_leaves_an_open_teacher_and_a_missing_top_k_alone():
    check_teacher_settings("x", SimpleNamespace(teacher="my_snapshot", temperature=0.7), teachers=None)


@dataclass
class _Settings(TeacherSettings):
    section: ClassVar[str] = "x"
    choices: ClassVar[dict[str, tuple[str, ...]]] = {"form": ("a", "b")}
    form: str = "a"
    weight: float = 1.0
    first_template: str = "{solution}\n\n{prompt}"

    def check(self):
        if self.weight < 0:
            self.refuse("weight", f"must be non-negative, not {self.weight}")


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"teacher": "ema"}, "x.teacher: must be one of policy, reference, not 'ema'"),
        ({"temperature": 0.0}, "x.temperature: must be positive, not 0.0"),
        ({"form": "c"}, "x.form: must be one of a, b, not 'c'"),
        ({"weight": -1.0}, "x.weight: must be non-negative, not -1.0"),
    ],
)
def test_teacher_settings_refuse_a_bad_setting_when_built_naming_its_key(settings, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        _Settings(**settings)


def test_teacher_settings_default_to_the_live_policy_at_the_sampling_temperature():
    settings = _Settings()
    assert (settings.teacher, settings.temperature) == ("policy", None)


class _Plugin(SelfTeacherPlugin):
    Config = _Settings
    name = "x"
    templates = ("first_template",)


def test_a_self_teacher_plugin_checks_its_templates_and_a_frozen_teacher_against_the_run():
    checked = []
    run = SimpleNamespace(
        check_template=lambda plugin, key: checked.append(key), need_reference=lambda key, what: checked.append(key)
    )
    _Plugin().check_run(run)
    assert checked == ["first_template"]
    _Plugin(_Settings(teacher="reference")).check_run(run)
    assert checked == ["first_template", "first_template", "x.teacher"]
