"""One process of a multi-process test run, launched through torchrun by tests/test_distributed.py and test_scale.py.

    python -m torch.distributed.run --nproc_per_node 2 tests/distributed_worker.py SPEC.json

SPEC.json holds ``model_dir``, ``out`` (a folder) and ``runs``: a list of ``{"name", "plugins", "sections"}``
(``sections`` merge over the tiny defaults of :func:`stackrl.testing.tiny.tiny_config`; with ``"job": true`` a run
is the whole ``stackrl train`` job and its report holds its evaluations only; ``"scripted_problems"`` scripts a
plugin's problem writing, :func:`stackrl.testing.scripted.script_problems`). The runs train one after
the other in the same processes (one launch pays the interpreter and import start-up once). For each run, each rank
writes ``<out>/<name>/rank<N>.json``: what ``group_rank`` saw (its ``seen`` list), every rollout its ``reward`` hook
was called with (prompts, completion ids, built-in rewards, its result), the final parameter hash and the global
step, the prompt pool's state (its generator left out), what ``snapshot_replay`` saw in the advantage stage and
``experience_keeper``'s library; and ``<out>/<name>/rank<N>-trainable.pt``, the trainable
parameters by name (a LoRA run's adapter).
Without torchrun (no ``RANK`` in the environment) it runs as one process; the tests also call :func:`run_one`
in-process for the single-process reference.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

NPROC = 2


def launch(model_dir, runs: list[dict], out: Path, nproc: int = NPROC) -> None:
    """Train ``runs`` in ``nproc`` CPU processes (gloo, one thread each) with one torchrun launch."""
    spec = Path(out) / "spec.json"
    spec.write_text(json.dumps({"model_dir": str(model_dir), "out": str(out), "runs": runs}))
    run_script(Path(__file__), str(spec), nproc=nproc, timeout=300)


def torchrun_env() -> dict[str, str]:
    """This process's environment for a torchrun launch on CPU: one thread, gloo, offline, no rank of its own."""
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",  # gloo on CPU even where a GPU exists
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "TRL_EXPERIMENTAL_SILENCE": "1",
    }
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    return env


