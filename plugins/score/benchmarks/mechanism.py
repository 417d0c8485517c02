"""SCoRe's mechanism on the built-in task: held-out self-correction rises against plain GRPO.

Trains configs/recipes/score-cpu.yaml (stackrl/arith-skills) and the same recipe without the plugin (plain GRPO on
exact_match of a single attempt), for the same steps and seeds, and measures the untrained and each trained model
with ``eval.skill: repair``: the model's own sampled first attempts at held-out problems, each retried after the
built-in retry instruction. ``net`` is (wrong -> right minus right -> wrong) over all problems, the quantity SCoRe
raises; ``fix`` and ``keep`` are its two halves.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/score/benchmarks/mechanism.py --seeds 0 1 2 --steps 30
"""

from stackrl.testing.benchmark import self_correcting

if __name__ == "__main__":
    self_correcting(__doc__.split("\n\n")[0], "score")
