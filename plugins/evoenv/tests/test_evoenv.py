"""EvoEnv: the instance contract and each stage of the filter on hand-built runs, the band and the proposer's
reward at their bounds, the reward hook on the real sandbox with a scripted solver (programs kept and rejected,
kept instances waiting for the pool, solver rows rewarded by their environment's answer), and the pool after a
step (the instances as solver rows, the request row's share)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from stackrl import Generation, RewardContext, Rollout
from stackrl.blocks.sandbox import ExecResult
from stackrl.pool import CATEGORY_COLUMN
from stackrl.run import build_trainer
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.heldout import recipe_config
from stackrl_evoenv import EvoEnv, EvoEnvConfig
from stackrl_evoenv.plugin import ANSWER_COLUMN
from stackrl_evoenv.screening import (SEED_ENVIRONMENT, Instance, Screening, in_band, pass_rate, proposer_reward,
                                      read_instances, request_text, screen_runs)

RECIPE = Path(__file__).resolve().parents[3] / "configs" / "recipes" / "evoenv-cpu.yaml"
PROPOSE, SOLVE = "evoenv/propose", "evoenv/solve"


class TestConformance(PluginConformance):
    plugin_name = "evoenv"
    plugin_settings = {"evoenv": {"topic": "Environment:\n"}}  # a short request: the two steps draw it alone
    refused_settings = [
        ({"instances": 0}, "at least 1"),
        ({"solver_samples": 0}, "at least 1"),
        ({"proposer_share": 1.0}, "strictly between 0 and 1"),
        ({"min_pass": 0.6, "max_pass": 0.5}, "min_pass <= max_pass"),
        ({"max_pass": 1.0}, "must be below 1"),
        ({"stage_credit": 1.0}, r"must lie in \[0, 1\)"),
        ({"timeout_s": 0}, "must be positive"),
        ({"topic": " "}, "empty"),
    ]


def line(question, answer):
    return json.dumps({"question": question, "answer": answer})


def result(stdout="", exit_code=0, completed=True, stopped="exited", stderr=""):
    return ExecResult(stdout, stderr, exit_code, None, stopped, completed, 0.01, 0.01, True)


# -- the contract and the stages -------------------------------------------------------------------------------


def test_instances_are_read_from_the_first_count_lines_and_refused_when_not_checkable():
    out = "\n".join([line("What is 2 + 3?", 5), line("Sort 3 1 2", "1 2 3"), line("x", 1.5)])
    assert read_instances(out, 2) == ([Instance("What is 2 + 3?", "5"), Instance("Sort 3 1 2", "1 2 3")], "")
    assert read_instances(out, 4)[1] == "3 lines, 4 instances asked"
    assert read_instances("not json\n" + out, 2)[1].startswith("not JSON")
    assert read_instances("[1, 2]\n", 1)[1].startswith("not an object")
    assert read_instances(line("", 1), 1)[1] == "an instance without a question"
    assert "not a scalar" in read_instances(line("q", [1]), 1)[1]
    assert "not a scalar" in read_instances(line("q", True), 1)[1]
    assert "empty or multi-line" in read_instances(line("q", "a\nb"), 1)[1]
    # an oracle the task can check: a wrong reference of one of its questions is refused, unless not asked
    wrong = line("What is (3 + 4) * 2?", 15)
    assert read_instances(wrong, 1)[1] == "a wrong reference: 'What is (3 + 4) * 2?' is 14, not 15"
    assert read_instances(wrong, 1, check_known=False)[0] == [Instance("What is (3 + 4) * 2?", "15")]


def test_each_stage_rejects_its_own_fault_and_in_order():
    good = "\n".join(line(f"What is {a} + 1?", a + 1) for a in range(1, 4))
    assert screen_runs(result(good), result(good), 3).failed is None
    assert screen_runs(result(good), result(good), 3).instances[2] == Instance("What is 3 + 1?", "4")
    crashed = result(good, exit_code=1, completed=False, stderr="Traceback\nZeroDivisionError: division by zero")
    assert screen_runs(result(good), crashed, 3).failed == "runs"
    assert "ZeroDivisionError" in screen_runs(crashed, result(good), 3).why
    assert screen_runs(result(good), result(good, completed=False), 3).failed == "runs"  # sys.exit(0) midway
    assert screen_runs(result(good, stopped="timeout", exit_code=None), result(good), 3).failed == "runs"
    other = good.replace("What is 3 + 1?", "What is 5 + 1?").replace("4}", "6}")
    assert screen_runs(result(good), result(other), 3).failed == "deterministic"
    # a crash and a difference together: the first stage failed is named
    assert screen_runs(crashed, result(other), 3).failed == "runs"
    assert screen_runs(result(good), result(good), 4).failed == "checkable"


def test_the_band_and_the_proposers_reward_at_their_bounds():
    assert pass_rate([True, False, False, False]) == 0.25 and pass_rate([]) == 0.0
    assert in_band(0.1, 0.1, 0.8) and in_band(0.8, 0.1, 0.8)
    assert not in_band(0.09, 0.1, 0.8) and not in_band(0.81, 0.1, 0.8)
    kept = Screening(None, [Instance("q", "1")], pass_rate=0.5)
    assert kept.accepted and proposer_reward(kept) == 1.0 and proposer_reward(kept, 0.5) == 1.0
    assert [Screening(stage).passed for stage in ("runs", "deterministic", "checkable", "band")] == [0, 1, 2, 3]
    assert proposer_reward(Screening("band", pass_rate=0.9)) == 0.0
    assert proposer_reward(Screening("band", pass_rate=0.9), 0.5) == pytest.approx(0.5 * 3 / 4)
    assert proposer_reward(Screening("runs"), 0.5) == 0.0


def test_the_request_shows_the_contract_and_a_seed_environment_that_passes_it():
    text = request_text()
    assert SEED_ENVIRONMENT in text and text.endswith("Environment:\n") and "sys.argv[1]" in text


# -- the reward hook on the real sandbox ---------------------------------------------------------------------------

HEAD = "import json, random, sys\nrng = random.Random(int(sys.argv[1]))\nn = int(sys.argv[2])\n"
PROGRAMS = {
    "kept": HEAD + "for i in range(n):\n    a = rng.randint(10, 40)\n"
            "    print(json.dumps({'question': f'What is ({a} + 7) - 3?', 'answer': a + 4}))\n",
    "unseeded": "import json, random, sys\nrng = random.Random()\nn = int(sys.argv[2])\n"
                "for i in range(n):\n    a = rng.randint(10, 10 ** 9)\n"
                "    print(json.dumps({'question': f'What is ({a} + 7) - 3?', 'answer': a + 4}))\n",
    "crashes": HEAD + "for i in range(n):\n    print(json.dumps({'question': f'What is ({i + 5} + 7) - 3?', "
               "'answer': i + 9}))\nraise ValueError('late')\n",
    "wrong_oracle": HEAD + "for i in range(n):\n    print(json.dumps({'question': f'What is ({i + 5} + 7) - 3?', "
                    "'answer': i + 10}))\n",
    "easy": HEAD + "for i in range(n):\n    print(json.dumps({'question': f'What is ({i + 1} + 1) + 1?', "
            "'answer': i + 3}))\n",
}


def _reward(**settings):
    """The five programs (the first in a fence, as a chat model writes it) and a solver group of two rows, through
    the hook; the scripted solver answers every question of the form (1 + 1)... right and, of the others, the first
    try at each instance right."""
    asked = []

    def generate(prompts, model="policy", caller="", **sampling):
        asked.extend(prompts)
        texts = []
        for n, prompt in enumerate(prompts):
            value = eval(prompt.strip()[len("What is "):-1])
            texts.append(f"The answer is {value if '+ 1) + 1' in prompt or n % 4 == 0 else value + 1}.")
        return [Generation([], [], t) for t in texts]

    names = list(PROGRAMS)
    completions = [f"Here:\n```python\n{PROGRAMS['kept']}```\n"] + [PROGRAMS[n] for n in names[1:]]
    completions += ["The answer is 12.", "The answer is 13."]
    columns = {CATEGORY_COLUMN: [PROPOSE] * 5 + [SOLVE] * 2, ANSWER_COLUMN: [None] * 5 + ["12", "12"]}
    rollout = Rollout(["request"] * 5 + ["q"] * 2, completions, [[1]] * 7, [[2]] * 7, columns, group_size=1)
    acted = []
    ctx = RewardContext(step=3, tokenizer=None, policy=SimpleNamespace(generate=generate), _log=lambda *_: None,
                        _plugin="evoenv", rollout=rollout, training=True,
                        _acted=lambda plugin, n, of, hint: acted.append((n, of)))
    plugin = EvoEnv(EvoEnvConfig(answer_extractor="answer_is", math_verify=False, instances=4, **settings))
    plugin.name = "evoenv"
    plugin.prompts = lambda question: question + "\n"
    return plugin, plugin.reward(ctx=ctx), asked, acted, names


def test_the_hook_keeps_the_environment_in_the_band_and_queues_its_instances():
    plugin, rewards, asked, acted, names = _reward(max_pass=0.5)
    assert {n: s.failed for n, s in zip(names, plugin.last)} == {
        "kept": None, "unseeded": "deterministic", "crashes": "runs", "wrong_oracle": "checkable", "easy": "band"}
    assert plugin.last[0].pass_rate == 0.25 and plugin.last[4].pass_rate == 1.0
    assert rewards == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]  # solver rows: the environment's answer 12
    # only the survivors of the first three stages were solved: 4 instances x 4 tries, twice
    assert len(asked) == 32
    # the instances of the kept one wait for the pool, the same as a rerun with the step as seed prints
    assert plugin.pending == plugin.last[0].instances and len(plugin.pending) == 4
    assert all(int(i.answer) == int(i.question.split("(")[1].split(" ")[0]) + 4 for i in plugin.pending)
    assert acted == [(7, 7)]


def test_a_band_that_admits_the_easy_environment_keeps_it_and_partial_credit_pays_the_stages_passed():
    plugin, rewards, *_ = _reward(max_pass=0.99, stage_credit=0.4)
    assert plugin.last[4].failed == "band"  # 1.0 lies above even 0.99
    plugin, rewards, *_ = _reward(min_pass=0.5, max_pass=0.99, stage_credit=0.4)
    assert plugin.last[0].failed == "band"  # 0.25 below the lower bound
    assert rewards[:5] == pytest.approx([0.3, 0.1, 0.0, 0.2, 0.3])


# -- the pool ------------------------------------------------------------------------------------------------------


def test_kept_instances_join_the_pool_as_solver_rows_and_the_request_keeps_its_share():
    with tempfile.TemporaryDirectory() as out:
        trainer = build_trainer(recipe_config(RECIPE, plugins=True, seed=0, steps=1, output_dir=out))
        plugin = trainer.plugins.plugins["evoenv"]
        trainer.notify("train_begin")
        pool = trainer.pool
        assert pool.category_weights == {PROPOSE: 1.0}  # zero-data: the request row alone, no dataset row
        (request,) = [r for r in pool.active_rows() if pool.stats(r).category == PROPOSE]
        assert pool.row(request)["prompt"] == request_text()
        plugin.pending = [Instance("What is (12 + 7) - 3?", "16"), Instance("What is (5 + 7) - 3?", "9")]
        trainer.notify("post_step")
        rows = [pool.row(r) for r in pool.active_rows() if pool.stats(r).category == SOLVE]
        assert [(r["prompt"], r[ANSWER_COLUMN]) for r in rows] == [("What is (12 + 7) - 3?\n", "16"),
                                                                    ("What is (5 + 7) - 3?\n", "9")]
        assert pool.category_weights == {PROPOSE: 0.25, SOLVE: 0.75} and plugin.pending == []
