"""selfjudge: the conformance suite, what its defaults ask and read (the judge's general rules:
tests/test_judges.py), and its practice-problem loop in a real run of the built-in judging model,
stackrl/arith-skills, with the problem writing scripted (the rules of self-instruction: tests/test_selfinstruct.py)."""

from transformers import AutoTokenizer

from stackrl.judges import Mode, parse_judgement
from stackrl.run import build_trainer
from stackrl.tasks import JUDGE_TEMPLATE, arith_tiny_path
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.heldout import written_rollout
from stackrl.testing.scripted import script_problems
from stackrl_selfjudge import SelfJudge


class TestConformance(PluginConformance):
    plugin_name = "selfjudge"
    plugin_settings = {"selfjudge": {"max_new_tokens": 8}}


def test_it_asks_for_a_check_of_its_own_solution_and_reads_the_verdict_line():
    settings = SelfJudge().config
    rollout = written_rollout(AutoTokenizer.from_pretrained(arith_tiny_path()), ["(4 * 2) + 3"], ["4 * 2 = 9"],
                              group_size=1)
    [prompt] = SelfJudge()._judge.prompts(rollout)
    assert "What is (4 * 2) + 3?" in prompt and "4 * 2 = 9" in prompt and "Verdict: wrong" in prompt
    assert settings.mode is Mode.generate
    read = lambda text: parse_judgement(text, settings.scale, settings.verdict_prefix)  # noqa: E731
    assert read("4 * 2 = 8, not 9.\nVerdict: wrong") == 0.0
    assert read("Each step holds.\nVerdict: correct") == 1.0
    assert read("Each step holds, so it is correct.") is None  # no verdict line: malformed, not 0


# -- the practice-problem loop, its writing scripted (the built-in models cannot write problems) ----------------------

PRACTICE = [" What is 2 + 3 + 4?\n3. What is (5 + 6) * 2?\n4. Plot the points 1 and 2.\n"]


class Batches:
    """Each selfjudge post_step: the step, the batch's row ids (one per group), prompts and selfjudge rewards."""

    def __init__(self):
        self.steps = []

    def __call__(self, hook, plugin, kwargs, result):
        if hook == "post_step" and plugin == "selfjudge":
            ctx = kwargs["ctx"]
            self.steps.append((ctx.step, ctx.pool.last_batch, list(ctx.rollout.prompts),
                               ctx.rollout.rewards["selfjudge"].tolist()))


def test_practice_problems_join_the_pool_label_free_and_are_solved_and_judged(make_config):
    config = make_config(
        ["selfjudge"],
        model={"name_or_path": "stackrl/arith-skills"},
        data={"label_free": True, "size": 2},
        rewards={"exact_match": None},
        trainer={"per_device_train_batch_size": 8, "num_generations": 4, "max_completion_length": 40, "max_steps": 3},
        selfjudge={"judge_template": JUDGE_TEMPLATE, "max_new_tokens": 96, "self_instruct": {"every_steps": 1}},
    )
    batches = Batches()
    run = build_trainer(config, monitor=batches)
    writer = script_problems(run, "selfjudge", {1: PRACTICE})
    run.train()
    plugin = run.plugins.plugins["selfjudge"]
    assert plugin.instruct.written == {2: "What is 2 + 3 + 4?", 3: "What is (5 + 6) * 2?"}  # "Plot" is banned
    assert [run.pool.stats(row).label_free for row in (2, 3)] == [True, True]
    assert plugin.instruct.examples == [2, 3]  # every kept problem may be shown again
    logged = next(entry for entry in run.state.log_history if entry.get("step") == 1)
    # The four requests got the same answer: "Plot" banned in each, the first request's two problems repeated in
    # the three others.
    assert logged["selfjudge/instruct/written"] == 12 and logged["selfjudge/instruct/added"] == 2
    assert logged["selfjudge/instruct/rejected/banned"] == 4 and logged["selfjudge/instruct/rejected/similar"] == 6
    # The round after step 2 shows both written problems (two per request) with the two dataset problems.
    for request in writer.requests[2]:
        listed = [line.split(". ", 1)[1] for line in request.splitlines()[2:-1]]
        assert set(plugin.instruct.written.values()) <= set(listed) and len(listed) == 4
    # Steps 2 and 3 draw a cycle of the four rows: each written problem is solved by a group and judged.
    judged = {}
    for step, rows, prompts, rewards in batches.steps[1:]:
        for group, row in enumerate(rows):
            if row in plugin.instruct.written:
                assert set(prompts[group * 4 : group * 4 + 4]) == {plugin.instruct.written[row]}
                judged[row] = rewards[group * 4 : group * 4 + 4]
    assert set(judged) == {2, 3}
    verdicts = [r for rewards in judged.values() for r in rewards if r == r]  # NaN: a malformed judgement
    assert verdicts and set(verdicts) <= {0.0, 1.0}
