"""The supervised-phase block: pairs kept once, a phase every few steps on what was collected since the last, the
pairs through a checkpoint, the phase's settings refused by name. The phases in a real run: plugins/intrl and
plugins/hila."""

import pytest
import torch

from stackrl.blocks.supervised import SupervisedPairs, SupervisedSettings
from stackrl.errors import ConfigError


class PostStep:
    """What ``post_step`` hands the block: the step, and a record of its logs, warnings and phases."""

    def __init__(self, step):
        self.step, self.logged, self.warned, self.phases = step, {}, [], []

    def log(self, key, value):
        self.logged[key] = value

    def warn(self, key, count=1):
        self.warned.append(key)

    def supervised_phase(self, name, contexts, completion_ids, **options):
        self.phases.append((name, contexts, completion_ids, options))


def test_a_pair_is_kept_once_or_a_context_once():
    pairs = SupervisedPairs("p")
    assert [pairs.add([1, 2], [3]), pairs.add([1, 2], [3]), pairs.add([1, 2], [4])] == [True, False, True]
    assert pairs.pairs == [([1, 2], [3]), ([1, 2], [4])]
    once = SupervisedPairs("p", once_per_context=True)
    assert [once.add("q", [3]), once.add("q", [4]), once.add("r", [4])] == [True, False, True]
    assert once.pairs == [("q", [3]), ("r", [4])]


def test_the_phase_runs_every_few_steps_on_the_pairs_since_the_last_then_empties_them():
    settings = SupervisedSettings(every=2, sft_learning_rate=0.5, sft_epochs=3, sft_batch_size=4)
    pairs = SupervisedPairs("mine")
    pairs.add("q", [1])
    early = PostStep(step=1)
    pairs.phase_due(early, settings, nothing="none")
    assert early.phases == [] and early.logged == {} and len(pairs) == 1
    due = PostStep(step=2)
    pairs.phase_due(due, settings, nothing="none")
    assert due.phases == [("mine", ["q"], [[1]], {"learning_rate": 0.5, "epochs": 3, "batch_size": 4})]
    assert due.logged == {"pairs": 1} and len(pairs) == 0
    empty = PostStep(step=4)
    pairs.phase_due(empty, settings, nothing="none")
    assert empty.phases == [] and empty.warned == ["none"] and empty.logged == {"pairs": 0}


def test_the_pairs_survive_a_weights_only_checkpoint(tmp_path):
    pairs = SupervisedPairs("p")
    pairs.add([5, 6], [7])
    pairs.add("text", [8, 9])
    torch.save(pairs.state_dict(), tmp_path / "state.pt")
    again = SupervisedPairs("p")
    again.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    assert again.pairs == pairs.pairs


@pytest.mark.parametrize(("setting", "message"), [
    ({"every": 0}, "mine.every: must be at least 1"),
    ({"sft_epochs": 0}, "mine.sft_epochs: must be at least 1"),
    ({"sft_learning_rate": 0.0}, "mine.sft_learning_rate: must be positive"),
    ({"sft_batch_size": 0}, "mine.sft_batch_size: must be at least 1 or null"),
])
def test_settings_no_phase_could_use_are_refused_by_name(setting, message):
    with pytest.raises(ConfigError, match=message):
        SupervisedSettings(**setting).check_supervised("mine")
