"""UCOB's rules on hand-built inputs: the view comparison, the utility update, retrieval, the loss, the state."""

import math
from types import SimpleNamespace

import pytest
import torch

from stackrl.blocks.experience import Experience
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl_ucob.distillation import gated_topk_kl
from stackrl_ucob.plugin import OTHER_VIEW, SKILL_KEY, VIEW, WEIGHT
from stackrl_ucob.skills import SkillMemory, relative_score, retrieval_score, updated_utility
from stackrl_ucob.views import PLAIN, SKILL, compare_views


class TestConformance(PluginConformance):
    plugin_name = "ucob"
    refused_settings = [({"template": "{prompt}"}, "must contain {skill}"),
                        ({"alpha": 1.5}, r"must lie in \[0, 1\], not 1.5"),
                        ({"beta": 0.0}, r"must lie in \(0, 1\], not 0.0"),
                        ({"initial_utility": float("nan")}, "must be a finite number"),
                        ({"tau": 0.0}, "must be positive, not 0.0"),
                        ({"max_pairs": 0}, "must be at least 1, not 0"),
                        ({"gate_beta": -1.0}, "must be positive"),
                        ({"ucb_scale": -0.1}, "must be non-negative"),
                        ({"teacher": "ema"}, "must be one of policy, reference")]


V = [PLAIN, PLAIN, SKILL, SKILL]


def test_the_view_with_the_higher_mean_teaches_either_way():
    # Group 0: the skill view wins (means 1.0 vs 0.0); group 1: the plain view wins (0.75 vs 0.25).
    returns = [0.0, 0.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.0]
    weights, groups = compare_views(returns, V + V, 4, margin=0.05, tau=0.2, weight_max=2.0, max_pairs=2)
    assert [g.teacher for g in groups] == [SKILL, PLAIN]
    # Skill rows of group 0: gap 1.0 -> min(1.0 / 0.2, 2) = 2; plain rows of group 1: gaps 0.75 and 0.25 over the
    # skill view's mean 0.25 -> 2.0 (clipped) and 0.25 / 0.2 = 1.25.
    assert weights == [0.0, 0.0, 2.0, 2.0, 2.0, 1.25, 0.0, 0.0]


def test_within_the_margin_or_with_one_view_nothing_is_distilled_and_max_pairs_holds():
    weights, groups = compare_views([0.5, 0.5, 0.52, 0.52], V, 4, margin=0.05, tau=0.2, weight_max=2.0, max_pairs=2)
    assert weights == [0.0] * 4 and groups[0].teacher is None
    weights, groups = compare_views([1.0, 0.0, 1.0, 0.0], [PLAIN] * 4, 4, margin=0.05, tau=0.2, weight_max=2.0,
                                    max_pairs=2)
    assert weights == [0.0] * 4 and groups[0].skill_mean is None
    # Three skill rows win; only the best max_pairs=1 is distilled, weighted by its own gap (0.9 - 0.1) / 0.5.
    weights, _ = compare_views([0.1, 0.9, 0.6, 0.7], [PLAIN, SKILL, SKILL, SKILL], 4, margin=0.05, tau=0.5,
                               weight_max=5.0, max_pairs=1)
    assert weights == [0.0, pytest.approx(1.6), 0.0, 0.0]


def test_utility_moves_with_the_skill_views_gap_over_the_plain_view():
    assert relative_score(1.0, 0.0) == 1.0 and relative_score(0.0, 1.0) == 0.0
    assert relative_score(0.75, 0.25) == 0.75 and relative_score(0.3, 0.3) == 0.5
    assert updated_utility(0.5, 0.0, 0.2) == pytest.approx(0.4)
    assert updated_utility(0.0, 0.75, 0.2) == pytest.approx(0.15)


def test_retrieval_score_weighs_similarity_utility_and_the_exploration_bonus():
    assert retrieval_score(0.8, 0.5, 1, 1, alpha=0.1, ucb_scale=0.1) == pytest.approx(0.08 + 0.45)
    bonus = 0.1 * math.sqrt(math.log(8) / 2)
    assert retrieval_score(1.0, 0.2, 2, 8, alpha=0.1, ucb_scale=0.1) == pytest.approx(0.1 + 0.9 * (0.2 + bonus))


def memory_with(records, **settings):
    from stackrl.blocks.experience import ExperienceSettings

    memory = SkillMemory(ExperienceSettings(**settings), "ucob")
    for key, prompt, utility in records:
        memory.add(Experience(prompt_ids=[len(memory)], completion_ids=[1], prompt=prompt, completion=key,
                              utility=utility, key=key))
    return memory


