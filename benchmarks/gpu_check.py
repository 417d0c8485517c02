"""stackrl on one GPU at Qwen2.5-1.5B's size: step time, peak memory and tokens per second against plain TRL.

    bash benchmarks/gpu_check.sh --out DIR      # on a GPU machine (benchmarks/README.md: also one with no network)
    python benchmarks/gpu_check.py --dry-run    # every configuration, one step each, tiny and on the CPU

The model is a randomly initialised Qwen2 with Qwen2.5-1.5B's shape (28 layers, hidden 1536, MLP 8960, 12 query
and 2 key/value heads, tied embedding) and the built-in tokenizer's vocabulary, saved locally: nothing is
downloaded. Each precision stacks the repository's preset for that model (``configs/model/``) under the check's
own settings; the configurations of each precision train in alternating rounds of ``stackrl.testing.steptime``:

    plain   trl.GRPOTrainer with the exact_match reward: the baseline of every ratio
    host    StackTrainer, no plugin (the host's own cost)
    <name>  StackTrainer with one method plugin of each family (FAMILIES), its CPU recipe's settings
    stack   a realistic stack: a self-reward, a teacher signal and roles (STACK)

in bf16 (every configuration) and in 4-bit nf4 + LoRA (plain, host, stack; where bitsandbytes is installed).
Every precision runs one round; more rounds follow, in turn, while the last round of that precision fits in what
is left of ``--budget`` seconds. Printed per run and at the end as a table, and written to ``--out`` (JSON and the
table): median wall-clock step time after each run's warm-up step, its ratio to plain with the spread of the
per-round ratios, tokens per second (prompt and completion tokens TRL counted, over the step time) and the peak
GPU memory torch allocated. A random model rarely writes its end-of-sequence token, so steps generate nearly
``max_completion_length`` tokens; its rewards are mostly zero.

The dry run builds the same configurations on a tiny shape of the model and trains one step of each on the CPU;
what needs CUDA (peak GPU memory, and the GPU's kernels themselves) says so in its output.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Not installed (a GPU machine with no index to install from): run this checkout's source.
FROM_SOURCE = importlib.util.find_spec("stackrl") is None
if FROM_SOURCE:
    sys.path.insert(0, str(ROOT / "core"))

import stackrl.testing  # noqa: E402,F401  (offline environment, before transformers is imported)

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch  # noqa: E402
import yaml  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from stackrl.config import load_config  # noqa: E402
from stackrl.testing.repository import method_plugins, plugin_folders, use_projects  # noqa: E402
from stackrl.testing.steptime import Rounds, Variant  # noqa: E402

# Qwen2.5-1.5B's shape; the vocabulary is the built-in tokenizer's.
SHAPE = dict(
    hidden_size=1536,
    intermediate_size=8960,
    num_hidden_layers=28,
    num_attention_heads=12,
    num_key_value_heads=2,
    tie_word_embeddings=True,
    rms_norm_eps=1e-6,
    max_position_embeddings=2048,
)
DRY_SHAPE = {**SHAPE, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
TRAINER = {
    "per_device_train_batch_size": 64,  # 8 prompts x 8 completions
    "num_generations": 8,
    "max_completion_length": 128,
    "temperature": 1.0,
    "learning_rate": 1e-6,
    "beta": 0.0,
    "logging_steps": 1,
    "report_to": "none",
    "save_strategy": "no",
    "dataloader_num_workers": 0,
    "disable_tqdm": True,
    "seed": 0,
}
DRY_TRAINER = {"use_cpu": True, "per_device_train_batch_size": 8, "num_generations": 4, "max_completion_length": 8}
# One method plugin per family, each family named by the host block its methods share.
FAMILIES = {
    "covo": "self-derived rewards (stackrl.answers)",
    "rlsd": "teacher token signals (stackrl.blocks.teacher, stackrl.blocks.tokensignals)",
    "rise": "multi-turn and multi-role rollouts (stackrl.blocks.roles)",
    "sec": "prompt pool (stackrl.pool)",
    "eepo": "policy operations (stackrl.policy_ops)",
}
STACK = ("covo", "rlsd", "rise")
PRECISIONS = {  # name: (preset, configurations)
    "bf16": ("qwen2.5-1.5b-bf16.yaml", ("plain", "host", *FAMILIES, "stack")),
    "4bit-lora": ("qwen2.5-1.5b-4bit-lora.yaml", ("plain", "host", "stack")),
}
PACKAGES = ("stackrl", "torch", "transformers", "trl", "peft", "accelerate", "datasets", "bitsandbytes")


def build_model(folder: Path, shape: dict) -> int:
    """Save a random model of ``shape`` and the built-in tokenizer to ``folder``; returns the parameter count."""
    from transformers import AutoTokenizer, GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from stackrl.tasks import arith_tiny_path

    tokenizer = AutoTokenizer.from_pretrained(arith_tiny_path())
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **shape,
    )
    torch.manual_seed(0)
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # never hold a float32 copy of 1.5B parameters
    try:
        with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(default_dtype)
    model.generation_config = GenerationConfig(
        bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def variant(work: Path, precision: str, name: str, recipes: dict, trainer: dict, steps: int) -> Variant:
    """The configuration ``name`` of ``precision``: the model preset under a config file of the check's own, with
    the plugins' ``recipes`` (:func:`stackrl.testing.repository.method_plugins`)."""
    plugins = STACK if name == "stack" else (name,) if name in FAMILIES else ()
    tree = {
        "model": {"name_or_path": str(work / "model")},
        "data": {"source": "arithmetic", "size": 512, "seed": 0},
        "plugins": list(plugins),
        "rewards": {"exact_match": 1.0, **{p: recipes[p]["reward"] for p in plugins if recipes[p]["reward"]}},
        "trainer": {**TRAINER, **trainer, "max_steps": steps},
        "eval": {"before_and_after": False},
        "output_dir": str(work / "runs" / precision / name),
        **{p: recipes[p]["settings"] for p in plugins},
    }
    path = work / f"{precision}-{name}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    config = load_config([ROOT / "configs" / "model" / PRECISIONS[precision][0], path])
    return Variant(config) if name == "plain" else Variant(config, config.plugins)


