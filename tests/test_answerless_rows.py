"""Rows without an answer (a pool row added label-free, a self-supervised task) have no privileged signal: every
method that reads the answer through the teacher or token-signal block leaves them as plain GRPO, and gives the
other rows of the same batch exactly what it gives them alone. On the built-in model, through each plugin's hooks."""

import math

import pytest
import torch

from stackrl import LossContext, StepContext
from stackrl.blocks.tokensignals import per_token
from stackrl.manager import installed_plugins
from stackrl.policy import PolicyAccess
from stackrl.run import build_trainer
from stackrl.testing.fixtures import train_steps
from stackrl.testing.heldout import WRITTEN_PROBLEMS, advantage_context, written_rollout

ANSWERED, ANSWERLESS = [0, 1], [2, 3]

# The advantage-stage methods, with settings that make each touch every row it may (trace: spans on every line).
RESHAPERS = {
    "rlsd": {}, "rlrt": {"incorrect": "rlsd"}, "cscr": {}, "h2sd": {},
    # groups of two have no sibling hints: the reference and a wrong solution instead
    "rlcsd": {"positive_template": "{solution}\n\n{prompt}", "negative_template": "{wrong_solution}\n\n{prompt}"},
    "trace": {"spans": "rule", "span_pattern": "=", "route": "both", "teacher": "policy"},
    "dasd": {}, "antisd": {},
}
# The loss terms on the teacher block.
LOSS_TERMS = {"opsd": {}, "pwopsd": {}, "betaopsd": {}, "dasd": {"form": "loss"}, "antisd": {"form": "loss"},
              "h2sd": {}}


@pytest.fixture(scope="module")
def trainer(tiny_model_dir, tmp_path_factory):
    from stackrl.testing.tiny import tiny_config

    out = tmp_path_factory.mktemp("answerless")
    return build_trainer(tiny_config(tiny_model_dir, [], tmp_dir=out, output_dir=str(out / "run"),
                                     model={"name_or_path": "stackrl/arith-tiny"}))


def _plugin(name: str, settings: dict):
    cls = installed_plugins()[name].load()
    plugin = cls(cls.Config(**settings))
    plugin.name = name
    return plugin


def _mixed(trainer):
    """Two problems, a right and a wrong completion each; the second problem's rows have no answer, and the outcome
    reward leaves them unscored (NaN), as the host does."""
    right, wrong = WRITTEN_PROBLEMS["(4 * 2) + 3"], "4 * 2 = 9\n9 + 3 = 12\nThe answer is 12."
    rollout = written_rollout(
        trainer.processing_class, ["(4 * 2) + 3"] * 2 + ["(3 + 5) - 2"] * 2,
        [right, wrong, WRITTEN_PROBLEMS["(3 + 5) - 2"], "3 + 5 = 7\n7 - 2 = 5\nThe answer is 5."],
        advantages=torch.tensor([0.7, -0.7, 0.7, -0.7]),
    )
    for row in ANSWERLESS:
        rollout.columns["answer"][row] = None
        rollout.rewards["exact_match"][row] = math.nan
    return rollout


def _reshaped(name: str, rollout, trainer) -> torch.Tensor:
    """The plugin's advantages for ``rollout``, on its real tokens (padding is no token's)."""
    plugin = _plugin(name, RESHAPERS[name])
    return plugin.reshape_advantages(rollout.advantages, advantage_context(trainer, rollout, name)) * rollout.completion_mask()


@pytest.mark.parametrize("name", RESHAPERS)
def test_reshaped_advantages_of_rows_without_an_answer_are_grpos(trainer, name):
    mixed = _mixed(trainer)
    got = _reshaped(name, mixed, trainer)
    plain = per_token(mixed.advantages, mixed.completion_mask())
    assert torch.equal(got[ANSWERLESS], plain[ANSWERLESS])
    want = _reshaped(name, mixed.select(ANSWERED), trainer)
    width = want.size(1)
    assert torch.allclose(got[ANSWERED, :width], want, atol=1e-5) and not (got[ANSWERED, width:] != 0).any()
    assert not torch.allclose(want, plain[ANSWERED, :width]), "the answered rows get the method's signal"