def test_retrieval_prefers_a_useful_record_over_a_more_similar_one_and_skips_the_dissimilar():
    memory = memory_with([("same", "what is 6 + 6 + 9", 0.1), ("close", "what is 6 + 6 + 8", 0.6),
                          ("far", "how many apples", 1.0)])
    found, similarity = memory.retrieve("what is 6 + 6 + 9", threshold=0.4, top_m=10, alpha=0.1, ucb_scale=0.0)
    assert found.key == "close" and similarity < 1.0
    # All similarity: the most similar; nothing above the threshold: none.
    found, _ = memory.retrieve("what is 6 + 6 + 9", threshold=0.4, top_m=10, alpha=1.0, ucb_scale=0.0)
    assert found.key == "same"
    assert memory.retrieve("pears and plums", threshold=0.4, top_m=10, alpha=0.1, ucb_scale=0.0) is None


def test_credit_moves_the_utility_and_counts_the_use():
    memory = memory_with([("a", "what is 1 + 2", 0.5)])
    memory.credit("a", 0.0, 0.2)
    assert memory.library.get("a").utility == pytest.approx(0.4) and memory.uses["a"] == 2
    memory.credit("gone", 1.0, 0.2)  # an evicted record's use is ignored
    assert set(memory.uses) == {"a"}


def test_loss_is_the_gated_weighted_topk_forward_kl():
    student = torch.log_softmax(torch.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, 0.0]]), -1).requires_grad_()
    teacher = torch.log_softmax(torch.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 3.0]]), -1)
    ids = teacher.topk(2, -1).indices
    top = teacher.gather(-1, ids)
    s_tok, t_tok = torch.tensor([-1.0, -2.0]), torch.tensor([-0.5, -2.5])
    loss = gated_topk_kl(student, top, ids, s_tok, t_tok, torch.tensor([2.0, 1.0]), gate_beta=5.0)
    # By hand: each position's KL(teacher_k || student_k), both renormalised over the teacher's top 2.
    expected = 0.0
    for p, w, gate in ((0, 2.0, torch.sigmoid(torch.tensor(2.5))), (1, 1.0, torch.sigmoid(torch.tensor(-2.5)))):
        t = torch.softmax(top[p], -1)
        s = torch.softmax(student[p].gather(-1, ids[p]), -1)
        expected += w * gate * (t * (t.log() - s.log())).sum()
    assert loss.item() == pytest.approx(expected.item() / 2, rel=1e-5)
    loss.backward()  # the student gets a gradient, toward the teacher's top token at position 0
    assert student.grad[0, 0] < 0


class Sampling:
    """The sample stage's context: the policy's generation records the contexts it was asked."""

    def __init__(self, group_size):
        self.group_size, self.training, self.asked, self.acted_on = group_size, True, None, None

    def generate(self, contexts):
        self.asked = list(contexts)
        return [SimpleNamespace(completion_ids=[7], prompt_ids=[i]) for i in range(len(contexts))]

    def log(self, name, value):
        pass

    def acted(self, n, *, of, hint=None):
        self.acted_on = (n, of)


def test_a_group_with_a_skill_is_split_half_plain_half_skilled_and_one_without_stays_plain():
    plugin = make_plugin("ucob", alpha=0.1, ucb_scale=0.0)
    plugin.memory = memory_with([("6 + 6 = 12\n12 + 9 = 21\nThe answer is 21.", "What is (6 + 6) + 9?", 0.5)])
    ctx = Sampling(4)
    samples = plugin.generate_rollout(["What is (6 + 6) + 9?\n"] * 4 + ["Name a colour.\n"] * 4, ctx)
    skill_view = "6 + 6 = 12\n12 + 9 = 21\nThe answer is 21.\n\nWhat is (6 + 6) + 9?\n"
    assert ctx.asked[:4] == ["What is (6 + 6) + 9?\n"] * 2 + [skill_view] * 2
    assert ctx.asked[4:] == ["Name a colour.\n"] * 4
    assert samples.columns[VIEW] == [PLAIN, PLAIN, SKILL, SKILL] + [PLAIN] * 4
    assert samples.columns[OTHER_VIEW][:4] == [skill_view] * 2 + ["What is (6 + 6) + 9?\n"] * 2
    assert samples.columns[OTHER_VIEW][4:] == [None] * 4 and samples.columns[SKILL_KEY][4:] == [None] * 4
    assert ctx.acted_on == (1, 2)


