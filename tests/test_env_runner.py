"""The environment runner (stackrl.blocks.env) with a scripted policy against deterministic environments: the exact
token layout and masks, caps and budget, replay from the seed, seats, TRL-style environments, and bad input."""

from __future__ import annotations

import pytest

from stackrl import ConfigError
from stackrl.blocks.env import (
    END_COLUMN, MOVES_COLUMN, RETURN_COLUMN, SEED_COLUMN, TURN_REWARDS_COLUMN, EnvSettings, Runner, episode_layout,
    replay, turn_examples,
)
from stackrl.blocks.env.layout import with_observation
from stackrl.errors import PluginError
from stackrl.testing.scripted import ScriptedPlayers

EOS = 9


def seat_script(replies: dict[str, list[str]]):
    """A player whose reply depends on the last line of its context (``you: X``), each key's replies in turn."""
    queues = {key: list(texts) for key, texts in replies.items()}

    def play(model, text):
        key = next(k for k in queues if text.rstrip().endswith(k))
        return queues[key].pop(0)

    return play


def tictactoe(**settings):
    players = ScriptedPlayers(seat_script({"you: X": ["move: 1", "move: 2", "move: 3"], "you: O": ["move: 4", "move: 5"]}))
    samples = Runner(EnvSettings(environment="tictactoe", **settings)).run(["play"] * 2, players.context(group_size=2))
    return players, samples


def test_each_seat_row_is_its_actions_trained_and_the_observations_between_them_masked():
    players, samples = tictactoe()
    decode = players.tokenizer.decode
    assert decode(samples.prompt_ids[0]) == "play\n123\n456\n789\nyou: X\n"
    assert decode(samples.prompt_ids[1]) == "play\nX23\n456\n789\nyou: O\n"  # seat 1 starts at its first move
    assert decode(samples.completion_ids[0]) == (
        "move: 1\nX23\nO56\n789\nyou: X\nmove: 2\nXX3\nOO6\n789\nyou: X\nmove: 3\t"
    )
    for row, actions in ((0, ["move: 1", "move: 2", "move: 3"]), (1, ["move: 4", "move: 5"])):
        ids, mask = samples.completion_ids[row], samples.loss_mask[row]
        trained = "".join(chr(i) if i != EOS else "|" for i, m in zip(ids, mask) if m)
        assert trained == "".join(actions) + "|"  # every action, one eos at the very end, no observation token
        assert ids.count(EOS) == 1 and ids[-1] == EOS  # the eos of earlier turns is held back (pad = eos stays right)
        layout = episode_layout(players.tokenizer, samples.prompt_ids[row],
                                [(a, None) for a in actions], EOS)  # the observations come from the run:
        assert layout.packed()[0] != ids  # (a layout without them differs) ...
    seen = ["X23\nO56\n789\nyou: X", "XX3\nOO6\n789\nyou: X", None]
    layout = episode_layout(players.tokenizer, samples.prompt_ids[0], list(zip(["move: 1", "move: 2", "move: 3"], seen)), EOS)
    assert layout.packed()[:2] == (samples.completion_ids[0], samples.loss_mask[0])  # ... the same function lays them out


def test_seat_rewards_and_turn_rewards_follow_the_game():
    _, samples = tictactoe()
    assert samples.columns[RETURN_COLUMN] == [1.0, -1.0]
    assert samples.columns[TURN_REWARDS_COLUMN] == [[0.0, 0.0, 1.0], [0.0, -1.0]]  # X's win lands on O's last turn
    assert samples.columns[END_COLUMN] == ["done", "done"]
    assert samples.columns[MOVES_COLUMN][0] == [[0, "1"], [1, "4"], [0, "2"], [1, "5"], [0, "3"]]


