"""TriPlay-RL: each role's reward computed by hand from its partner's outcome on scripted rows (the defender's
replies and the evaluator's checks scripted), the success pool's diversity penalty, the phase schedule, the state
through a checkpoint, and a run on the built-in posing model drawing the three roles in turn."""

from types import SimpleNamespace

import pytest
import torch

from stackrl import Generation, RewardContext, Rollout
from stackrl.blocks.selfinstruct import rouge_l
from stackrl.pool import CATEGORY_COLUMN
from stackrl.run import build_trainer
from stackrl.tasks import judge_prompt
from stackrl.tasks.arithmetic import read_problem
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import DrawnGroups
from stackrl_triplay import TriPlay, TriPlayConfig
from stackrl_triplay.grades import Grade, attack_reward, attacker_reward, evaluator_reward, grade
from stackrl_triplay.plugin import ANSWER_COLUMN, ATTACK, DEFEND, EVALUATE, RIGHT_COLUMN


class TestConformance(PluginConformance):
    plugin_name = "triplay"
    refused_settings = [
        ({"phase_steps": 0}, "at least 1"),
        ({"defender_samples": 0}, "at least 1"),
        ({"evaluator_rows": -1}, "0 or more"),
        ({"attack_rewards": {"unsafe": 1.0, "useful": 0.0}}, "exactly the grades"),
        ({"diversity_weight": -0.5}, "0 or more"),
        ({"topic": " "}, "is empty"),
    ]


def test_the_grades_and_the_role_rewards_by_hand():
    assert grade(None, True) is Grade.refusal and grade(None, None) is Grade.refusal  # no answer: a refusal
    assert grade("5", True) is Grade.useful and grade("5", False) is Grade.unsafe and grade("5", None) is None
    values = {"unsafe": 1.0, "refusal": 0.5, "useful": 0.0}
    assert attack_reward([Grade.unsafe, Grade.refusal, None, Grade.useful], values) == pytest.approx(0.5)
    assert attack_reward([None, None], values) is None
    assert attacker_reward(0.75, True, 0.5, 0.5, 0.4) == pytest.approx(0.75 + 0.5 - 0.2)
    assert attacker_reward(None, False, 0.0, 0.5, 0.4) == 0.0
    assert evaluator_reward(True, True) == evaluator_reward(False, False) == 1.0
    assert evaluator_reward(True, False) == evaluator_reward(None, True) == 0.0


# -- scripted rows: the defender's replies and the evaluator's checks ------------------------------------------------

ATTACKS = [" What is 2 + 3?\n5. What is 9 - 9?\n", " What is 4 + 4?\n", " Draw a cat.\n", " What is 6 + 1?\n"]
REPLIES = {  # the defender's two replies to each posed question
    "What is 2 + 3?\n": ["2 + 3 = 5\nThe answer is 5.", "2 + 3 = 5\nThe answer is 5."],
    "What is 4 + 4?\n": ["4 + 4 = 9\nThe answer is 9.", "4 + 4 is hard."],
    "What is 6 + 1?\n": ["6 + 1 = 8\nThe answer is 8.", "6 + 1 = 8\nThe answer is 8."],
}
VERDICTS = {  # the evaluator's check of each reply (it is fooled by 6 + 1 = 8)
    "2 + 3 = 5\nThe answer is 5.": "Verdict: correct",
    "4 + 4 = 9\nThe answer is 9.": "Verdict: wrong",
    "6 + 1 = 8\nThe answer is 8.": "Verdict: correct",
    "4 + 4 = 8\nThe answer is 8.": "Verdict: correct",
    "4 + 4 = 7\nThe answer is 7.": "no idea",
}
DEFENCES = ["4 + 4 = 8\nThe answer is 8.", "4 + 4 = 9\nThe answer is 9.", "I cannot say.", "4 + 4 = 7\nThe answer is 7."]
CHECKS = ["Verdict: correct", "Verdict: correct", "Verdict: maybe"]


def _ctx(attacks=ATTACKS, training=True, rows=("attack", "defend", "evaluate")):
    asked = []

    def generate(prompts, model="policy", caller="", **sampling):
        asked.extend(prompts)
        replies = {q: iter(r) for q, r in REPLIES.items()}
        out = []
        for p in prompts:
            if p.endswith("\nCheck:\n"):
                out.append(VERDICTS[p[p.index("?\n") + 2:-len("\nCheck:\n")]])
            else:
                out.append(next(replies[p]))
        return [Generation([], [], text) for text in out]

    prompts, texts, columns = [], [], {CATEGORY_COLUMN: [], ANSWER_COLUMN: [], RIGHT_COLUMN: []}
    parts = {
        "attack": (["topic"] * 4, list(attacks), [ATTACK] * 4, [None] * 4, [None] * 4),
        "defend": (["What is 4 + 4?\n"] * 4, DEFENCES, [DEFEND] * 4, ["8"] * 4, [None] * 4),
        "evaluate": (["judge"] * 4, CHECKS + ["Verdict: wrong"], [EVALUATE] * 4, [None] * 4,
                     [True, False, True, False]),
    }
    for part in rows:
        p, t, c, a, r = parts[part]
        prompts += p
        texts += t
        columns[CATEGORY_COLUMN] += c
        columns[ANSWER_COLUMN] += a
        columns[RIGHT_COLUMN] += r
    n = len(prompts)
    rollout = Rollout(prompts, texts, [[1]] * n, [[2]] * n, columns, group_size=4)
    logged = {}
    ctx = RewardContext(step=0, tokenizer=None, policy=SimpleNamespace(generate=generate),
                        _log=lambda key, value: logged.__setitem__(key, value), _plugin="triplay", rollout=rollout,
                        training=training)
    return ctx, asked, logged


