"""stackrl at realistic size on one GPU with no internet: 4-bit + LoRA, every landed plugin stacked, against plain TRL.

    bash benchmarks/gpu_check.sh                  # on the GPU machine (under 8 minutes on one H100/H200)
    python benchmarks/gpu_check.py --dry-run      # builds everything, runs no step; works on a CPU

The model is a randomly initialised Qwen2 with Qwen2.5-1.5B's shape (28 layers, hidden 1536, MLP 8960, 12 query
and 2 key/value heads, tied embedding) and the built-in tokenizer's vocabulary, saved locally: nothing is
downloaded. Each variant loads it through the host's loader in 4-bit (nf4, double quantization) with a LoRA adapter
(r 16, all linear layers), and trains ``--steps`` steps on the built-in task:

    transformers/plain   trl.GRPOTrainer with the exact_match reward
    transformers/stack   StackTrainer with every method plugin installed from plugins/ (with its CPU recipe's
                         settings) and the test plugins that touch every stage
    vllm/plain, vllm/stack   the same with vLLM in colocate mode (skipped, with a message, where vLLM is absent)
    transformers/host    StackTrainer, no plugin (the host's own cost)

Each variant runs in a fresh process, so its peak memory is its own and vLLM starts once per process. Printed, one
``name: value`` a line: median step time after the first (warm-up) step, tokens per second (prompt + completion
tokens TRL counted, over the step time), peak GPU memory allocated by torch, and the step-time ratios
stack/plain and host/plain per generation engine. A random model writes full-length completions, so every step
generates the same number of tokens; its rewards are zero, so a plugin such as sage that acts on failed groups
does its most work here.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import stackrl.testing  # noqa: F401  (offline environment, before transformers is imported)

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch  # noqa: E402
import yaml  # noqa: E402
from transformers import PrinterCallback  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from overhead import StepClock, exact_match_reward  # noqa: E402

from stackrl.testing.repository import method_plugins, use_fixture_plugins  # noqa: E402

# Qwen2.5-1.5B's shape; the vocabulary is the built-in tokenizer's.
SHAPE = dict(
    hidden_size=1536,
    intermediate_size=8960,
    num_hidden_layers=28,
    num_attention_heads=12,
    num_key_value_heads=2,
    tie_word_embeddings=True,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    max_position_embeddings=2048,
)
QLORA = {
    "dtype": "bfloat16",
    "quantization": 4,
    "quant_type": "nf4",
    "double_quant": True,
    "lora": {"r": 16, "alpha": 32, "dropout": 0.05, "target_modules": "all-linear"},
}
TRAINER = {
    "bf16": True,
    "gradient_checkpointing": True,
    "per_device_train_batch_size": 16,
    "num_generations": 8,
    "max_completion_length": 128,
    "learning_rate": 1e-5,
    "logging_steps": 1,
    "report_to": "none",
    "save_strategy": "no",
    "dataloader_num_workers": 0,
    "disable_tqdm": True,
    "seed": 0,
}
CPU_TRAINER = {"use_cpu": True, "bf16": False}  # --dry-run on a machine without a GPU
VLLM = {"use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.3, "vllm_max_model_length": 512}
TEST_STACK = ["prompt_suffix", "digit_reward", "group_rank", "token_decay", "logp_loss", "step_counter"]
# In order of what the check is for; the host's bare cost last (the script stops at 8 minutes whatever is left).
VARIANTS = ("transformers/plain", "transformers/stack", "vllm/plain", "vllm/stack", "transformers/host")


def build_model(folder: Path) -> int:
    """Save the random model and the built-in tokenizer to ``folder``; returns the parameter count."""
    from transformers import AutoTokenizer, GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from stackrl.tasks import arith_tiny_path

    tokenizer = AutoTokenizer.from_pretrained(arith_tiny_path())
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **SHAPE,
    )
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # never hold a float32 copy of 1.5B parameters
    try:
        with torch.device(device):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(default_dtype)
    model.generation_config = GenerationConfig(
        bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def write_config(work: Path, variant: str, model_dir: Path, steps: int) -> Path:
    """The run config of ``variant``, as a YAML file the host loads like any user's."""
    engine, kind = variant.split("/")
    methods = method_plugins(ROOT) if kind == "stack" else {}
    trainer = {**TRAINER, "max_steps": steps, **(VLLM if engine == "vllm" else {})}
    if not torch.cuda.is_available():
        trainer.update(CPU_TRAINER)
    tree = {
        "model": {"name_or_path": str(model_dir), **QLORA},
        "data": {"source": "arithmetic", "size": 512, "seed": 0},
        "plugins": [*methods, *TEST_STACK] if kind == "stack" else [],
        "rewards": {"exact_match": 1.0, **{n: m["reward"] for n, m in methods.items() if m["reward"] is not None}},
        "trainer": trainer,
        "eval": {"before_and_after": False},
        "output_dir": str(work / "runs" / variant.replace("/", "-")),
        **{name: m["settings"] for name, m in methods.items()},
    }
    path = work / f"{variant.replace('/', '-')}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return path