def test_turn_examples_are_each_action_after_its_exact_context_with_eos():
    players, samples = tictactoe()
    contexts = [c for model, cs in players.asked for c in cs if c.startswith("play\n123")]  # what seat 0 was asked
    examples = turn_examples(samples.prompt_ids[0], samples.completion_ids[0], samples.columns["segments"][0], EOS)
    assert [players.tokenizer.decode(a) for _, a in examples] == ["move: 1\t", "move: 2\t", "move: 3\t"]
    assert [players.tokenizer.decode(c) for c, _ in examples] == contexts
    seen = ["X23\nO56\n789\nyou: X", "XX3\nOO6\n789\nyou: X", None]
    layout = episode_layout(players.tokenizer, samples.prompt_ids[0], list(zip(["move: 1", "move: 2", "move: 3"], seen)), EOS)
    assert turn_examples(layout.prompt_ids, *layout.packed()[::2], EOS) == examples


def test_turn_cap_ends_episodes_that_never_end():
    players = ScriptedPlayers(lambda model, text: "move: 1")
    samples = Runner(EnvSettings(environment=f"{__name__}:Endless", max_turns=3)).run(["go"], players.context(group_size=1))
    assert samples.columns[END_COLUMN] == ["turns"] and len(samples.columns[MOVES_COLUMN][0]) == 3
    assert players.logged["env/end/turns"] == 1.0


def test_token_budget_stops_a_row_before_it_passes_max_tokens():
    players = ScriptedPlayers(lambda model, text: "move: 1")
    samples = Runner(EnvSettings(environment=f"{__name__}:Endless", max_turns=50, max_tokens=40)).run(
        ["go"], players.context(group_size=1))
    assert samples.columns[END_COLUMN] == ["budget"]
    assert len(samples.completion_ids[0]) <= 40
    assert players.asked[-1][0] == "policy"


def test_long_observations_are_cut_and_counted():
    players = ScriptedPlayers(lambda model, text: "move: 1")
    samples = Runner(EnvSettings(environment=f"{__name__}:Endless", max_turns=2, observation_tokens=4)).run(
        ["go"], players.context(group_size=1))
    text = players.tokenizer.decode(samples.completion_ids[0])
    assert text == "move: 1\nxxxx\nmove: 1\t"  # Endless shows 100 x's
    assert players.logged["warnings/env/observations_cut"] == 2  # the first observation (prompt) and the second


def test_an_episode_replays_from_its_seed_and_moves():
    players = ScriptedPlayers(lambda model, text: "move: 2")
    settings = EnvSettings(environment="bandit", kwargs={"pulls": 4})
    samples = Runner(settings).run(["b"] * 2, players.context(group_size=2, step=3))
    outcomes = replay(settings, {"prompt": "b"}, samples.columns[SEED_COLUMN][0], samples.columns[MOVES_COLUMN][0])
    assert [o.rewards[0] for o in outcomes] == samples.columns[TURN_REWARDS_COLUMN][0]
    again = Runner(settings).run(["b"] * 2, ScriptedPlayers(lambda m, t: "move: 2").context(group_size=2, step=3))
    assert again.columns == samples.columns and again.completion_ids == samples.completion_ids
    later = Runner(settings).run(["b"] * 2, ScriptedPlayers(lambda m, t: "move: 2").context(group_size=2, step=4))
    assert later.columns[SEED_COLUMN] != samples.columns[SEED_COLUMN]  # a new step, new episodes


def test_scripted_and_snapshot_opponents_play_seats_that_are_not_rows():
    players = ScriptedPlayers(seat_script({"you: X": ["move: 5"] * 5, "you: O": ["move: 1"] * 5}))
    samples = Runner(EnvSettings(environment="tictactoe", seats=["policy", "snapshot:rival"])).run(
        ["p"] * 2, players.context(group_size=2))
    assert len(samples.completion_ids) == 2 and samples.columns["env_seat"] == [0, 0]  # one row per episode
    assert {model for model, _ in players.asked} == {"policy", "rival"}
    samples = Runner(EnvSettings(environment="kuhn_poker", seats=["scripted", "policy"], actions=r"(check|bet|call|fold)")).run(
        ["k"], ScriptedPlayers(lambda m, t: "call" if "bet" in t.splitlines()[-2] else "check").context(group_size=1))
    assert samples.columns["env_seat"] == [1] and samples.columns[END_COLUMN] == ["done"]
    assert samples.columns[MOVES_COLUMN][0][0][0] == 0  # the scripted seat moved first


