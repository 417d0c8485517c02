"""The multi-party games (stackrl.blocks.env.party) through the runner: a row per seat, each seat's round pay on the
turn it played in that round."""

from __future__ import annotations

from stackrl.blocks.env import EnvSettings, Runner
from stackrl.testing.scripted import ScriptedPlayers


def contribute_first_round_only(model, text):
    """Each seat contributes in round 1, then keeps its coin."""
    return "move: C" if "round 1 of" in text.rstrip("\n").split("\n")[-3] else "move: D"


def test_public_goods_credits_each_seats_round_pay_to_its_turn_of_that_round():
    players = ScriptedPlayers(contribute_first_round_only)
    settings = EnvSettings(environment="public_goods", kwargs={"rounds": 4, "multiplier": 2.0}, max_turns=12,
                           max_tokens=1000, turn_tokens=32)
    samples = Runner(settings).run(["Prisoners dilemma. Play with move: C or move: D."] * 3,
                                   players.context(group_size=3))
    columns = samples.columns
    assert columns["env_seat"] == [0, 1, 2] and columns["env_end"] == ["done"] * 3
    # round 1: all contribute, pot 3 x 2 / 3 = 2 each; rounds 2-4: all keep, 1 each
    assert columns["env_turn_rewards"] == [[2.0, 1.0, 1.0, 1.0]] * 3 and columns["env_return"] == [5.0] * 3
    assert [len(s) for s in columns["segments"]] == [4, 4, 4]
    assert [m for _, m in columns["env_moves"][0]] == ["C"] * 3 + ["D"] * 9
