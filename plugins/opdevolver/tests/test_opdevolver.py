"""OPD-Evolver: retrieval and the reading plan, the with/without attribution, writing and eviction, the teacher's
memory and hindsight against a memory-free student, conformance and resume."""

from stackrl.testing.conformance import PluginConformance


class TestConformance(PluginConformance):
    plugin_name = "opdevolver"
    refused_settings = [({"candidates": 0}, "must be at least 1, not 0"),
                        ({"reading_rows": 0}, "must be at least 1, not 0"),
                        ({"utility_rate": 0.0}, r"must lie in \(0, 1\], not 0.0"),
                        ({"teacher_template": "{solution}\n\n{prompt}"}, "names no {memory}"),
                        ({"record_template": "{answer}"}, r"not \{answer\}")]


from types import SimpleNamespace

import pytest
import torch

from stackrl import Rollout
from stackrl.blocks.experience import Experience, ExperienceLibrary, ExperienceSettings
from stackrl.testing.fixtures import make_plugin
from stackrl_opdevolver.memory import attribution_gap, candidates, memory_text, reading_plan, updated_utility
from stackrl_opdevolver.plugin import MEMORY


def record(prompt: str, completion: str, key: str, utility: float = 0.0) -> Experience:
    return Experience(prompt_ids=[len(prompt)], completion_ids=[1], prompt=prompt, completion=completion, key=key,
                      utility=utility)


def test_the_reading_plan_keeps_the_first_rows_plain_and_goes_round_the_candidates():
    assert reading_plan(4, 2, ["a", "b"]) == [None, None, "a", "b"]
    assert reading_plan(6, 3, ["a", "b"]) == [None, None, None, "a", "b", "a"]
    assert reading_plan(4, 2, []) == [None] * 4  # nothing retrieved: the whole group is plain


def test_the_gap_is_the_rows_with_the_record_against_the_rows_without():
    assert attribution_gap([1.0, 0.0, 1.0, 0.0], [False, False, True, False]) == pytest.approx(1 - 1 / 3)
    assert attribution_gap([0.0, 1.0, 1.0, 0.0], [False, False, False, True]) == pytest.approx(-2 / 3)
    # A record read by rows that failed in a group that failed anyway did no harm: gap 0, not its raw reward.
    assert attribution_gap([0.0, 0.0, 0.0, 0.0], [False, False, True, False]) == 0.0
    assert attribution_gap([1.0, 1.0], [True, True]) is None  # no row without it: no contrast
    assert attribution_gap([1.0, 1.0], [False, False]) is None


def test_the_utility_moves_its_rate_of_the_way_to_the_gap():
    assert updated_utility(0.0, 0.6, 0.5) == pytest.approx(0.3)
    assert updated_utility(0.3, -0.6, 0.5) == pytest.approx(-0.15)
    assert updated_utility(0.2, 1.0, 1.0) == pytest.approx(1.0)


def test_candidates_are_the_closest_prompts_above_the_utility_floor():
    library = ExperienceLibrary(ExperienceSettings(), "opdevolver")
    library.add(record("What is 2 + 3?\n", "5", "near"))
    library.add(record("Name a colour of the sky.\n", "blue", "far"))
    library.add(record("What is 2 + 4?\n", "6", "retired", utility=-0.5))
    # "far" shares no word with the query (no score), "retired" fell below the floor.
    assert [r.key for r in candidates(library, "What is 2 + 3?\n", 3, -0.2)] == ["near"]
    assert [r.key for r in candidates(library, "What is 2 + 3?\n", 3, -1.0)] == ["near", "retired"]
    assert [r.key for r in candidates(library, "What is 2 + 3?\n", 1, -1.0)] == ["near"]
    assert memory_text(list(library)[:1], "Q: {prompt}A: {completion}\n") == "Q: What is 2 + 3?\nA: 5\n"


class Ctx(SimpleNamespace):
    training = True
    step = 3

    def log(self, *args):
        pass

    def acted(self, n, of, hint=None):
        self.acted_on = (n, of)