class Lookup:
    """A user's TRL-style environment: reset(**row), a public method as a tool, get_reward()."""

    def reset(self, **row):
        self.key, self.found = row["key"], False
        return f"find {self.key}"

    def lookup(self, key: str) -> int:
        self.found = key == self.key
        return 42 if self.found else 0

    def get_reward(self) -> float:
        return 1.0 if self.found else 0.0


@pytest.mark.parametrize("grammar,call", [("tag", "<lookup>k7</lookup>"), ("tool_call", '<tool_call>{"name": "lookup", "arguments": {"key": "k7"}}</tool_call>')])
def test_a_trl_environment_runs_unchanged(grammar, call):
    players = ScriptedPlayers(lambda model, text: call if "42" not in text else "The answer is 42")
    samples = Runner(EnvSettings(environment=f"{__name__}:Lookup", actions=grammar, turn_tokens=80)).run(
        ["q"], players.context(group_size=1, columns={"key": ["k7"]}))
    assert players.tokenizer.decode(samples.prompt_ids[0]) == "q\nfind k7\n"
    assert players.tokenizer.decode(samples.completion_ids[0]) == f"{call}\n42\nThe answer is 42\t"
    assert samples.columns[RETURN_COLUMN] == [1.0] and samples.columns[END_COLUMN] == ["done"]


class Fragile(Lookup):
    """A tool that raises on some input and prints a long result on other input."""

    def lookup(self, key: str) -> str:
        if key == "bad":
            raise KeyError(key)
        return "y" * 100 if key == "all" else str(super().lookup(key))


def fragile(turns: list[str], **settings):
    queue = list(turns)
    players = ScriptedPlayers(lambda model, text: queue.pop(0))
    samples = Runner(EnvSettings(environment=f"{__name__}:Fragile", turn_tokens=80, **settings)).run(
        ["q"], players.context(group_size=1, columns={"key": ["k7"]}))
    return players, samples


def test_a_tool_that_raises_is_shown_its_error_and_the_episode_goes_on():
    players, samples = fragile(["<lookup>bad</lookup>", "<lookup>k7</lookup>", "The answer is 42"])
    assert players.tokenizer.decode(samples.completion_ids[0]) == (
        "<lookup>bad</lookup>\nerror: KeyError: 'bad'\n<lookup>k7</lookup>\n42\nThe answer is 42\t"
    )
    assert samples.columns[END_COLUMN] == ["done"] and samples.columns[RETURN_COLUMN] == [1.0]
    assert samples.columns["env_info"][0][0] == {"tool": "lookup", "tool_error": "raised KeyError: 'bad'"}
    assert players.logged["warnings/env/tool_errors"] == 1
    outcomes = replay(EnvSettings(environment=f"{__name__}:Fragile"), {"prompt": "q", "key": "k7"},
                      samples.columns[SEED_COLUMN][0], samples.columns[MOVES_COLUMN][0])
    assert [o.observation for o in outcomes] == ["error: KeyError: 'bad'", "42"]


def test_a_tool_that_raises_can_fail_the_episode_instead():
    with pytest.raises(PluginError, match=r"step 0, row 0 .*Fragile.lookup raised KeyError: 'bad'"):
        fragile(["<lookup>bad</lookup>"], on_tool_error="fail")
    players, samples = fragile(["<lookup>bad</lookup>"], on_tool_error="fail", on_error="end", penalty=-1.0)
    assert samples.columns[END_COLUMN] == ["error"] and samples.columns[RETURN_COLUMN] == [-1.0]
    assert players.logged["warnings/env/environment_errors"] == 1 and "warnings/env/tool_errors" not in players.logged