def _plugin(**settings):
    plugin = TriPlay(TriPlayConfig(answer_extractor="answer_is", math_verify=False, defender_samples=2, **settings))
    plugin.name = "triplay"
    plugin.prompts = _Prompts()
    return plugin


class _Prompts:
    """The run's format (stackrl.blocks.selfplay.QuestionPrompts): the question and its newline."""

    def text(self, question):
        return question + "\n"

    __call__ = text


def test_each_role_is_rewarded_by_its_partners_outcome():
    plugin = _plugin()
    ctx, asked, logged = _ctx()
    rewards = plugin.reward(ctx)
    # Attacker (attack term + semantic 0.5, empty success pool): 2 + 3 both replies right, useful: 0 + 0.5;
    # 4 + 4 one reply judged wrong (unsafe, 1) and one without an answer (refusal, 0.5): 0.75 + 0.5; "Draw a cat"
    # is no task question: 0, and is not asked; 6 + 1 both wrong but the evaluator judged them right: 0 + 0.5.
    assert rewards[:4] == pytest.approx([0.5, 1.25, 0.0, 0.5])
    # Defender (4 + 4, the evaluator grading): 8 judged correct (useful 1), 9 judged wrong (unsafe 0), no answer
    # (refusal 0.25), 7 got no verdict (not graded).
    assert rewards[4:8] == [1.0, 0.0, 0.25, None]
    # Evaluator: its verdict against the verifier's label: correct on a right reply 1, correct on a wrong one 0,
    # no verdict 0, wrong on a wrong one 1.
    assert rewards[8:] == [1.0, 0.0, 0.0, 1.0]
    solves = [p for p in asked if not p.endswith("Check:\n")]
    assert solves == ["What is 2 + 3?\n"] * 2 + ["What is 4 + 4?\n"] * 2 + ["What is 6 + 1?\n"] * 2
    # The posed task questions go to the defender with the verifier's answer; the one an unsafe grade got through
    # joins the success pool after the step; the defender's wrong then right answered replies go to the evaluator.
    assert plugin.pending_questions == [("What is 2 + 3?", "5"), ("What is 4 + 4?", "8"), ("What is 6 + 1?", "7")]
    assert plugin.pending_successes == ["What is 4 + 4?"]
    assert plugin.pending_checks == [(judge_prompt("What is 4 + 4?\n", DEFENCES[1]), False),
                                     (judge_prompt("What is 4 + 4?\n", DEFENCES[0]), True)]
    assert logged["triplay/attack/success"] == pytest.approx(1 / 3)
    # The evaluator, grading, agreed with the verifier on 3 of the attack's 5 answered replies (2 + 3 twice and
    # 4 + 4 = 9; not 6 + 1 = 8 twice) and on 2 of the defence's 3 (8 and 9; 7 got no verdict).
    assert logged["triplay/attack/grader_agreement"] == pytest.approx(3 / 5)
    assert logged["triplay/defend/grader_agreement"] == pytest.approx(2 / 3)


def test_the_verifier_grades_instead_of_the_evaluator_when_asked():
    rewards = _plugin(grader="verifier").reward(_ctx(rows=("attack", "defend"))[0])
    # 6 + 1 = 8 twice is wrong: unsafe, 1 + 0.5; 4 + 4 = 7 is now graded, unsafe 0.
    assert rewards[:4] == pytest.approx([0.5, 1.25, 0.0, 1.5])
    assert rewards[4:] == [1.0, 0.0, 0.25, 0.0]


def test_a_question_like_a_successful_attack_pays_the_diversity_penalty():
    plugin = _plugin(diversity_weight=0.4)
    plugin.load_state_dict({"successes": ["What is 4 + 4?"]})
    rewards = plugin.reward(_ctx(rows=("attack",))[0])
    near = rouge_l("What is 2 + 3?", "What is 4 + 4?")  # "what is" shared: 2 * 2 / (4 + 4)
    assert near == pytest.approx(0.5)
    assert rewards == pytest.approx([0.5 - 0.4 * near, 1.25 - 0.4, -0.4 * rouge_l("Draw a cat.", "What is 4 + 4?"),
                                     0.5 - 0.4 * rouge_l("What is 6 + 1?", "What is 4 + 4?")])


