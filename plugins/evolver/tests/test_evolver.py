"""EvolveR's lifecycle: the score, the merge of a repeated principle, the prune, the retrieved prompt, on hand-built
records; the conformance suite; each training step's update against the rows shown each principle; the repository
across a resume (a resumed run retrieves the same principles)."""

from types import SimpleNamespace

import pytest
import torch

from stackrl import Generation

from stackrl.blocks.experience import Experience, ExperienceSettings
from stackrl.testing.benchmark import one_thread
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import StopAt, make_plugin, train_steps
from stackrl_evolver.principles import Principles, score
from stackrl_evolver.retrieval import retrieved, with_principles


@pytest.fixture(autouse=True)
def _one_thread():
    with one_thread():
        yield


class TestConformance(PluginConformance):
    plugin_name = "evolver"
    refused_settings = [
        ({"top_k": 0}, "must be at least 1"),
        ({"merge_threshold": 0.0}, r"must lie in \(0, 1\]"),
        ({"prune_threshold": 1.0}, r"must lie in \[0, 1\)"),
        ({"prune_every": -1}, "must be 0 \\(never\\) or more"),
        ({"min_similarity": -0.1}, "must be a number of 0 or more"),
        ({"template": "{prompt}"}, "must contain {principles}"),
        ({"experience": ExperienceSettings(indexed="prompt")}, "must be artefact"),
        ({"metric": "nonsense"}, "must be a built-in outcome reward"),
        ({"principle_from": "judge"}, "must be one of completion, policy"),
        ({"principle_from": "policy", "summary_template": "{question}"}, "must contain {completion}"),
        ({"summary_tokens": 0}, "must be at least 1"),
    ]


def principle(text: str, key: str = "") -> Experience:
    return Experience(prompt_ids=[1], completion_ids=[2], artefact=text, key=key)


SETTINGS = ExperienceSettings(capacity=8, eviction="lowest_utility", indexed="artefact")
SUM = "3 + 4 = 7\n7 * 2 = 14\nThe answer is 14."
OTHER = "9 - 5 = 4\n4 + 8 = 12\nThe answer is 12."


def test_the_score_is_the_laplace_smoothed_success_rate():
    assert score(0, 0) == 0.5
    assert score(3, 4) == pytest.approx(4 / 6)
    assert score(0, 4) == pytest.approx(1 / 6)
    assert score(4, 4) == pytest.approx(5 / 6)


def test_a_use_counts_once_and_a_success_once_more():
    library = Principles(SETTINGS, "evolver", 0.85)
    library.distill([principle(SUM, "a")])
    library.credit("a", True)
    library.credit("a", False)
    library.credit("a", False)
    assert library.counts["a"] == [3, 1]
    assert library.library.get("a").utility == pytest.approx(2 / 5)
    library.credit("gone", True)  # pruned since it was shown: nothing to credit
    assert "gone" not in library.counts


def test_a_repeated_success_merges_into_its_principle_and_a_new_one_is_kept_unused():
    library = Principles(SETTINGS, "evolver", 0.85)
    assert library.distill([principle(SUM, "a")]) == (0, 1)
    assert library.counts == {"a": [0, 0]} and library.score("a") == 0.5
    # The same text twice in one step counts once; a text close to a kept one (one number apart, ROUGE-L 0.9)
    # merges into it; a text far from it is a new principle.
    near = SUM.replace("The answer is 14.", "The answer is 15.")
    merged, created = library.distill([principle(SUM), principle(SUM), principle(near), principle(OTHER, "b")])
    assert (merged, created) == (1, 1)
    assert library.counts == {"a": [1, 1], "b": [0, 0]}
    assert [r.artefact for r in library.library] == [SUM, OTHER]


