"""CoMAS: a scorer's verdict on a solution read with a critique of it rewards the solution and, zero-sum, the critique."""

import pytest

from stackrl import RewardContext, Rollout
from stackrl.blocks.judges import Mode
from stackrl.rewards import SOLVE, VERIFY
from stackrl.tasks import judge_prompt
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin, train_steps
from stackrl.testing.scripted import ScriptedPolicy
from stackrl_comas import ComasConfig, check_lines, critique_reward, scorer_prompt, solution_reward

Q = "What is (3 + 4) * 2?\n"
RIGHT = "3 + 4 = 7\n7 * 2 = 14\nThe answer is 14."
WRONG = "3 + 4 = 8\n8 * 2 = 16\nThe answer is 16."
CALLS_WRONG = "3 + 4 = 7 | 8 no\nVerdict: wrong"
CALLS_RIGHT = "3 + 4 = 7 | 7 yes\n7 * 2 = 14 | 14 yes\n14 | 14 yes\nVerdict: correct"


class TestConformance(PluginConformance):
    plugin_name = "comas"
    plugin_settings = {"comas": {"scorer_max_tokens": 8}}  # the scorer's length is the run's cost, not what is checked
    refused_settings = [({"critique_share": 1.0}, r"must be in \(0, 1\)"), ({"critique_share": 0.0}, r"must be in \(0, 1\)"),
                        ({"scorer_temperature": -0.5}, "must be 0"), ({"scorer_max_tokens": 0}, "at least 1"),
                        ({"malformed": -1.0}, r"must be in \[0, 1\]")]


@pytest.mark.parametrize("score, solution, critique", [(1.0, 1.0, 0.0), (0.0, 0.0, 1.0), (0.3, 0.3, 0.7), (None, 0.25, 0.25)])
def test_the_solution_earns_the_normalised_score_and_the_critique_the_rest(score, solution, critique):
    """The authors' score s in 1..3 normalised to (s - 1) / 2: the solution gets it, the critique 1 minus it; both get
    the malformed value (an asymmetric 0.25 here, the authors' 0 by default) when no score can be read."""
    assert solution_reward(score, 0.25) == pytest.approx(solution)
    assert critique_reward(score, 0.25) == pytest.approx(critique)
    assert solution_reward(None) == critique_reward(None) == 0.0


def test_the_scorer_reads_the_critique_s_checks_without_its_verdict():
    assert check_lines(CALLS_WRONG) == "3 + 4 = 7 | 8 no\n"
    assert check_lines("3 + 4 = 7 | 7 yes\n7 * 2") == "3 + 4 = 7 | 7 yes\n7 * 2\n"  # cut off: kept, line closed
    assert check_lines("") == "" and check_lines("Verdict: correct") == ""
    assert scorer_prompt(Q, WRONG, CALLS_WRONG) == Q + WRONG + "\nCheck:\n3 + 4 = 7 | 8 no\n"


def test_the_defaults():
    config = ComasConfig()
    assert config.critique_share == 0.5 and config.scorer is Mode.generate
    assert config.scorer_temperature == 1.0 and config.malformed == 0.0


def _reward(policy, rollout, **settings):
    logged, acted = {}, []
    plugin = make_plugin("comas", **settings)
    ctx = RewardContext(step=0, tokenizer=None, policy=policy, _log=logged.__setitem__, _plugin="comas",
                        _acted=lambda plugin, n, m, hint: acted.append((n, m)), rollout=rollout)
    return plugin.reward(ctx), logged, acted, rollout.pseudo_labels.get("comas")


