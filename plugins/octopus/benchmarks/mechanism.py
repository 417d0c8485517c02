"""Octopus's mechanism on the built-in task: held-out self-correction against plain GRPO at equal steps.

Trains configs/recipes/octopus-cpu.yaml (stackrl/arith-skills) and the same recipe without the plugin (plain GRPO on
exact_match of a single attempt, every row sampled), for the same steps and seeds, and measures the untrained and
each trained model with ``eval.skill: repair``: the model's own sampled first attempts at held-out problems, each
retried after the built-in retry instruction (the recipe's marker). ``net`` is (wrong -> right minus right -> wrong)
over all problems, ``fix`` and ``keep`` its halves, ``first`` the first attempts' accuracy. The Octopus runs sample
half the rows plain GRPO samples.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/octopus/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from stackrl.testing.benchmark import self_correcting

if __name__ == "__main__":
    self_correcting(__doc__.split("\n\n")[0], "octopus")