def test_a_long_tool_result_is_cut_to_the_observation_budget_and_counted():
    players, samples = fragile(["<lookup>all</lookup>", "The answer is 0"], observation_tokens=10)
    assert players.tokenizer.decode(samples.completion_ids[0]) == "<lookup>all</lookup>\nyyyyyyyyyy\nThe answer is 0\t"
    assert players.logged["warnings/env/observations_cut"] == 1  # the first observation, "find k7", is short


class Endless:
    """Never ends; shows a long observation."""

    def reset(self, **row):
        return "x" * 100

    def step(self, action):
        return "x" * 100, 0.0, False, {}


class Raising(Endless):
    def step(self, action):
        raise RuntimeError("board on fire")


class Numeric(Endless):
    def step(self, action):
        return 7, 0.0, False, {}


@pytest.mark.parametrize("env,problem", [("Raising", "step raised RuntimeError: board on fire"),
                                         ("Numeric", "step returned an observation of type int")])
def test_a_broken_environment_is_named_with_step_and_row(env, problem):
    players = ScriptedPlayers(lambda model, text: "move: 1")
    with pytest.raises(PluginError) as error:
        Runner(EnvSettings(environment=f"{__name__}:{env}")).run(["a", "b"], players.context(group_size=1, step=5))
    assert "step 5, row 0" in str(error.value) and problem in str(error.value)


def test_a_broken_environment_can_end_its_episode_counted_instead():
    players = ScriptedPlayers(lambda model, text: "move: 1")
    samples = Runner(EnvSettings(environment=f"{__name__}:Raising", on_error="end", penalty=-1.0)).run(
        ["a", "b"], players.context(group_size=1))
    assert samples.columns[END_COLUMN] == ["error", "error"] and samples.columns[RETURN_COLUMN] == [-1.0, -1.0]
    assert players.logged["warnings/env/environment_errors"] == 2


def test_unparseable_actions_raise_end_or_get_feedback():
    second_row_thinks = ScriptedPlayers(lambda model, text: "move: 1" if text.startswith("a") else "I will think")
    with pytest.raises(PluginError, match="step 0, row 1 .*no action in the turn 'I will think'"):
        Runner(EnvSettings(environment="bandit", on_unparsed="raise")).run(["a", "b"], second_row_thinks.context(group_size=1))
    players = ScriptedPlayers(lambda model, text: "I will think")
    samples = Runner(EnvSettings(environment="bandit", penalty=-0.5)).run(["a"], players.context(group_size=1))
    assert samples.columns[END_COLUMN] == ["unparsed"] and samples.columns[RETURN_COLUMN] == [-0.5]
    samples = Runner(EnvSettings(environment="bandit", on_unparsed="feedback", max_turns=2, unparsed_feedback="say move: N")).run(
        ["a"], players.context(group_size=1))
    assert players.tokenizer.decode(samples.completion_ids[0]) == "I will think\nsay move: N\nI will think\t"
    assert players.logged["warnings/env/unparsed_actions"] == 1 + 2


