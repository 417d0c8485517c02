"""sirlc's mechanism on the built-in judging model: label-free training on its judgements of its own solutions.

Trains configs/recipes/sirlc-cpu.yaml (stackrl/arith-skills, label-free) and plain GRPO on the answers the plugin
never sees, for the same steps and seeds, and prints for each run the held-out pass@1 and judging balanced
accuracy after training, how the plugin's judgements tracked the hidden answers over training (AUROC across the
batch and within groups, the share of groups they split, malformed share) and the share of groups with a reward
spread; the untrained model first, the means last (stackrl.testing.judging.benchmark).

    OMP_NUM_THREADS=1 .venv/bin/python plugins/sirlc/benchmarks/mechanism.py --seeds 0 1 2 --steps 20
"""

from stackrl.testing.judging import benchmark

if __name__ == "__main__":
    benchmark("sirlc", __doc__.split("\n\n")[0])