def test_evaluation_scores_but_sends_nothing_to_the_pool():
    plugin = _plugin()
    rewards = plugin.reward(_ctx(training=False)[0])
    assert rewards[:4] == pytest.approx([0.5, 1.25, 0.0, 0.5])
    assert plugin.pending_questions == plugin.pending_checks == plugin.pending_successes == []


def test_the_phases_take_turns_attacker_defender_evaluator():
    plugin = _plugin(phase_steps=2)
    assert [plugin.phase(s) for s in range(8)] == [ATTACK, ATTACK, DEFEND, DEFEND, EVALUATE, EVALUATE, ATTACK, ATTACK]


def test_the_success_pool_survives_a_checkpoint(tmp_path):
    plugin = _plugin()
    plugin.reward(_ctx(rows=("attack",))[0])
    plugin.post_step(SimpleNamespace(pool=_FakePool(), step=1, log=lambda *a: None))
    assert plugin.successes == ["What is 4 + 4?"]
    torch.save(plugin.state_dict(), tmp_path / "state.pt")
    resumed = _plugin()
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    assert resumed.successes == ["What is 4 + 4?"] and resumed._index.closest("What is 4 + 4?") == 1.0


def test_the_draw_is_left_alone_once_another_plugin_retired_the_topic_row():
    plugin, pool = _plugin(), _FakePool()
    plugin.post_step(SimpleNamespace(pool=pool, step=0, log=lambda *a: None))
    assert pool.category_weights == {ATTACK: 1.0}
    retired = _FakePool()
    retired.active_rows = lambda: []  # a switch of data set retired every row
    plugin.post_step(SimpleNamespace(pool=retired, step=0, log=lambda *a: None))
    assert retired.category_weights is None
    pool.stats = lambda row: SimpleNamespace(category=ATTACK, retired=False, weight=0.0)  # another plugin muted it
    plugin.post_step(SimpleNamespace(pool=pool, step=1, log=lambda *a: None))
    assert pool.category_weights is None  # triplay's own weights are let go


class _FakePool:
    """Just enough of the pool for a post_step: the topic row, rows added as given."""

    def __init__(self):
        self.rows = [{"prompt": "topic", CATEGORY_COLUMN: ATTACK}]
        self.category_weights = None
        self.last_batch = [0]

    def __len__(self):
        return len(self.rows)

    def stats(self, row):
        return SimpleNamespace(category=self.rows[row][CATEGORY_COLUMN], retired=False, weight=1.0)

    def row(self, row):
        return self.rows[row]

    def active_rows(self):
        return list(range(len(self.rows)))

    def retire(self, rows):
        assert rows == []

    def format_row(self, columns):
        return {"prompt": columns["question"], **columns}

    def add_rows(self, rows):
        self.rows += rows
        return list(range(len(self.rows) - len(rows), len(self.rows)))

    def set_category_weights(self, weights):
        self.category_weights = weights


# -- a run: the three roles drawn in turn (the tiny model, its posed questions scripted: the plumbing is the same) --

def test_a_run_draws_the_attacker_then_the_defender_then_the_evaluator(make_config, monkeypatch):
    import stackrl_triplay.plugin as module

    monkeypatch.setattr(module, "posed_question", lambda text, numbered=True: f"What is {len(text) % 7 + 2} + 3?")
    config = make_config(
        ["triplay"],
        model={"name_or_path": "stackrl/arith-tiny"},
        data={"label_free": True, "size": 8},
        rewards={"exact_match": None},
        trainer={"per_device_train_batch_size": 4, "num_generations": 4, "max_steps": 3, "seed": 0,
                 "max_completion_length": 32},
        triplay={"answer_extractor": "answer_is", "math_verify": False, "defender_samples": 1,
                 "grader": "verifier", "defender_sampling": {"max_new_tokens": 8}},
    )
    drawn = DrawnGroups("triplay")
    run = build_trainer(config, monitor=drawn)
    run.train()
    pool = run.pool
    by_step = {}
    for group in drawn.groups:
        by_step.setdefault(group.step, []).append(pool.stats(group.row).category)
    assert by_step == {1: [ATTACK], 2: [DEFEND], 3: [EVALUATE]}
    defend = [r for r in range(len(pool)) if pool.stats(r).category == DEFEND]
    assert all(pool.stats(r).label_free and pool.row(r)["question"].endswith("?\n") for r in defend)
    assert all(read_problem(pool.row(r)["question"])["answer"] == pool.row(r)[ANSWER_COLUMN] for r in defend)
    evaluate = [r for r in range(len(pool)) if pool.stats(r).category == EVALUATE]
    assert evaluate and all(pool.row(r)["prompt"].endswith("\nCheck:\n") for r in evaluate)
    # Each row of a role is drawn once, then retires; the topic row stays.
    drawn_rows = [g.row for g in drawn.groups if pool.stats(g.row).category != ATTACK]
    assert all(pool.stats(r).retired for r in drawn_rows)
