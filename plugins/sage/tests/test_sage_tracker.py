"""SAGE-light's per-prompt hint level, moved by each visit's accuracy."""

from stackrl_sage.tracker import LevelTracker


def test_first_visit_has_no_hint():
    assert LevelTracker(0.1, 0.35).level("unseen") == 0


def test_failing_prompts_climb_to_the_top_level_and_stay():
    tracker = LevelTracker(0.1, 0.35)
    levels = []
    for _ in range(5):
        tracker.update("p", tracker.level("p"), 0.0)
        levels.append(tracker.level("p"))
    assert levels == [1, 2, 3, 3, 3]


def test_thresholds_up_at_or_below_hold_between_down_above():
    tracker = LevelTracker(0.1, 0.35)
    tracker.update("p", 2, 0.1)  # at the lower threshold: up
    assert tracker.level("p") == 3
    tracker.update("p", 3, 0.35)  # at the upper threshold: hold
    assert tracker.level("p") == 3
    tracker.update("p", 3, 0.2)  # between: hold
    assert tracker.level("p") == 3
    tracker.update("p", 3, 0.375)  # above: down
    assert tracker.level("p") == 2


def test_the_next_level_follows_the_level_shown_not_the_level_due():
    tracker = LevelTracker(0.1, 0.35)
    tracker.levels["p"] = 2
    tracker.update("p", 0, 0.0)  # due level 2, shown without a hint (no hint could be written), failed
    assert tracker.level("p") == 1
    tracker.update("p", 0, 0.2)  # shown without a hint again, accuracy in between: stays at what was shown
    assert tracker.level("p") == 0


def test_solved_prompts_step_down_to_no_hint_and_stay():
    tracker = LevelTracker(0.1, 0.35)
    tracker.levels["p"] = 2
    levels = []
    for _ in range(3):
        tracker.update("p", tracker.level("p"), 1.0)
        levels.append(tracker.level("p"))
    assert levels == [1, 0, 0]


def test_prompts_are_tracked_apart():
    tracker = LevelTracker(0.1, 0.35)
    tracker.update("hard", 0, 0.0)
    tracker.update("easy", 0, 0.9)
    assert (tracker.level("hard"), tracker.level("easy"), len(tracker)) == (1, 0, 2)
