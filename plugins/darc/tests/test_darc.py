"""Tests of the `darc` plugin: the conformance suite, the pseudo-label rule, the corpus, the reward on a scripted
teacher, and a resume that retrieves the same documents."""

from stackrl.testing.conformance import PluginConformance


class TestConformance(PluginConformance):
    plugin_name = "darc"
    plugin_settings = {"darc": {"label_samples": 2, "label_sampling": {"max_new_tokens": 8}}}  # short teacher samples
    refused_settings = [
        ({"label_samples": 0}, "must be at least 1"),
        ({"vote_threshold": 1.5}, r"must lie in \[0, 1\]"),
        ({"documents": 0}, "must be at least 1"),
        ({"teacher_template": "{prompt}"}, "must contain {document}"),
        ({"experience": {"indexed": "title"}}, "must be one of"),
    ]


import pytest

from stackrl import RewardContext, Rollout
from stackrl.answers import group_answers
from stackrl.blocks.experience import ExperienceLibrary, ExperienceSettings
from stackrl.testing.fixtures import make_plugin
from stackrl.testing.scripted import CharTokenizer, ScriptedPolicy
from stackrl_darc.corpus import add_pool_rows, documents_for
from stackrl_darc.labels import Label, agreement_rewards, pseudo_label

Q1, Q2 = "What is (3 + 4) * 2?\n", "What is (12 + 30) - 7?\n"
D1, D2 = "3 + 4 = 7\n7 * 2 = 14\nThe answer is 14.", "12 + 30 = 42\n42 - 7 = 35\nThe answer is 35."


def said(n):
    return f"The answer is {n}."


class FakePool:
    """Rows with a prompt and a solution, as ``ctx.pool.row`` gives them."""

    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def row(self, i):
        return self.rows[i]


# -- the pseudo-label rule -------------------------------------------------------------------------------------------


def test_the_label_is_the_majority_of_all_samples_unanswered_ones_counting_only_in_the_share():
    # 8 samples: 14 three times, 16 twice, three without an answer -> 14, share 3/8 (the authors' use_all)
    label = pseudo_label(group_answers(["14", None, "16", "14", None, "16", "14", None]), threshold=0.3)
    assert label == Label("14", 3 / 8)


def test_no_label_below_the_vote_threshold_for_none_or_without_any_answer():
    assert pseudo_label(group_answers(["14", "16", None, None]), threshold=0.3) == Label(None, 0.25)
    assert pseudo_label(group_answers(["none", "none", "3"]), threshold=0.3).answer is None
    assert pseudo_label(group_answers([None, None]), threshold=0.0) == Label(None, 0.0)


def test_a_tie_goes_to_the_answer_written_first():
    assert pseudo_label(group_answers(["16", "14", "14", "16"]), threshold=0.3) == Label("16", 0.5)


def test_the_solver_earns_one_for_agreeing_with_the_label_and_nothing_is_scored_without_one():
    assert agreement_rewards(["14", "16", None, " 14"], Label("14", 0.5)) == [1.0, 0.0, 0.0, 1.0]
    assert agreement_rewards(["14", "16"], Label(None, 0.25)) == [None, None]


# -- the corpus ------------------------------------------------------------------------------------------------------


def corpus(rows=((Q1, D1), (Q2, D2))):
    library = ExperienceLibrary(ExperienceSettings(indexed="prompt"), "darc")
    pool = FakePool([{"prompt": q, "solution": d} for q, d in rows] + [{"prompt": "What is 5 * 6?\n", "solution": None}])
    added = add_pool_rows(library, pool, range(len(pool)), "solution", CharTokenizer())
    return library, added


def test_each_row_with_a_document_joins_the_corpus_once_and_a_question_finds_its_own_document():
    library, added = corpus()
    assert added == 2 and len(library) == 2 and [r.key for r in library] == ["row:0", "row:1"]
    found = documents_for(library, [Q2, Q1, "Tell me a story."], k=1, min_score=0.0)
    assert found[0] == (D2, 1.0) and found[1] == (D1, 1.0) and found[2] is None
    assert documents_for(library, ["What is (3 + 5) * 2?\n"], k=1, min_score=0.99) == [None]  # a near miss, refused


# -- the reward on a scripted teacher ----------------------------------------------------------------------------------


def _reward(rollout, policy, **settings):
    plugin = make_plugin("darc", label_samples=4, answer_extractor="answer_is", math_verify=False, **settings)
    plugin.library, _ = corpus()
    logged, acted = {}, []
    ctx = RewardContext(step=0, tokenizer=None, policy=policy, _log=logged.__setitem__, _plugin="darc",
                        _acted=lambda plugin, n, m, hint: acted.append((n, m, hint)), rollout=rollout)
    return plugin.reward(ctx), logged, acted, rollout.pseudo_labels.get("darc")