PROMPT, SOLUTION = "What is 2 + 3?\n", "2 + 3 = 5\nThe answer is 5."


def seeded_plugin(**settings):
    plugin = make_plugin("opdevolver", record_template="{completion}\n\n", **settings)
    plugin.library.add(record(PROMPT, SOLUTION, "own"))
    plugin.library.add(record("What is 2 + 4?\n", "2 + 4 = 6\nThe answer is 6.", "other"))
    return plugin


def sampled(plugin, rewards):
    """The sample stage on one group of four, then the advantage stage on its rollout with ``rewards``."""
    prompts = plugin.transform_prompts([PROMPT] * 4, Ctx(group_size=4, rollout_columns={}))
    rollout = Rollout(prompts=[PROMPT] * 4, completions=["c0", "c1", "c2", "c3"], prompt_ids=[[1], [1], [2], [3]],
                      completion_ids=[[10], [11], [12], [13]], columns={"solution": [SOLUTION] * 4, "answer": ["5"] * 4},
                      group_size=4, rewards={"exact_match": torch.tensor(rewards)})
    assert plugin.reshape_advantages(torch.zeros(4), Ctx(rollout=rollout)) is None
    return prompts, rollout


def test_a_group_reads_its_candidates_and_attribution_updates_each_record():
    plugin = seeded_plugin()
    prompts, rollout = sampled(plugin, [0.0, 1.0, 1.0, 0.0])
    assert prompts[:2] == [PROMPT, PROMPT]  # the plain rows
    assert prompts[2] == SOLUTION + "\n\n" + PROMPT and prompts[3].startswith("2 + 4 = 6")
    # gaps: own 1 - 1/3, other 0 - 2/3; utility 0 -> half of each
    assert plugin.library.get("own").utility == pytest.approx((1 - 1 / 3) / 2)
    assert plugin.library.get("other").utility == pytest.approx(-1 / 3)
    # The plain rows' teacher sees the record that helped; the reading rows are not distilled.
    assert rollout.columns[MEMORY] == [SOLUTION + "\n\n"] * 2 + [None, None]
    assert plugin.distilled_rows(rollout) == [0, 1]
    # The correct rows are written (once each), the others are not.
    written = [r for r in plugin.library if r.key not in ("own", "other")]
    assert sorted(r.completion for r in written) == ["c1", "c2"]
    assert all(r.prompt_ids == [1] for r in written)  # the reading row's trial is filed under the bare prompt
    # The next round: "other" fell below min_utility and is no longer a candidate.
    assert "other" not in [r.key for r in candidates(plugin.library, PROMPT, 5, plugin.config.min_utility)]


def test_a_teacher_sees_no_memory_where_none_helped():
    plugin = seeded_plugin()
    _, rollout = sampled(plugin, [1.0, 1.0, 0.0, 0.0])  # both records' rows failed where the plain rows succeeded
    assert plugin.library.get("own").utility < 0 and plugin.library.get("other").utility < 0
    assert rollout.columns[MEMORY] == ["", "", None, None]


def test_evaluation_reads_no_memory():
    plugin = seeded_plugin()
    assert plugin.transform_prompts([PROMPT] * 4, Ctx(group_size=4, rollout_columns={}, training=False)) is None


def test_a_resumed_plugin_retrieves_the_same_records_with_their_utilities(tmp_path):
    plugin = seeded_plugin()
    sampled(plugin, [0.0, 1.0, 1.0, 0.0])
    torch.save(plugin.state_dict(), tmp_path / "state.pt")
    resumed = make_plugin("opdevolver", record_template="{completion}\n\n")
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    ctx = Ctx(group_size=4, rollout_columns={})
    assert resumed.transform_prompts([PROMPT] * 4, ctx) == plugin.transform_prompts([PROMPT] * 4, ctx)
    assert [(r.key, r.utility) for r in resumed.library] == [(r.key, r.utility) for r in plugin.library]
    with pytest.raises(Exception, match="opdevolver.experience.capacity must be at least 1"):
        make_plugin("opdevolver", experience=ExperienceSettings(capacity=0))