def test_solutions_get_a_critique_of_their_own_and_critiques_the_complement_of_the_score():
    """Two solve rows (right, wrong) and two critique rows of a wrong solution (calling it wrong, calling it right).
    The solve rows' critiques are sampled in the judge role; every scorer prompt holds the question, the solution
    and the critique's checks; the scorer's verdict (1 or 0) rewards the solution and its complement the critique."""
    rollout = Rollout(prompts=[Q] * 4, completions=[RIGHT, WRONG, CALLS_WRONG, CALLS_RIGHT], prompt_ids=[[1]] * 4,
                      completion_ids=[[2]] * 4, group_size=2,
                      columns={"role": [SOLVE, SOLVE, VERIFY, VERIFY], "comas_solution": [None, None, WRONG, WRONG]})
    policy = ScriptedPolicy({
        judge_prompt(Q, RIGHT): [CALLS_RIGHT], judge_prompt(Q, WRONG): [CALLS_WRONG],  # the solve rows' critics
        scorer_prompt(Q, RIGHT, CALLS_RIGHT): ["Verdict: correct"],
        scorer_prompt(Q, WRONG, CALLS_WRONG): ["Verdict: wrong"],
        scorer_prompt(Q, WRONG, CALLS_RIGHT): ["Verdict: correct"],  # a critique that let the slip through
    })
    rewards, logged, acted, labels = _reward(policy, rollout, scorer_temperature=0.0)
    assert rewards == [1.0, 0.0, 1.0, 0.0]
    assert policy.asked[0][0] == [judge_prompt(Q, RIGHT), judge_prompt(Q, WRONG)], "one critique per solve row"
    assert policy.asked[1][0] == [scorer_prompt(Q, RIGHT, CALLS_RIGHT), scorer_prompt(Q, WRONG, CALLS_WRONG),
                                  scorer_prompt(Q, WRONG, CALLS_WRONG), scorer_prompt(Q, WRONG, CALLS_RIGHT)]
    assert policy.asked[1][1] == {"max_new_tokens": 128, "do_sample": False}
    assert acted == [(4, 4)] and labels == ["14", None, None, "16"]
    assert logged["comas/solution_score"] == 0.5 and logged["comas/critique_score"] == 0.5


def test_an_unreadable_score_gives_both_sides_the_malformed_value():
    rollout = Rollout(prompts=[Q] * 2, completions=[RIGHT, CALLS_WRONG], prompt_ids=[[1]] * 2,
                      completion_ids=[[2]] * 2, group_size=1,
                      columns={"role": [SOLVE, VERIFY], "comas_solution": [None, RIGHT]})
    policy = ScriptedPolicy({judge_prompt(Q, RIGHT): [CALLS_WRONG], scorer_prompt(Q, RIGHT, CALLS_WRONG): ["no verdict"]})
    rewards, _, acted, labels = _reward(policy, rollout, malformed=0.25)
    assert rewards == [0.25, 0.25] and acted == [(0, 2)] and labels == [None, None]


def test_on_the_built_in_model_critique_groups_critique_one_on_policy_solution_and_no_answer_is_read(make_config):
    config = make_config(["comas"], model={"name_or_path": "stackrl/arith-tiny"}, rewards={"exact_match": None},
                         data={"label_free": True},
                         comas={"scorer_max_tokens": 4}, trainer={"per_device_train_batch_size": 8, "max_completion_length": 24})
    trainer = train_steps(config, steps=1)
    rollout, decode, size = trainer._rollouts["train"], trainer.processing_class.decode, 4
    roles = rollout.columns["role"]
    assert roles == [SOLVE] * 4 + [VERIFY] * 4 and "answer" not in rollout.columns
    for i, role in enumerate(roles):
        prompt, solution = rollout.prompts[i], rollout.columns["comas_solution"][i]
        if role == SOLVE:
            assert decode(rollout.prompt_ids[i]) == prompt and solution is None
        else:
            assert decode(rollout.prompt_ids[i]) == judge_prompt(prompt, solution)
            assert decode(rollout.prompt_ids[i - i % size]) == decode(rollout.prompt_ids[i])  # one solution a group
    assert set(rollout.rewards["comas"].tolist()) <= {0.0, 1.0}
