"""SPC's mechanism on the built-in task: how one step's game scores the sneaky generator's corruptions and the
critic's checks against a validity and truth worked out here, and held-out judging after training, against plain
GRPO on the answers SPC never reads.

``signal(seed)``: one step of the CPU recipe (configs/recipes/spc-cpu.yaml, stackrl/arith-roles, label-free); over
its rollout, each corruption's validity from ``stackrl.tasks.wrong_lines`` and each judged attempt's truth from it
(one wrong line: a corruption; none: the right solution), here, apart from the plugin:

- ``sneaky``: counts of the sneaky rows by kind, ``invalid``, ``fooled`` (valid, the plugin's critic verdict not
  "wrong") and ``caught`` (valid, called wrong), and ``sneaky_reward_<kind>`` the mean reward of each (the game:
  -1, +1, -1) and ``sneaky_advantage_<kind>`` GRPO's mean advantage;
- ``critic``: counts of the critic rows by ``caught``/``deceived`` (a corruption called wrong / not) and
  ``accepted``/``rejected`` (the right solution called correct / not), and ``critic_reward_<kind>`` (+1, -1, +1, -1);
- ``game_rule_holds``: no critic row judges what is neither (``unplayable``), and every row's reward is the one the game gives it from this validity and truth.

``main``: trains the recipe and plain GRPO (exact_match, answers shown) for ``--steps`` at each seed and measures
held-out pass@1 and judging (``stackrl.testing.judging.heldout``):

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python plugins/spc/benchmarks/mechanism.py --seeds 0 1 2

(``--signal`` prints the one-step figures at each seed instead.)
"""

from __future__ import annotations

from pathlib import Path

HELD_OUT = ("pass@1", "judge")
GAME = {("sneaky", "invalid"): -1.0, ("sneaky", "fooled"): 1.0, ("sneaky", "caught"): -1.0,  # each kind's reward
        ("critic", "caught"): 1.0, ("critic", "deceived"): -1.0, ("critic", "accepted"): 1.0, ("critic", "rejected"): -1.0}


def kinds(rollout, verdicts) -> dict[int, str]:
    """Each game row's kind, from the validity and truth worked out here and the verdict that decided it."""
    from stackrl.tasks import parse_verdict, wrong_lines

    roles, judged = rollout.columns["role"], rollout.columns["spc_judged"]
    out = {}
    for i in range(len(rollout)):
        question = rollout.prompts[i]
        if roles[i] == "corrupt":
            valid = wrong_lines(question, rollout.completions[i].strip()) == 1
            out[i] = "invalid" if not valid else "caught" if verdicts[i] is False else "fooled"
        elif judged[i] is not None:
            wrong, verdict = wrong_lines(question, judged[i]), parse_verdict(rollout.completions[i])
            out[i] = ("caught" if verdict is False else "deceived") if wrong == 1 else \
                ("accepted" if verdict is True else "rejected") if wrong == 0 else "unplayable"  # not in the game
    return out


def game_signal(rollout, verdicts, name: str = "spc") -> dict:
    """The figures the module's doc lists, over one rollout of the plugin and its verdicts per row."""
    rewards, advantages, roles = rollout.rewards[name], rollout.advantages, rollout.columns["role"]
    kind = kinds(rollout, verdicts)
    found: dict = {"sneaky": {}, "critic": {}}
    for name_side, names in (("sneaky", ("invalid", "fooled", "caught")),
                        ("critic", ("caught", "deceived", "accepted", "rejected"))):
        for k in names:
            rows = [i for i, v in kind.items() if v == k and (roles[i] == "corrupt") == (name_side == "sneaky")]
            found[name_side][k] = len(rows)
            if rows:
                found[f"{name_side}_reward_{k}"] = sum(rewards[i].item() for i in rows) / len(rows)
                found[f"{name_side}_advantage_{k}"] = advantages[rows].mean().item()
    side = lambda i: "sneaky" if roles[i] == "corrupt" else "critic"  # noqa: E731
    found["game_rule_holds"] = all(rewards[i].item() == GAME.get((side(i), k)) for i, k in kind.items())
    return found


def signal(seed: int = 0, folder: Path | None = None, overrides=()) -> dict:
    """One step of the CPU recipe at ``seed``; :func:`game_signal` of its rollout."""
    import tempfile

    from stackrl.testing.benchmark import one_thread
    from stackrl.testing.fixtures import train_steps
    from stackrl.testing.judging import load

    with tempfile.TemporaryDirectory() as tmp, one_thread():
        config = load("spc", "spc", seed, 1, Path(folder or tmp), overrides)
        trainer = train_steps(config)
        return game_signal(trainer._rollouts["train"], trainer.plugins.plugins["spc"].last_verdicts)


def run(method: str, seed: int, steps: int, folder: Path, overrides=(), size: int = 200) -> dict:
    """Train the recipe (``spc``) or plain GRPO (``grpo``) for ``steps`` steps; held-out pass@1 and judging."""
    from stackrl.testing.benchmark import one_thread
    from stackrl.testing.judging import heldout_after

    with one_thread():
        return heldout_after("spc", method, seed, steps, folder, overrides, size)


def main() -> None:
    from stackrl.testing.benchmark import against_plain_grpo, signal_flag

    description = __doc__.split("\n\n")[0]
    if not signal_flag(description, signal):  # --signal: the one-step signal at each seed
        against_plain_grpo(description, "spc", run, HELD_OUT, steps=20, eval_size=200)


if __name__ == "__main__":
    main()