def test_prune_removes_only_the_principles_scored_below_the_threshold():
    library = Principles(SETTINGS, "evolver", 0.85)
    library.distill([principle(SUM, "a"), principle(OTHER, "b")])
    for ok in (False, False, False, True):  # (1 + 1) / (4 + 2) = 0.333
        library.credit("a", ok)
    for ok in (False, False, False, False):  # 1 / 6 = 0.167
        library.credit("b", ok)
    assert library.prune(0.3) == ["b"]
    assert [r.key for r in library.library] == ["a"] and list(library.counts) == ["a"]
    assert library.prune(0.34) == ["a"]


def test_a_question_retrieves_its_closest_principles_once_per_group_and_above_the_floor():
    library = Principles(SETTINGS, "evolver", 0.85)
    library.distill([principle(SUM, "a"), principle(OTHER, "b")])
    prompts = ["What is (3 + 4) * 2?"] * 2 + ["What is (9 - 5) + 8?"] * 2
    shown = retrieved(library, prompts, 1, 2)
    assert [[p.key for p in found] for found in shown] == [["a"], ["a"], ["b"], ["b"]]
    assert [[p.key for p in found] for found in retrieved(library, prompts[:2], 2, 2)] == [["a", "b"]] * 2
    assert retrieved(library, prompts[:2], 2, 2, floor=0.35) == [[library.library.get("a")]] * 2
    assert with_principles(prompts[0], shown[0], "{principles}\n\n{prompt}", "\n\n") == SUM + "\n\n" + prompts[0]
    assert with_principles(prompts[0], [], "{principles}\n\n{prompt}", "\n\n") == prompts[0]


def test_a_full_repository_evicts_its_lowest_score():
    library = Principles(ExperienceSettings(capacity=2, eviction="lowest_utility", indexed="artefact"), "evolver",
                         0.85)
    library.distill([principle(SUM, "a"), principle(OTHER, "b")])
    library.credit("a", False)
    library.distill([principle("1 + 1 = 2\nThe answer is 2.", "c")])
    assert sorted(library.counts) == ["b", "c"]


ARITH = {"model": {"name_or_path": "stackrl/arith-tiny"}, "data": {"source": "arithmetic", "size": 8, "seed": 0}}
QUICK = {"per_device_train_batch_size": 8, "num_generations": 4, "max_completion_length": 40}


def test_each_step_credits_every_principle_with_the_outcomes_of_the_rows_shown_it(make_config):
    config = make_config(["evolver"], trainer={**QUICK, "max_steps": 3}, evolver={"prune_every": 0}, **ARITH)
    seen = []
    plugin = {}

    def monitor(hook, name, kwargs, result):
        ctx = kwargs.get("ctx")
        if hook == "transform_prompts" and ctx.training:
            evolver = plugin["evolver"]
            texts = {r.key: r.artefact for r in evolver.principles.library}
            seen.append({"shown": [list(k) for k in evolver.pending], "trained": list(result), "texts": texts,
                         "before": {k: list(v) for k, v in evolver.principles.counts.items()}})
        if hook == "post_step":
            rollout = ctx.rollout
            seen[-1]["ok"] = [f"The answer is {a}." in t for t, a in zip(rollout.completions, rollout.columns["answer"])]
            seen[-1]["after"] = {k: list(v) for k, v in plugin["evolver"].principles.counts.items()}

    from stackrl.run import build_trainer

    trainer = build_trainer(config, monitor=monitor)
    plugin["evolver"] = trainer.plugins.plugins["evolver"]
    trainer.train()
    credited = 0
    for step in seen:
        for key, (uses, successes) in step["before"].items():
            rows = [ok for keys, ok in zip(step["shown"], step["ok"]) if key in keys]
            du, ds = step["after"][key][0] - uses, step["after"][key][1] - successes
            # A merge adds a use and a success alike: what is left of the uses over the successes is the failures.
            assert du - ds == rows.count(False), (key, step)
            assert ds >= rows.count(True), (key, step)
            credited += len(rows)
        for keys, prompt in zip(step["shown"], step["trained"]):
            assert all(prompt.startswith(step["texts"][k]) for k in keys)
    assert credited, "no principle was shown: the test is void"