def test_the_teacher_reads_the_document_before_the_question_and_its_majority_labels_the_solver_group():
    rollout = Rollout(prompts=[Q1] * 3 + [Q2] * 3, completions=[said(14), said(16), "no idea", said(35), said(35),
                      said(36)], prompt_ids=[[1]] * 6, completion_ids=[[2]] * 6, group_size=3, columns={})
    policy = ScriptedPolicy({
        f"{D1}\n\n{Q1}": [said(14), said(14), said(16), said(14)],  # 14, 3 of 4
        f"{D2}\n\n{Q2}": [said(35), "?", "?", "?"],  # 35, 1 of 4: below 0.3
    })
    rewards, logged, acted, labels = _reward(rollout, policy)
    assert rewards == [1.0, 0.0, 0.0, None, None, None]
    assert labels == ["14", "14", "14", None, None, None]
    assert acted == [(3, 6, None)]
    assert logged == {"darc/documented": 1.0, "darc/labelled": 0.5, "darc/vote_share": (0.75 + 0.25) / 2,
                      "darc/retrieval_score": 1.0}
    prompts, sampling = policy.asked[0]
    assert prompts == [f"{D1}\n\n{Q1}"] * 4 + [f"{D2}\n\n{Q2}"] * 4 and sampling == {"temperature": 1.0, "top_p": 0.95}


def test_a_question_without_a_document_is_not_scored_and_the_hint_says_why():
    rollout = Rollout(prompts=["Tell me a story."] * 2, completions=[said(1), said(2)], prompt_ids=[[1]] * 2,
                      completion_ids=[[2]] * 2, group_size=2, columns={})
    rewards, logged, acted, _ = _reward(rollout, ScriptedPolicy({}))
    assert rewards == [None, None] and logged["darc/documented"] == 0.0
    assert acted[0][:2] == (0, 2) and "darc.min_score" in acted[0][2]


def test_the_teacher_prompt_keeps_a_chat_prompt_and_puts_the_document_in_its_user_message():
    chat = [{"role": "user", "content": Q1}]
    rollout = Rollout(prompts=[chat] * 2, completions=[said(14), said(15)], prompt_ids=[[1]] * 2,
                      completion_ids=[[2]] * 2, group_size=2, columns={})

    class Chat(ScriptedPolicy):
        def generate(self, prompts, model="policy", caller=None, **sampling):
            self.asked.append((prompts, {"model": model, **sampling}))
            return super().generate([p[-1]["content"] for p in prompts], model, caller)

    policy = Chat({f"{D1}\n\n{Q1}": [said(14)]})
    rewards, _, _, _ = _reward(rollout, policy, teacher="reference")
    assert rewards == [1.0, 0.0]
    assert policy.asked[0][0][0] == [{"role": "user", "content": f"{D1}\n\n{Q1}"}]
    assert policy.asked[0][1]["model"] == "reference"


# -- settings a run cannot use -----------------------------------------------------------------------------------------


def test_a_run_without_the_document_column_or_with_an_unknown_template_field_is_refused():
    from stackrl import ConfigError, RunFacts

    facts = RunFacts(max_steps=4, group_size=4, groups_per_step=2, columns=("question", "answer"),
                     builtin_columns=("question", "answer", "solution", "category"), chat=False, reference=False,
                     source="arithmetic", components=("darc",))
    with pytest.raises(ConfigError, match="darc.document_column"):
        make_plugin("darc").check_run(facts)
    with pytest.raises(ConfigError, match="darc.teacher_template"):
        make_plugin("darc", document_column="answer", teacher_template="{document}{hint}{prompt}").check_run(facts)
    from dataclasses import replace

    with_aux = replace(facts, columns=("question", "solution"), aux_models=("strong",))
    with pytest.raises(ConfigError, match="darc.label_samples: an auxiliary model"):
        make_plugin("darc", teacher="strong").check_run(with_aux)
    assert make_plugin("darc", teacher="strong", label_samples=1).check_run(with_aux) is None


# -- a resumed run -----------------------------------------------------------------------------------------------------


def test_a_resumed_run_keeps_the_corpus_of_the_checkpoint_and_retrieves_the_same_documents(tmp_path):
    import torch

    from stackrl.run import build_trainer
    from stackrl.testing.benchmark import one_thread
    from stackrl.testing.fixtures import StopAt
    from stackrl.testing.tiny import tiny_config
    from stackrl.trainer import PLUGIN_STATE_FILE

    def train(callbacks=(), resume=None):
        config = tiny_config(
            "unused", ["darc"], tmp_dir=tmp_path / "config", model={"name_or_path": "stackrl/arith-tiny"},
            data={"size": 4, "label_free": True}, output_dir=str(tmp_path / "run"), rewards={"exact_match": None},
            trainer={"per_device_train_batch_size": 4, "num_generations": 2, "max_completion_length": 16,
                     "max_steps": 2, "seed": 1, "save_strategy": "steps", "save_steps": 1},
            darc={"label_samples": 2, "math_verify": False, "label_sampling": {"max_new_tokens": 16}})
        run = build_trainer(config, callbacks=list(callbacks))
        with one_thread():
            run.train(resume_from_checkpoint=resume)
        return run

    first = train(callbacks=[StopAt(1)])
    saved = torch.load(tmp_path / "run" / "checkpoint-1" / PLUGIN_STATE_FILE, weights_only=True)["darc"]
    resumed = train(resume=True)
    got = resumed.plugins.plugins["darc"]
    assert saved["scanned"] == got.scanned == 4 and len(got.library) == 4
    assert got.state_dict()["library"]["records"] == saved["library"]["records"]
    assert got.state_dict()["library"]["serial"] == saved["library"]["serial"]
    questions = [first.pool.row(i)["prompt"] for i in range(4)]
    want = first.plugins.plugins["darc"]
    assert documents_for(got.library, questions, 1, 0.0) == documents_for(want.library, questions, 1, 0.0)
    assert [d for d, _ in documents_for(got.library, questions, 1, 0.0)] == [
        first.pool.row(i)["solution"] for i in range(4)]