def _loss_context(trainer, rollout):
    ids = torch.nn.utils.rnn.pad_sequence([torch.tensor(c) for c in rollout.completion_ids], batch_first=True)
    policy = PolicyAccess(trainer, sharded=False, model=trainer.model)
    return trainer._context(LossContext, policy=policy, rollout=rollout, completion_ids=ids)


@pytest.mark.parametrize("name", LOSS_TERMS)
def test_loss_terms_leave_rows_without_an_answer_out(trainer, name):
    plugin, mixed = _plugin(name, LOSS_TERMS[name]), _mixed(trainer)
    if hasattr(plugin, "train_begin"):  # betaopsd's initial weights
        plugin.train_begin(trainer._context(StepContext))
    got = plugin.loss_term(_loss_context(trainer, mixed))
    want = plugin.loss_term(_loss_context(trainer, mixed.select(ANSWERED)))
    assert got is not None and torch.allclose(got, want, atol=1e-5), (got, want)
    assert plugin.loss_term(_loss_context(trainer, mixed.select(ANSWERLESS))) is None  # nothing to distil


def test_expo_explains_no_group_without_an_answer(trainer):
    mixed = _mixed(trainer)
    _plugin("expo", {"every_group": True, "only_reaching": False}).reshape_advantages(
        advantage_context(trainer, mixed, "expo"))
    explanations = mixed.columns["expo_explanations"]
    assert explanations[ANSWERED[0]] and not explanations[ANSWERLESS[0]]


@pytest.mark.parametrize("mode", ["sage", "light"])
def test_sage_hints_no_group_without_an_answer(make_config, mode):
    """mrrlvr's first stage has no answers: sage cannot tell its groups unsolved, so it hints none and tracks no
    failure, though the tiny random model solves nothing (with answers, every group is hinted or tracked)."""
    hints = {"mode": mode, "hint_source": "solution", "hinted_prompt_template": "{prompt}HINT {hint}\n"}
    config = make_config(["mrrlvr", "sage"], sage=hints, data={"source": "arithmetic", "size": 2, "seed": 0})
    trainer = train_steps(config, steps=1)
    assert set(trainer._rollouts["train"].columns["answer"]) == {None}
    if mode == "sage":
        logged = trainer.state.log_history[0]
        assert logged["sage/unsolved_groups"] == 0.0 and logged["sage/hint_level"] == 0.0
    else:
        assert trainer.plugins.plugins["sage"].tracker.levels == {}


# The methods that give groups roles by the correctness of an attempt, set so that every group would take the role.
ROLE_METHODS = {"rrr": {}, "rrpo": {"reset_share": 1.0}, "rise": {"verify_share": 0.5},
                "sdrl": {"debate_share": 1.0}}


@pytest.mark.parametrize("name", ROLE_METHODS)
def test_no_group_without_an_answer_is_judged_by_its_attempts(make_config, name):
    """In mrrlvr's first stage no attempt can be told right or wrong: rrr reflects on none, rrpo resets none, rise
    verifies none (of two groups, one would) and scores no solution, sdrl's debates show no candidate as right or
    wrong."""
    config = make_config(["mrrlvr", name], **{name: ROLE_METHODS[name]}, data={"source": "arithmetic", "size": 2},
                         trainer={"per_device_train_batch_size": 8})
    rollout = train_steps(config, steps=1)._rollouts["train"]
    assert set(rollout.columns["answer"]) == {None}
    if name == "sdrl":  # debating needs no answer
        assert "retry" in rollout.columns["role"] and set(rollout.columns["context_correct"]) == {None}
    else:
        assert set(rollout.columns["role"]) == {"solve"}
    if name == "rise":
        assert rollout.rewards["rise"].isnan().all()