def test_a_resumed_run_keeps_the_repository_and_retrieves_the_same_principles(make_config, tmp_path):
    trainer = {**QUICK, "per_device_train_batch_size": 4, "num_generations": 2, "max_steps": 4,
               "save_strategy": "steps", "save_steps": 2}
    sections = {"evolver": {"prune_every": 0}, **ARITH}
    straight = train_steps(make_config(["evolver"], trainer=trainer, output_dir=str(tmp_path / "straight"),
                                       **sections))
    config = make_config(["evolver"], trainer=trainer, output_dir=str(tmp_path / "resumed"), **sections)
    train_steps(config, callbacks=[StopAt(2)])
    resumed = train_steps(config, resume=True)
    a, b = (run.plugins.plugins["evolver"] for run in (straight, resumed))
    assert len(a.principles) > 0, "no principle was distilled: the test is void"
    assert [(r.key, r.artefact) for r in a.principles.library] == [(r.key, r.artefact) for r in b.principles.library]
    assert a.principles.counts == b.principles.counts
    questions = list(straight.train_dataset["prompt"])
    assert [[p.key for p in found] for found in retrieved(a.principles, questions, 3, 1)] == \
        [[p.key for p in found] for found in retrieved(b.principles, questions, 3, 1)]
    for name, p in straight.model.named_parameters():
        assert torch.equal(p, dict(resumed.model.named_parameters())[name]), name


def test_make_plugin_builds_an_empty_repository():
    plugin = make_plugin("evolver", top_k=2)
    assert len(plugin.principles) == 0 and plugin.config.top_k == 2


def test_a_chat_prompt_gets_the_principles_in_its_last_user_message():
    library = Principles(SETTINGS, "evolver", 0.85)
    library.distill([principle(SUM, "a")])
    chat = [{"role": "system", "content": "Answer."}, {"role": "user", "content": "What is (3 + 4) * 2?"}]
    shown = retrieved(library, [chat], 1, 1)
    assert [p.key for p in shown[0]] == ["a"]
    assert with_principles(chat, shown[0], "{principles}\n\n{prompt}", "\n\n") == [
        chat[0], {"role": "user", "content": SUM + "\n\nWhat is (3 + 4) * 2?"}]
    assert chat[1]["content"] == "What is (3 + 4) * 2?"  # the dataset's prompt is left as it was


class Writer:
    """A post-step context whose policy writes scripted principles and records what it was asked."""

    def __init__(self, replies):
        self.replies, self.asked, self.step, self.logged = list(replies), [], 3, {}

    def generate(self, prompts, **options):
        self.asked.append((list(prompts), options))
        return [Generation(prompt_ids=[], completion_ids=[], text=self.replies.pop(0)) for _ in prompts]

    def log(self, name, value):
        self.logged[name] = value


def test_with_principle_from_policy_the_principle_is_what_the_policy_writes_of_a_success():
    plugin = make_plugin("evolver", principle_from="policy", summary_tokens=16)
    rollout = SimpleNamespace(prompts=["What is 2 + 3?", "What is 2 + 3?", "What is 9 - 5?"],
                              completions=["2 + 3 = 5\nThe answer is 5.", "The answer is 6.", "The answer is 4."],
                              prompt_ids=[[1], [1], [2]], completion_ids=[[3], [4], [5]], rewards={}, group_size=1)
    ctx = Writer([" Add the two numbers first. ", ""])
    plugin.lifecycle([[], [], []], [True, False, True], rollout, ctx)
    (prompts, options), = ctx.asked
    assert len(prompts) == 2 and "Question: What is 2 + 3?" in prompts[0] and "The answer is 5." in prompts[0]
    assert options == {"model": "policy", "do_sample": False, "max_new_tokens": 16}
    # The second success's reply is empty: no principle of it.
    assert [r.artefact for r in plugin.principles.library] == ["Add the two numbers first."]
    assert ctx.logged["summarised"] == 0.5
