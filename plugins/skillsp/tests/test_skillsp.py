"""Skill-SP's controller: the rule on hand-built outcomes, the conformance suite, the pool's weights after each
training step equal to the hand computation from that step's solver outcomes, the library across a resume."""

import pytest
import torch

from stackrl.blocks.experience import ExperienceSettings
from stackrl.testing.benchmark import one_thread
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import StopAt, make_plugin, train_steps
from stackrl_skillsp import informativeness, sampling_weights, solve_rates, updated_utility



@pytest.fixture(autouse=True)
def _one_thread():
    """Torch on one thread: the tiny models gain nothing from more, and a loaded machine's spinning threads cost."""
    with one_thread():
        yield


QUICK = {"per_device_train_batch_size": 12, "num_generations": 2, "max_completion_length": 8}


class TestConformance(PluginConformance):
    plugin_name = "skillsp"
    refused_settings = [
        ({"alpha": 0.0}, r"must lie in \(0, 1\]"),
        ({"alpha": 1.5}, r"must lie in \(0, 1\]"),
        ({"floor": 0.0}, "must be a positive number"),
        ({"initial_utility": 2.0}, r"must lie in \[0, 1\]"),
        ({"metric": "nonsense"}, "must be a built-in outcome reward"),
    ]


def test_solve_rates_per_skill():
    skills = ["add", "add", "mul", "mul", "mul", None, "sub"]
    solved = [True, False, True, True, True, True, False]
    assert solve_rates(skills, solved) == {"add": 0.5, "mul": 1.0, "sub": 0.0}


def test_informativeness_peaks_at_an_even_split_and_vanishes_at_all_or_none():
    assert informativeness(0.5) == 1.0
    assert informativeness(1.0) == 0.0 and informativeness(0.0) == 0.0
    assert informativeness(0.25) == pytest.approx(0.5) and informativeness(0.75) == pytest.approx(0.5)


def test_utility_moves_toward_the_informativeness_by_alpha():
    assert updated_utility(1.0, 1.0, 0.5) == pytest.approx(0.5)  # all solved: halfway to 0
    assert updated_utility(0.2, 0.5, 0.25) == pytest.approx(0.75 * 0.2 + 0.25 * 1.0)
    assert updated_utility(0.4, 0.0, 1.0) == 0.0


def test_weights_normalise_utility_plus_floor():
    weights = sampling_weights({"a": 1.0, "b": 0.0, "c": 0.5}, 0.1)
    assert weights == pytest.approx({"a": 1.1 / 1.8, "b": 0.1 / 1.8, "c": 0.6 / 1.8})


def test_a_full_library_evicts_the_least_useful_skill_and_never_takes_it_back():
    plugin = make_plugin("skillsp", experience=ExperienceSettings(capacity=2, eviction="lowest_utility"))
    assert plugin.add_skills(["a", "b"]) == ["a", "b"]
    plugin.library.set_utility("a", 0.1)
    assert plugin.add_skills(["c"]) == ["c"]
    assert plugin.utilities == {"b": 1.0, "c": 1.0} and plugin.retired == ["a"]
    assert plugin.add_skills(["a"]) == []


def _hand_weights(utilities, skills, solved, alpha=0.5, floor=0.05):
    for skill, rate in solve_rates(skills, solved).items():
        utilities[skill] = (1 - alpha) * utilities[skill] + alpha * (1 - abs(2 * rate - 1))
    return sampling_weights(utilities, floor)


def test_each_step_updates_the_utilities_from_the_solver_and_reweights_the_pool(make_config):
    trainer = {**QUICK, "max_steps": 2, "max_completion_length": 40}
    config = make_config(["skillsp"], trainer=trainer, model={"name_or_path": "stackrl/arith-tiny"})
    begun, seen = [], []

    def monitor(hook, plugin, kwargs, result):
        ctx = kwargs.get("ctx")
        if hook == "train_begin":
            begun.append(dict(ctx.pool.category_weights))
        if hook == "post_step":
            rollout = ctx.rollout
            solved = [f"The answer is {a}." in text for text, a in zip(rollout.completions, rollout.columns["answer"])]
            seen.append((dict(ctx.pool.category_weights), list(rollout.columns["category"]), solved))

    run = train_steps(config, monitor=monitor)
    skillsp = run.plugins.plugins["skillsp"]
    utilities = {c: 1.0 for c in run.pool.categories()}
    assert begun == [pytest.approx({c: 1 / len(utilities) for c in utilities})]  # every skill new: uniform
    for weights, skills, solved in seen:
        assert weights == pytest.approx(_hand_weights(utilities, skills, solved))
    assert skillsp.utilities == pytest.approx(utilities)
    assert len(set(utilities.values())) > 1, "every skill had the same feedback: the test is void"


def test_the_library_survives_a_resume(make_config, tmp_path):
    trainer = {**QUICK, "max_steps": 4, "save_strategy": "steps", "save_steps": 2}
    straight = train_steps(make_config(["skillsp"], trainer=trainer, output_dir=str(tmp_path / "straight")))
    config = make_config(["skillsp"], trainer=trainer, output_dir=str(tmp_path / "resumed"))
    train_steps(config, callbacks=[StopAt(2)])
    resumed = train_steps(config, resume=True)
    assert resumed.plugins.plugins["skillsp"].utilities == straight.plugins.plugins["skillsp"].utilities
    assert resumed.plugins.plugins["skillsp"].batches_seen == straight.plugins.plugins["skillsp"].batches_seen
    assert resumed.pool.last_batch == straight.pool.last_batch
    for name, p in straight.model.named_parameters():
        assert torch.equal(p, dict(resumed.model.named_parameters())[name]), name
