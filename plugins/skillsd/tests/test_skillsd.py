"""Skill-SD: the library of successes, the retrieval into the teacher's context, the synced teacher, and the
importance-weighted reverse KL, each on hand-built inputs."""

import math

import pytest
import torch

from stackrl import Rollout
from stackrl.policy import Generation, Scores
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_skillsd import importance_weighted_reverse_kl, importance_weights
from stackrl_skillsd.config import SKILL


class TestConformance(PluginConformance):
    plugin_name = "skillsd"
    refused_settings = [
        ({"sync_every": 0}, "must be at least 1, not 0"),
        ({"truncation": 0.0}, "must be positive, not 0.0"),
        ({"teacher": "ema"}, "must be one of synced, policy, reference, not 'ema'"),
        ({"skill_form": "essay"}, "must be one of completion, summary, not 'essay'"),
        ({"teacher_template": "{prompt}"}, "must name {skill}"),
        ({"summary_tokens": 0}, "must be at least 1, not 0"),
    ]


# -- the loss ---------------------------------------------------------------------------------------------------------


def test_on_policy_the_loss_is_the_mean_gap_and_its_gradient_the_gap_itself():
    # Two rows, the second's last token padding. Student log-probs s, teacher q: gap s - q per token.
    s = torch.tensor([[math.log(0.5), math.log(0.2)], [math.log(0.4), 0.0]], requires_grad=True)
    q = torch.tensor([[math.log(0.25), math.log(0.4)], [math.log(0.4), -5.0]])
    mask = torch.tensor([[1, 1], [1, 0]])
    loss = importance_weighted_reverse_kl(s, q, mask)
    gaps = [math.log(2.0), math.log(0.5), 0.0]
    assert loss.item() == pytest.approx(sum(gaps) / 3)
    loss.backward()
    # w = pi/pi_old = 1 with gradient grad log pi: each token is pushed by its own gap (s - q) / 3, up where the
    # teacher rates it higher than the student, down where lower, not at all where they agree or on padding.
    expected = torch.tensor([[math.log(2.0) / 3, math.log(0.5) / 3], [0.0, 0.0]])
    assert torch.allclose(s.grad, expected, atol=1e-7)


def test_without_the_weight_the_sampled_token_difference_ignores_the_teacher():
    # The naive sampled-token estimator, log pi - log pi_T differentiated as it stands, pushes every token down
    # by 1/N whatever the teacher says; the weighted one follows the teacher. Told apart by any teacher.
    s = torch.tensor([[math.log(0.5), math.log(0.2)]], requires_grad=True)
    mask = torch.ones(1, 2)
    for q in (torch.tensor([[0.0, 0.0]]), torch.tensor([[-3.0, -3.0]])):
        s.grad = None
        importance_weighted_reverse_kl(s, q, mask).backward()
        assert torch.allclose(s.grad, (s - q).detach() / 2)
        s.grad = None
        ((s - q) * mask).sum().div(2).backward()
        assert torch.allclose(s.grad, torch.full((1, 2), 0.5))


def test_a_row_another_policy_wrote_is_weighted_by_the_truncated_ratio():
    s = torch.tensor([[math.log(0.5), math.log(0.3)]], requires_grad=True)
    behaviour = torch.tensor([[math.log(0.25), math.log(0.6)]])  # ratios 2 and 0.5
    w = importance_weights(s, behaviour, truncation=1.5)
    assert torch.allclose(w, torch.tensor([[1.5, 0.5]]))
    q = torch.tensor([[math.log(0.25), math.log(0.6)]])  # gaps log 2 and log 0.5
    loss = importance_weighted_reverse_kl(s, q, torch.ones(1, 2), behaviour_logps=behaviour, truncation=1.5)
    assert loss.item() == pytest.approx((1.5 * math.log(2.0) + 0.5 * math.log(0.5)) / 2)
    loss.backward()
    # Past the cap the push is c times the plain one; below it w times.
    assert torch.allclose(s.grad, torch.tensor([[1.5 * math.log(2.0) / 2, 0.5 * math.log(0.5) / 2]]))


# -- the library and the retrieval ------------------------------------------------------------------------------------