def figures(rounds: Rounds, gpu: bool) -> dict:
    """Per configuration: its plugins and figures, ratios against plain."""
    found = {}
    for name, v in rounds.variants.items():
        if not rounds.pooled[name]["wall"]:
            continue
        peak = rounds.peak_memory.get(name)
        found[name] = {
            "plugins": list(v.config.plugin_classes) if v.plugins else [],
            "family": FAMILIES.get(name),
            "rounds": len(rounds.per_round[name]["wall"]),
            "step_time_s": rounds.median(name, "wall"),
            "cpu_time_s": rounds.median(name, "cpu"),
            "ratio_vs_plain": rounds.ratio(name, "plain"),
            "ratio_spread": rounds.spread(name, "plain"),
            "cpu_ratio_vs_plain": rounds.ratio(name, "plain", "cpu"),
            "tokens_per_s": rounds.tokens_per_second(name),
            "peak_gpu_memory_gib": peak / 2**30 if gpu else None,
        }
    return found


def table(result: dict) -> str:
    """The short table: one line per precision and configuration."""
    lines = [
        f"gpu_check {result['date']} on {result['device']}; "
        + ", ".join(f"{p} {v}" for p, v in result["versions"].items()),
        f"model: Qwen2.5-1.5B's shape{' (tiny in a dry run)' if result['dry_run'] else ''}, "
        f"{result['model_parameters']:,} parameters; {result['settings']}",
        f"{'precision':<10} {'config':<6} {'s/step':>8} {'ratio':>6}  {'per-round ratios':<13} {'tokens/s':>9} "
        f"{'peak GiB':>8} {'rounds':>6}",
    ]
    for precision, entry in result["precisions"].items():
        if "skipped" in entry:
            lines.append(f"{precision:<10} skipped: {entry['skipped']}")
        for name, f in entry.get("configurations", {}).items():
            low, _, _, _, high = f["ratio_spread"]
            peak = "n/a" if f["peak_gpu_memory_gib"] is None else f"{f['peak_gpu_memory_gib']:.1f}"
            lines.append(
                f"{precision:<10} {name:<6} {f['step_time_s']:8.3f} {f['ratio_vs_plain']:6.3f}  "
                f"{low:.3f}-{high:.3f}   {f['tokens_per_s']:9.0f} {peak:>8} {f['rounds']:>6}"
            )
    lines += [f"not measured: {note}" for note in result["not_measured"]]
    return "\n".join(lines)