def test_the_advantage_stage_credits_the_used_skill_and_writes_the_best_success():
    plugin = make_plugin("ucob", beta=0.5)
    plugin.memory = memory_with([("k", "What is 1 + 2?", 0.5)])
    rollout = SimpleNamespace(
        columns={VIEW: V + [PLAIN] * 4, SKILL_KEY: ["k"] * 4 + [None] * 4, OTHER_VIEW: ["s"] * 4 + [None] * 4},
        group_size=4,
        prompts=["What is 1 + 2?\n"] * 4 + ["What is 2 + 2?\n"] * 4, prompt_ids=[[1]] * 4 + [[2]] * 4,
        completion_ids=[[5]] * 8, completions=["c%d" % i for i in range(8)], rewards={})
    ctx = SimpleNamespace(rollout=rollout, training=True, step=3, total_reward=torch.tensor(
        [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]), log=lambda *a: None)
    assert plugin.reshape_advantages(torch.zeros(8), ctx) is None
    assert rollout.columns[WEIGHT] == [2.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]  # the plain view taught
    # The skill misled: its utility 0.5 -> 0.5 * 0.5 + 0.5 * 0.0. Both groups' best successes were written.
    assert plugin.memory.library.get("k").utility == pytest.approx(0.25)
    written = [r for r in plugin.memory.library if r.key != "k"]
    assert [(r.completion, r.prompt_ids, r.utility) for r in written] == [("c0", [1], 0.0), ("c5", [2], 0.0)]


def test_the_loss_scores_the_winning_view_as_teacher_and_the_other_view_as_student():
    plugin = make_plugin("ucob", top_k=2)
    calls = []

    def score(contexts, completions, *, model="policy", grad=False, positions=None, temperature=1.0, topk=None,
              full_vocab=False):
        calls.append((list(contexts), grad, topk))
        n = sum(len(c) for c in completions)
        logits = torch.zeros(n, 4, requires_grad=grad)
        vocab = torch.log_softmax(logits, -1)
        return SimpleNamespace(vocab_logprobs=vocab, topk_logprobs=vocab[:, :2], topk_ids=torch.tensor([[0, 1]] * n),
                               logprobs=torch.full((len(completions), 2), -1.0), mask=torch.tensor([[1, 1]] * n))

    rollout = SimpleNamespace(columns={WEIGHT: [0.0, 2.0], OTHER_VIEW: ["plain ctx", "plain ctx"]})
    selected = SimpleNamespace(prompt_ids=[[9, 9]], completion_ids=[[3]], columns={OTHER_VIEW: ["plain ctx"]})
    rollout.select = lambda rows: selected if rows == [1] else None
    ctx = SimpleNamespace(rollout=rollout, training=True, sampling_temperature=1.0, score=score)
    loss = plugin.loss_term(ctx)
    assert calls == [([[9, 9]], False, 2), (["plain ctx"], True, None)]
    assert loss.requires_grad


def test_a_resumed_run_retrieves_the_same_records():
    plugin = make_plugin("ucob", ucb_scale=0.1)
    plugin.memory = memory_with([("a", "What is 1 + 2?", 0.5), ("b", "What is 1 + 3?", 0.7)])
    plugin.memory.credit("a", 1.0, 0.2)
    state = plugin.state_dict()
    resumed = make_plugin("ucob", ucb_scale=0.1)
    resumed.load_state_dict(state)
    query = dict(threshold=0.0, top_m=10, alpha=0.1, ucb_scale=0.1)
    for question in ("What is 1 + 2?", "What is 1 + 3?", "What is 4 + 2?"):
        assert resumed.memory.retrieve(question, **query)[0].key == plugin.memory.retrieve(question, **query)[0].key
    assert resumed.memory.uses == plugin.memory.uses == {"a": 2, "b": 1}


def test_the_memory_survives_a_weights_only_checkpoint_load(tmp_path):
    plugin = make_plugin("ucob")
    plugin.memory = memory_with([("a", "What is 1 + 2?", 0.5), ("b", "What is 1 + 3?", 0.7)])
    plugin.memory.credit("b", 0.0, 0.2)
    torch.save(plugin.state_dict(), tmp_path / "state.pt")
    resumed = make_plugin("ucob")
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    assert [(r.key, r.utility, r.completion) for r in resumed.memory.library] == [
        ("a", 0.5, "a"), ("b", pytest.approx(0.56), "b")]
    assert resumed.memory.uses == {"a": 1, "b": 2}


def run_facts(reference):
    from stackrl.plugin import RunFacts

    return RunFacts(max_steps=2, group_size=4, groups_per_step=2, columns=("question", "answer"),
                    builtin_columns=("question", "answer"), chat=False, reference=reference, source="arithmetic",
                    components=("exact_match",))


def test_a_frozen_teacher_needs_a_reference_model():
    import stackrl

    assert make_plugin("ucob").check_run(run_facts(reference=False)) is None
    assert make_plugin("ucob", teacher="reference").check_run(run_facts(reference=True)) is None
    with pytest.raises(stackrl.ConfigError, match="ucob.teacher"):
        make_plugin("ucob", teacher="reference").check_run(run_facts(reference=False))