def stub(prompts, completions, rewards, ids=None) -> Rollout:
    """Groups of two; prompt ids are the prompts' own characters' codes."""
    return Rollout(prompts=list(prompts), completions=list(completions),
                   prompt_ids=[[ord(c) for c in p] for p in prompts], completion_ids=[[5, 6]] * len(prompts),
                   columns={"answer": ["x"] * len(prompts)}, group_size=2,
                   rewards={"exact_match": torch.tensor(rewards)})


class StepStub:
    def __init__(self, rollout, step=1, replies=None):
        self.rollout, self.step, self.logged, self.synced, self.asked = rollout, step, {}, [], []
        self.replies = replies

    def log(self, name, value):
        self.logged[name] = value

    def update_snapshot(self, name, decay=0.0, checkpoint=False):
        self.synced.append((self.step, name, decay))

    def generate(self, prompts, **sampling):
        self.asked.append((list(prompts), sampling))
        return [Generation([], [], text) for text in self.replies[: len(prompts)]]


FIRST = stub(["what is 3 + 4", "what is 3 + 4", "what is 9 * 8", "what is 9 * 8"],
             ["3 + 4 = 7 right", "wrong", "wrong", "wrong too"], [1.0, 0.0, 0.0, 0.0])
SECOND = stub(["what is 9 * 8", "what is 9 * 8", "what is 3 + 4", "what is 3 + 4"],
              ["wrong", "9 * 8 = 72 right", "3 + 4 = 7 again", "3 + 4 = 7 later"], [0.0, 1.0, 1.0, 1.0])


def test_each_groups_first_success_becomes_its_prompts_skill_the_latest_replacing_the_older():
    plugin = make_plugin("skillsd")
    plugin.post_step(StepStub(FIRST))
    assert [(r.prompt, r.artefact) for r in plugin.library] == [("what is 3 + 4", "3 + 4 = 7 right")]
    plugin.post_step(StepStub(SECOND, step=2))
    assert sorted((r.prompt, r.artefact, r.step) for r in plugin.library) == [
        ("what is 3 + 4", "3 + 4 = 7 again", 2), ("what is 9 * 8", "9 * 8 = 72 right", 2)]


def test_each_row_gets_the_skill_of_the_most_similar_stored_prompt_and_only_its_teacher_reads_it():
    plugin = make_plugin("skillsd")
    plugin.post_step(StepStub(FIRST))
    rollout = stub(["what is 3 + 4", "what is 3 + 4", "what is 3 + 5", "what is 3 + 5", "how are you", "how are you"],
                   ["a"] * 6, [0.0] * 6)
    ctx = StepStub(rollout)
    assert plugin.reshape_advantages(torch.ones(6), ctx) is None
    # Its own prompt's success, then the nearest prompt's, and none where no stored prompt shares a word.
    assert rollout.columns[SKILL] == ["3 + 4 = 7 right"] * 4 + [None, None]
    assert ctx.logged["skilled_rows"] == pytest.approx(4 / 6)


def test_a_similar_prompts_skill_is_chosen_over_a_dissimilar_ones():
    plugin = make_plugin("skillsd")
    plugin.post_step(StepStub(SECOND))  # skills of "what is 9 * 8" and "what is 3 + 4"
    rollout = stub(["what is 9 * 7", "what is 9 * 7"], ["a", "b"], [0.0, 0.0])
    plugin.reshape_advantages(torch.ones(2), StepStub(rollout))
    assert rollout.columns[SKILL] == ["9 * 8 = 72 right"] * 2


def test_a_summary_skill_is_the_policys_own_greedy_summary_of_the_success():
    plugin = make_plugin("skillsd", skill_form="summary", summary_tokens=32,
                         summary_template="Task: {prompt} Attempt: {completion} Skill:")
    ctx = StepStub(FIRST, replies=["  add before you multiply  "])
    plugin.post_step(ctx)
    (prompts, sampling), = ctx.asked
    assert prompts == ["Task: what is 3 + 4 Attempt: 3 + 4 = 7 right Skill:"]
    assert sampling["do_sample"] is False and sampling["max_new_tokens"] == 32
    assert [r.artefact for r in plugin.library] == ["add before you multiply"]