def versions() -> dict:
    found = {}
    for package in PACKAGES:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    found["cuda"] = torch.version.cuda or "none"
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny model on the CPU, one step per configuration")
    parser.add_argument("--out", help="folder for gpu_check.json and gpu_check.txt (written after every run)")
    parser.add_argument("--budget", type=float, default=450, help="seconds; no round starts that would pass it")
    parser.add_argument("--steps", type=int, default=3, help="steps per run, the first --warmup not timed")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=6, help="at most this many rounds per precision")
    opts = parser.parse_args(argv)
    if opts.dry_run:
        opts.steps, opts.warmup, opts.rounds = 1, 0, 1
    if opts.steps <= opts.warmup:
        parser.error("--steps must exceed --warmup")
    if not torch.cuda.is_available() and not opts.dry_run:
        parser.error("no GPU here: run with --dry-run, or on a machine with one")
    gpu = not opts.dry_run  # a dry run trains on the CPU, also where there is a GPU
    if FROM_SOURCE:
        folders = plugin_folders(ROOT)
        use_projects([ROOT, *(folders[name] for name in FAMILIES)])
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    started = time.perf_counter()
    out = Path(opts.out) if opts.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)

    not_measured = ["vLLM generation, 8-bit, several GPUs: not part of this check (benchmarks/README.md)"]
    if not gpu:
        not_measured.append("peak GPU memory and the GPU's own kernels (bf16 matmuls, bitsandbytes' CUDA 4-bit) "
                            "need CUDA; this dry run trained on the CPU")
    precisions = dict(PRECISIONS)
    if importlib.util.find_spec("bitsandbytes") is None:
        not_measured.append("4bit-lora: bitsandbytes is not installed")
        precisions.pop("4bit-lora")
    trainer = DRY_TRAINER if opts.dry_run else {}
    settings = {**TRAINER, **trainer}
    result = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "device": torch.cuda.get_device_name() if gpu else "CPU (dry run)",
        "dry_run": opts.dry_run,
        "versions": versions(),
        "settings": (f"batch {settings['per_device_train_batch_size']} ({settings['num_generations']} completions "
                     f"a prompt), {settings['max_completion_length']} completion tokens at most; {opts.steps} step(s) "
                     f"a run, {opts.warmup} of them a warm-up, not timed"),
        "precisions": {p: {"skipped": "bitsandbytes is not installed"} for p in PRECISIONS if p not in precisions},
        "not_measured": not_measured,
    }

    def write(line: str | None = None) -> None:
        """Progress on stdout; the figures so far to --out, so a run stopped early leaves what it measured."""
        if line:
            print(f"[{time.perf_counter() - started:5.0f} s] {line}", flush=True)
        result["total_s"] = time.perf_counter() - started
        for precision, rounds in plans.items():
            result["precisions"][precision] = {"preset": f"configs/model/{PRECISIONS[precision][0]}",
                                               "configurations": figures(rounds, gpu)}
        if out:
            (out / "gpu_check.json").write_text(json.dumps(result, indent=1) + "\n")
            (out / "gpu_check.txt").write_text(table(result) + "\n")

    with tempfile.TemporaryDirectory(prefix="stackrl-gpu-check-") as tmp:
        work = Path(tmp)
        result["model_parameters"] = build_model(work / "model", DRY_SHAPE if opts.dry_run else SHAPE)
        recipes = method_plugins(ROOT)
        plans = {
            precision: Rounds(
                {name: variant(work, precision, name, recipes, trainer, opts.steps) for name in names},
                warmup=opts.warmup,
            )
            for precision, (_, names) in precisions.items()
        }
        write(f"model and {sum(len(r.variants) for r in plans.values())} configurations built")
        gc.freeze()  # what lives now lives to the end: the collections of every run's end need not walk it
        last = {}  # each precision's last round, in seconds
        deadline = started + opts.budget
        ran = True
        while ran:
            ran = False
            for precision, rounds in plans.items():
                if rounds.done >= opts.rounds or (rounds.done and last[precision] > deadline - time.perf_counter()):
                    continue
                begun = time.perf_counter()
                rounds.run(1, report=lambda line, p=precision: write(f"{p} {line}"))
                last[precision] = time.perf_counter() - begun
                ran = True
    write("done")
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