def run_script(script: Path, *args: str, nproc: int = NPROC, timeout: int = 120) -> None:
    """Run the Python file ``script`` with ``args`` in ``nproc`` processes (torchrun on CPU), failing with their
    output if it fails."""
    # --standalone: the rendezvous store binds a port the system picks (localhost:0) and keeps it, so launches in
    # parallel test processes never race for one.
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc), str(script),
           *args]
    proc = subprocess.run(cmd, env=torchrun_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"torchrun failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}"


def single_process(model_dir, run: dict, folder: Path, batch: int) -> dict:
    """``run`` again in this process with the whole global ``batch`` on one rank and one thread, as the reference
    the multi-process run must match."""
    import torch

    single = json.loads(json.dumps(run))
    single["name"] = "single"
    single["sections"]["output_dir"] = str(Path(folder) / "single-run")
    single["sections"]["trainer"]["per_device_train_batch_size"] = batch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return run_one(str(model_dir), single, str(folder))
    finally:
        torch.set_num_threads(threads)


def reports(out: Path, name: str, nproc: int = NPROC) -> list[dict]:
    """Every rank's report of the run ``name``."""
    return [json.loads((Path(out) / name / f"rank{rank}.json").read_text()) for rank in range(nproc)]


def parameter_hash(model) -> str:
    """SHA-256 over every parameter's name and bytes, in name order."""
    import torch

    digest = hashlib.sha256()
    for name, param in sorted(model.named_parameters()):
        digest.update(name.encode())
        digest.update(param.detach().to(torch.float32).cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


class RewardCalls:
    """A plugin-manager monitor that keeps, for each ``group_rank`` reward call, the whole rollout it was given, and
    every other reward plugin's result."""

    def __init__(self):
        self.tokenizer = None
        self.calls = []
        self.others = []

    def __call__(self, hook, plugin, kwargs, result):
        if hook == "reward" and plugin != "group_rank":
            scores = [None if x is None else float(x) for x in result]  # None: a row the plugin does not score
            self.others.append({"step": kwargs["ctx"].step, "plugin": plugin, "result": scores})
        if hook != "reward" or plugin != "group_rank":
            return
        rollout = kwargs["ctx"].rollout
        self.calls.append(
            {
                "step": kwargs["ctx"].step,
                "group_size": rollout.group_size,
                "prompts": list(rollout.prompts),
                # what was generated from (after transform_prompts), decoded
                "prompt_texts": self.tokenizer.batch_decode(rollout.prompt_ids, skip_special_tokens=True),
                "completion_ids": [list(map(int, ids)) for ids in rollout.completion_ids],
                "builtin_rewards": {k: v.tolist() for k, v in rollout.rewards.items()},
                "roles": rollout.columns.get("role"),
                "result": [float(x) for x in result],
            }
        )


def run_one(model_dir: str, run: dict, out: str) -> dict:
    """Build the trainer for ``run``, train, and return (and write) this rank's report."""
    import stackrl.testing  # noqa: F401  (offline environment before transformers is imported)
    import torch
    from stackrl.run import build_trainer
    from stackrl.testing.tiny import tiny_config

    rank = int(os.environ.get("RANK", "0"))
    out = Path(out) / run["name"]
    # Each rank writes its own copy of the YAML: no two processes write one file.
    config = tiny_config(model_dir, run["plugins"], tmp_dir=out / f"config-rank{rank}", **run["sections"])
    if run.get("job"):  # the whole `stackrl train` job, evaluation before and after included
        from stackrl.run import train

        report = {"rank": rank, "evaluations": train(config)["evaluations"]}
        out.mkdir(parents=True, exist_ok=True)
        (out / f"rank{rank}.json").write_text(json.dumps(report))
        return report
    calls = RewardCalls()
    trainer = build_trainer(config, monitor=calls)
    if run.get("scripted_problems"):  # {"plugin", "texts": {step: [text, ...]}}: see stackrl.testing.scripted
        from stackrl.testing.scripted import script_problems

        script_problems(trainer, run["scripted_problems"]["plugin"], run["scripted_problems"]["texts"])
    calls.tokenizer = trainer.processing_class  # hooks run only once training starts
    trainer.train()
    plugins = trainer.plugins.plugins
    report = {
        "rank": rank,
        "process_index": trainer.accelerator.process_index,
        "world_size": trainer.accelerator.num_processes,
        "distributed_type": str(trainer.accelerator.distributed_type),
        "backend": str(getattr(trainer.accelerator.state, "backend", None)),
        "global_step": trainer.state.global_step,
        "seen": plugins["group_rank"].seen if "group_rank" in plugins else None,
        "reward_calls": calls.calls,
        "plugin_rewards": calls.others,
        "param_hash": parameter_hash(trainer.model),
        "steps_counted": plugins["step_counter"].steps if "step_counter" in plugins else None,
        "seen_in_loss": plugins["injected_turn"].seen_in_loss if "injected_turn" in plugins else None,
        "pool_drawn": plugins["pool_steer"].drawn if "pool_steer" in plugins else None,
        "replayed": plugins["snapshot_replay"].seen if "snapshot_replay" in plugins else None,
        "experience": plugins["experience_keeper"].summary() if "experience_keeper" in plugins else None,
        "pool": None if trainer.pool is None else {
            k: v for k, v in trainer.pool.state_dict().items() if k != "generator"
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / f"rank{rank}.json").write_text(json.dumps(report))
    trainable = {n: p.detach().float().cpu() for n, p in trainer.model.named_parameters() if p.requires_grad}
    torch.save(trainable, out / f"rank{rank}-trainable.pt")
    return report


if __name__ == "__main__":
    spec = json.loads(Path(sys.argv[1]).read_text())
    for one in spec["runs"]:
        run_one(spec["model_dir"], one, spec["out"])
    from stackrl.run import leave_process_group

    leave_process_group()