def test_the_synced_teacher_is_copied_at_the_start_and_every_sync_every_steps():
    plugin = make_plugin("skillsd", sync_every=3)
    start = StepStub(None, step=0)
    plugin.train_begin(start)
    synced = list(start.synced)
    for step in range(1, 7):
        ctx = StepStub(FIRST, step=step)
        plugin.post_step(ctx)
        synced += ctx.synced
    assert synced == [(0, "skillsd", 0.0), (3, "skillsd", 0.0), (6, "skillsd", 0.0)]
    assert plugin.teacher_model == "skillsd"
    live = make_plugin("skillsd", teacher="policy")
    ctx = StepStub(FIRST, step=10)
    live.post_step(ctx)
    assert ctx.synced == [] and live.teacher_model == "policy"


def test_the_library_survives_a_checkpoint_and_a_resumed_run_retrieves_the_same_skills(tmp_path):
    plugin = make_plugin("skillsd")
    plugin.post_step(StepStub(FIRST))
    plugin.post_step(StepStub(SECOND, step=2))
    torch.save(plugin.state_dict(), tmp_path / "state.pt")
    resumed = make_plugin("skillsd")
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    for which in (plugin, resumed):
        rollout = stub(["what is 9 * 7", "what is 9 * 7", "what is 3 + 4", "what is 3 + 4"], ["a"] * 4, [0.0] * 4)
        which.reshape_advantages(torch.ones(4), StepStub(rollout))
        which.retrieved = rollout.columns[SKILL]
    assert resumed.retrieved == plugin.retrieved == ["9 * 8 = 72 right"] * 2 + ["3 + 4 = 7 again"] * 2


# -- the loss term's plumbing -----------------------------------------------------------------------------------------


class LossStub:
    """A loss context: the micro-batch's policy log-probs, and a teacher that scores each context by a table."""

    def __init__(self, rollout, policy_logps, loss_mask, teacher_rows):
        self.rollout, self.policy_logps, self.loss_mask = rollout, policy_logps, loss_mask
        self.teacher_rows, self.scored, self.acted_on = teacher_rows, [], None
        self.sampling_temperature, self.training, self.step = 1.0, True, 1

    def score(self, contexts, completion_ids, *, model, temperature, positions=None, **options):
        self.scored.append((list(contexts), model, temperature))
        rows = [torch.tensor(self.teacher_rows[c]) for c in contexts]
        logps = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True)
        mask = torch.nn.utils.rnn.pad_sequence([torch.ones(len(r)) for r in rows], batch_first=True)
        return Scores(logprobs=logps, mask=mask)

    def acted(self, n, of, hint=None):
        self.acted_on = (n, of)


def test_the_loss_term_distils_the_rows_with_a_skill_toward_the_teacher_shown_it():
    rollout = stub(["p", "p", "r", "r"], ["a", "b", "c", "d"], [0.0] * 4)
    rollout.completion_ids = [[5, 6], [5], [5, 6], [5, 6]]
    rollout.columns[SKILL] = ["S", "S", None, None]
    policy = torch.tensor([[-1.0, -2.0], [-0.5, 0.0], [-1.0, -1.0], [-1.0, -1.0]], requires_grad=True)
    mask = torch.tensor([[1, 1], [1, 0], [1, 1], [1, 1]])
    ctx = LossStub(rollout, policy, mask, {"S\n\np": [-0.5, -3.0]})
    term = make_plugin("skillsd").loss_term(ctx)
    # Only the rows with a skill, scored by the synced copy after the skill then the prompt; the student's
    # log-probs are the loss's own.
    assert ctx.acted_on == (2, 4)
    assert ctx.scored == [(["S\n\np", "S\n\np"], "skillsd", 1.0)]
    gaps = [-1.0 + 0.5, -2.0 + 3.0, -0.5 + 0.5]
    assert term.item() == pytest.approx(sum(gaps) / 3)
    term.backward()
    assert torch.allclose(policy.grad, torch.tensor([[-0.5 / 3, 1.0 / 3], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]))


def test_without_a_stored_skill_the_loss_term_adds_nothing():
    rollout = stub(["p", "p"], ["a", "b"], [0.0, 0.0])
    rollout.columns[SKILL] = [None, None]
    ctx = LossStub(rollout, torch.zeros(2, 2), torch.ones(2, 2), {})
    assert make_plugin("skillsd").loss_term(ctx) is None
    assert ctx.acted_on == (0, 2) and ctx.scored == []