def build_trainer(config_file: Path, plain: bool):
    """A trainer for the config: stackrl's, or plain TRL's on the same model, data, arguments and reward."""
    from trl import GRPOTrainer

    from stackrl.config import load_config
    from stackrl.data import load_prompts
    from stackrl.modeling import load_model, load_tokenizer
    from stackrl.run import build_trainer as build_stack_trainer
    from stackrl.run import grpo_args

    config = load_config([config_file])
    if not plain:
        return build_stack_trainer(config), config
    model, peft_config = load_model(config.host.model, torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    trainer = GRPOTrainer(
        model=model,
        args=grpo_args(config),
        processing_class=load_tokenizer(config.host.model),
        train_dataset=load_prompts(config.host.data),
        reward_funcs=[exact_match_reward],
        peft_config=peft_config,
    )
    return trainer, config


def run_variant(config_file: Path, variant: str, dry_run: bool) -> dict:
    """Train one variant in this process; its figures."""
    trainer, config = build_trainer(config_file, plain=variant.endswith("/plain"))
    plugins = list(config.plugin_classes)
    if dry_run:
        trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
        return {"built": type(trainer).__name__, "plugins": plugins, "trainable_parameters": trainable}
    clock = StepClock()
    trainer.add_callback(clock)
    trainer.remove_callback(PrinterCallback)  # disable_tqdm=True would print every log dict
    gpu = torch.cuda.is_available()  # without one (a CPU smoke run of a variant) there is no memory figure
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    counted = [entry["num_tokens"] for entry in trainer.state.log_history if "num_tokens" in entry]
    tokens = [b - a for a, b in zip([0, *counted], counted)]
    timed = slice(1, None)  # the first step warms up (kernels, allocator, vLLM's graphs)
    step_time = statistics.median(clock.wall[timed])
    return {
        "plugins": plugins,
        "step_time_s": step_time,
        "tokens_per_s": statistics.median(tokens[timed]) / step_time,
        "peak_gpu_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if gpu else "n/a",
    }


def _in_fresh_process(work: Path, variant: str, config_file: Path, dry_run: bool) -> dict | None:
    """The variant's figures from a child process, whose output goes to a log file; ``None`` if it failed."""
    stem = work / variant.replace("/", "-")
    cmd = [sys.executable, __file__, "--variant", variant, "--config", str(config_file), "--result", f"{stem}.json"]
    with open(f"{stem}.log", "w") as log:
        done = subprocess.run([*cmd, *(["--dry-run"] if dry_run else [])], stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        print(f"{variant}: failed (exit {done.returncode}); the end of {stem}.log:")
        print("".join(Path(f"{stem}.log").read_text().splitlines(True)[-30:]), flush=True)
        return None
    return json.loads(Path(f"{stem}.json").read_text())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="build the model, configs and trainers; no step")
    parser.add_argument("--steps", type=int, default=3, help="steps per variant, the first one a warm-up")
    parser.add_argument("--work", help="folder for the model and runs (default: a temporary one)")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # one variant, in a child process
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)

    if opts.variant:
        result = run_variant(Path(opts.config), opts.variant, opts.dry_run)
        Path(opts.result).write_text(json.dumps(result))
        return 0
    if opts.steps < 2:
        parser.error("--steps must be at least 2: the first step is a warm-up")
    if not opts.dry_run and not torch.cuda.is_available():
        parser.error("no GPU here: run with --dry-run, or on a machine with one")
    use_fixture_plugins(ROOT)  # the test plugins of TEST_STACK, for the variants' processes too

    with tempfile.TemporaryDirectory(prefix="stackrl-gpu-check-") as tmp:
        work = Path(opts.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        model_dir = work / "model"
        print(f"model_parameters: {build_model(model_dir)}", flush=True)
        print(f"model_built_s: {time.perf_counter() - started:.1f}", flush=True)
        print(f"gpu: {torch.cuda.get_device_name() if torch.cuda.is_available() else 'none (dry run)'}")
        has_vllm = importlib.util.find_spec("vllm") is not None
        results = {}
        for variant in VARIANTS:
            if variant.startswith("vllm/") and not has_vllm:
                print(f"{variant}: skipped (vLLM is not installed: pip install 'stackrl[vllm]')", flush=True)
                continue
            config_file = write_config(work, variant, model_dir, opts.steps)
            result = _in_fresh_process(work, variant, config_file, opts.dry_run)
            if result is None:
                continue
            results[variant] = result
            print(f"{variant}/plugins: {','.join(result['plugins']) or 'none'}")
            for name, value in result.items():
                if name != "plugins":
                    print(f"{variant}/{name}: {f'{value:.4g}' if isinstance(value, float) else value}")
            sys.stdout.flush()
        if not opts.dry_run:
            for engine in ("transformers", "vllm"):
                plain = results.get(f"{engine}/plain")
                for kind in ("stack", "host"):
                    mine = results.get(f"{engine}/{kind}")
                    if plain and mine:
                        ratio = mine["step_time_s"] / plain["step_time_s"]
                        print(f"{engine}/step_time_ratio_{kind}_vs_plain: {ratio:.4f}")
        print(f"total_s: {time.perf_counter() - started:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