@pytest.mark.parametrize("settings,message", [
    ({"max_turns": 0}, "env.max_turns: must be at least 1"),
    ({"observation_template": "obs"}, "env.observation_template"),
    ({"actions": "(a)(b)"}, "env.actions: the regular expression '(a)(b)' has 2 groups"),
    ({"on_error": "ignore"}, "env.on_error"),
    ({"on_tool_error": "ignore"}, "env.on_tool_error: must be one of observe, fail"),
    ({"seats": ["scripted", "scripted"]}, "env.seats: no seat is the live policy's"),
])
def test_settings_are_checked(settings, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        EnvSettings(**settings)


@pytest.mark.parametrize("settings,message", [
    ({"environment": "chess"}, "env.environment: 'chess' is neither a built-in environment"),
    ({"environment": "tictactoe", "seats": ["policy"]}, "env.seats: lists 1 players; TicTacToe has 2 seats"),
    ({"environment": "tictactoe", "actions": "tag"}, "env.actions: 'tag' reads tool calls"),
    ({"environment": "calculator", "actions": "move"}, "use tag or tool_call"),
])
def test_environments_are_checked_against_the_settings(settings, message):
    with pytest.raises(ConfigError, match=message):
        Runner(EnvSettings(**settings))


def lowest_cell(env, rng) -> str:
    """A user's scripted opponent: the lowest free cell."""
    return env.legal_actions()[0]


def test_a_scripted_opponent_function_plays_its_seat():
    players = ScriptedPlayers(lambda model, text: "move: 5" if "5" in text.splitlines()[-3] else "move: 9")
    samples = Runner(EnvSettings(environment="tictactoe", seats=[f"{__name__}:lowest_cell", "policy"])).run(
        ["t"], players.context(group_size=1))
    assert [move for seat, move in samples.columns[MOVES_COLUMN][0] if seat == 0][:2] == ["1", "2"]
    assert players.tokenizer.decode(samples.prompt_ids[0]) == "t\nX23\n456\n789\nyou: O\n"


def test_a_row_with_less_room_keeps_only_the_sampled_prefix_that_fits():
    """One generate call serves rows with different room left: a row's action is cut to its own budget."""
    players = ScriptedPlayers(lambda model, text: "move: 1 " + "y" * 15 if text.startswith("a") else "move: 1")
    samples = Runner(EnvSettings(environment=f"{__name__}:Endless", max_turns=5, max_tokens=30, turn_tokens=30,
                                 observation_tokens=2)).run(["a", "b"], players.context(group_size=1))
    assert [len(ids) for ids in samples.completion_ids] == [30, 30]  # a: 23 + 4 + 3, cut; b: played on to the budget
    assert players.tokenizer.decode(samples.completion_ids[0]).endswith("\nxx\nmov")
    assert samples.columns[END_COLUMN] == ["budget", "budget"]


def test_rotated_seats_let_the_policy_move_first_in_every_other_episode():
    players = ScriptedPlayers(lambda model, text: "move: 5" if "5" in text.splitlines()[-3] else "move: 9")
    samples = Runner(EnvSettings(environment="tictactoe", seats=["policy", "scripted"], rotate_seats=True)).run(
        ["t"] * 4, players.context(group_size=4))
    assert samples.columns["env_seat"] == [0, 1, 0, 1]
    assert [moves[0][0] for moves in samples.columns[MOVES_COLUMN]] == [0, 0, 0, 0]  # seat 0 opens; the policy holds it in episodes 0 and 2
    assert [players.tokenizer.decode(p).endswith("you: X\n") for p in samples.prompt_ids] == [True, False, True, False]


def test_the_first_observation_ends_a_chat_prompt_s_last_message():
    prompt = [{"role": "system", "content": "Play."}, {"role": "user", "content": "Your board:"}]
    assert with_observation(prompt, "\n123\n") == [prompt[0], {"role": "user", "content": "Your board:\n123\n"}]
    assert prompt[1]["content"] == "Your board:"  # the dataset's prompt is left as it was


def test_an_episode_of_tool_calls_replays_from_its_moves():
    players = ScriptedPlayers(lambda model, text: "<lookup>k1</lookup>" if text.count("\n") < 6 else "done")
    settings = EnvSettings(environment=f"{__name__}:Lookup")
    samples = Runner(settings).run(["q"], players.context(group_size=1, columns={"key": ["k1"]}))
    moves = samples.columns[MOVES_COLUMN][0]
    assert moves == [[0, ["lookup", ["k1"], {}]]] * 2
    outcomes = replay(settings, {"prompt": "q", "key": "k1"}, samples.columns[SEED_COLUMN][0], moves)
    assert [o.observation for o in outcomes] == ["42", "42"]
