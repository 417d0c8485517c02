"""Peak memory and time of TRACE's distill step: span-only KL (25% of tokens) against all-token KL.

Both variants run the plugin's own distill step (teacher forward, student forward with gradient, the clipped KL,
its normalisation, backward) on the same batch of a random Qwen2 with a realistic vocabulary and a small hidden
size, so the vocabulary logits dominate. "span" scores at a quarter of each response's positions
(``score(positions=...)``); "all" scores every position, as an all-token self-distillation does.

Memory: each variant runs in a fresh process. After building the model and a small warm-up step, the process's
peak resident set size (VmHWM) is reset through /proc/self/clear_refs, the step runs, and the new peak minus the
resident size just before the step is the step's peak memory. A fresh process keeps freed memory of one variant
from being reused by the other; resetting the peak keeps model building out of the figure. Time: the median of
three steps.

    OMP_NUM_THREADS=1 .venv/bin/python plugins/trace/benchmarks/memory.py [--vocab 65536 --rows 4 --length 256]

Prints one line per variant and last ``trace_memory_ratio: X`` (span-only / all-token peak memory).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COVERAGE = 0.25
SPAN_LENGTH = 16  # tokens per span: a quarter of each response in spans of this length, spread over it


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _build(args, folder: Path):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from stackrl.run import build_trainer
    from stackrl.tasks.arithmetic import make_dataset
    from stackrl.testing.tiny import tiny_config
    from stackrl.tiny import train_tokenizer

    rows = make_dataset(split="train", size=200, seed=0)
    tokenizer = train_tokenizer([q + s for q, s in zip(rows["question"], rows["solution"])], vocab_size=256)
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=args.vocab, hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=1024, tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    Qwen2ForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    trace = {"spans": "rule", "span_pattern": ".", "teacher_template": "{solution}\n\n{prompt}", "teacher": "policy"}
    return build_trainer(tiny_config(folder, ["trace"], tmp_dir=folder, trace=trace)), tokenizer


def _batch(args, tokenizer, rows: int, length: int):
    import torch

    from stackrl import Rollout
    from stackrl_trace import RowSpans

    generator = torch.Generator().manual_seed(1)
    ids = lambda n: torch.randint(10, len(tokenizer), (n,), generator=generator).tolist()  # noqa: E731
    rollout = Rollout(
        prompts=["What is 2 + 3?\n"] * rows, completions=[""] * rows, prompt_ids=[ids(32) for _ in range(rows)],
        completion_ids=[ids(length) for _ in range(rows)], columns={"solution": ["2 + 3 = 5"] * rows}, group_size=rows,
    )
    if args.variant == "all":
        positions = list(range(length))
    else:  # spans of SPAN_LENGTH tokens at even intervals, COVERAGE of the response in all
        stride = int(SPAN_LENGTH / COVERAGE)
        positions = [s + t for s in range(0, length, stride) for t in range(SPAN_LENGTH) if s + t < length]
    spans = [RowSpans("key" if r % 2 else "error", positions, "a key step") for r in range(rows)]
    return rollout, spans


def _step(trainer, rollout, spans):
    from stackrl.policy import PolicyAccess
    from stackrl_trace import TraceConfig, span_divergence, span_loss

    config = TraceConfig(teacher_template="{solution}\n\n{prompt}")
    policy = PolicyAccess(trainer, sharded=False, model=trainer.model)
    divergence = span_divergence(policy, rollout, spans, config, teacher="policy", grad=True)
    loss = span_loss(divergence, spans, [len(c) for c in rollout.completion_ids], batch_rows=len(spans))
    loss.backward()
    trainer.model.zero_grad(set_to_none=True)


def run_variant(args) -> dict:
    import gc

    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        trainer, tokenizer = _build(args, Path(folder))
        _step(trainer, *_batch(args, tokenizer, rows=1, length=8))  # warm-up: lazy initialisation out of the figure
        rollout, spans = _batch(args, tokenizer, rows=args.rows, length=args.length)
        gc.collect()
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak resident set size
        before = _status_kb("VmRSS")
        start = time.perf_counter()
        _step(trainer, rollout, spans)
        times = [time.perf_counter() - start]
        peak = _status_kb("VmHWM") - before
        for _ in range(2):
            start = time.perf_counter()
            _step(trainer, rollout, spans)
            times.append(time.perf_counter() - start)
    return {
        "variant": args.variant, "positions": sum(len(s.positions) for s in spans),
        "peak_mib": peak / 1024, "seconds": statistics.median(times),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=65536)
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--variant", choices=("span", "all"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(run_variant(args)))
        return
    results = {}
    for variant in ("span", "all"):
        command = [sys.executable, __file__, "--variant", variant, "--vocab", str(args.vocab),
                   "--rows", str(args.rows), "--length", str(args.length)]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        results[variant] = json.loads(out.strip().splitlines()[-1])
        r = results[variant]
        print(f"{variant:>4}: {r['positions']} positions, peak {r['peak_mib']:.0f} MiB, {r['seconds']:.2f} s per step")
    print(f"vocab {args.vocab}, {args.rows} rows x {args.length} tokens, coverage {COVERAGE:.0%}")
    print(f"trace_time_ratio: {results['span']['seconds'] / results['all']['seconds']:.3f}")
    print(f"trace_memory_ratio: {results['span']['peak_mib'] / results['all']['peak_mib']:.3f}")


if __name__ == "__main__":
    main()
