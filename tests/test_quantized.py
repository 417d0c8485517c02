"""Acceptance: a 4-bit and an 8-bit quantized tiny model with LoRA train 2 steps through ``stackrl train`` on CPU;
a quantized model without LoRA is refused by ``stackrl config validate``.

bitsandbytes quantizes the tiny test model (hidden size 32) on CPU as it is: no larger model is needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from stackrl.cli import main
from stackrl.testing.tiny import TINY_TRAINER, build_tiny_model

STEPS = 2


@pytest.fixture(scope="module")
def quantizable_model_dir(tmp_path_factory):
    """The tiny model at hidden size 64: bitsandbytes' CPU 4-bit inference kernels (used when the run evaluates)
    need layers whose input width is a multiple of 64, as every real model's is."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-64"), hidden_size=64)


def _write_config(path, model_dir, output_dir, model: dict, **trainer) -> str:
    tree = {
        "model": {"name_or_path": str(model_dir), **model},
        "data": {"source": "arithmetic", "size": 32, "seed": 0},
        "plugins": ["digit_reward"],  # varies even for a random model, so advantages and LoRA gradients are non-zero
        "rewards": {"exact_match": 1.0},
        "trainer": {**TINY_TRAINER, **trainer},
        "output_dir": str(output_dir),
    }
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return str(path)


@pytest.mark.parametrize("bits", [4, 8])
def test_quantized_lora_trains_two_steps_through_the_cli(bits, quantizable_model_dir, tmp_path, capsys):
    import bitsandbytes as bnb

    from stackrl.config import load_config
    from stackrl.modeling import load_model

    out = tmp_path / "run"
    config = _write_config(
        tmp_path / "quant.yaml",
        quantizable_model_dir,
        out,
        model={"quantization": bits, "lora": {"r": 8}},
        max_steps=STEPS,
        save_strategy="steps",
        save_steps=STEPS,
    )

    # The host's loader really quantizes the tiny model (hidden size 32) on CPU.
    model, peft_config = load_model(load_config([config]).host.model, torch.device("cpu"))
    layer = bnb.nn.Linear4bit if bits == 4 else bnb.nn.Linear8bitLt
    assert sum(isinstance(m, layer) for m in model.modules()) == 14  # 7 linear layers x 2 decoder layers
    assert peft_config is not None and peft_config.r == 8
    del model

    assert main(["train", config]) == 0
    assert f"run written to {out}" in capsys.readouterr().out

    checkpoint = out / f"checkpoint-{STEPS}"
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    assert state["global_step"] == STEPS
    assert len([entry for entry in state["log_history"] if "loss" in entry]) == STEPS
    assert (checkpoint / "stackrl_plugins.pt").is_file()

    # Only the adapter is saved; PEFT starts every lora_B at zero, so a non-zero lora_B is a trained one.
    assert not (out / "model.safetensors").exists()
    assert json.loads((out / "adapter_config.json").read_text())["r"] == 8
    adapter = load_file(out / "adapter_model.safetensors")
    lora_b = {name: w for name, w in adapter.items() if "lora_B" in name}
    assert len(lora_b) == 14
    untrained = [name for name, w in lora_b.items() if not torch.count_nonzero(w)]
    assert not untrained, f"LoRA weights left at their initial zeros: {untrained}"
    assert all(torch.isfinite(w).all() for w in adapter.values())
    assert load_file(checkpoint / "adapter_model.safetensors").keys() == adapter.keys()


REFUSAL = "stackrl: error: {}: model.quantization needs model.lora: a quantized model trains only through an adapter"


def test_quantized_without_lora_is_refused_by_the_command(tiny_model_dir, tmp_path):
    """The real command: exit status 2, the ConfigError on stderr, nothing on stdout."""
    config = _write_config(tmp_path / "quant.yaml", tiny_model_dir, tmp_path / "run", model={"quantization": 4})
    script = Path(sys.executable).with_name("stackrl")
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "stackrl.cli"]
    proc = subprocess.run(
        [*command, "config", "validate", config],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    # bitsandbytes may print a notice of its own when imported; stackrl's error is the last line.
    assert proc.stderr.strip().splitlines()[-1] == REFUSAL.format(config)
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("bits", [4, 8])
def test_quantized_without_lora_is_refused(bits, tiny_model_dir, tmp_path, capsys):
    """In-process (the command's exit status is ``main``'s return value): both precisions, and no model is loaded."""
    config = _write_config(tmp_path / "quant.yaml", tiny_model_dir, tmp_path / "run", model={"quantization": bits})
    assert main(["config", "validate", config]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1] == REFUSAL.format(config)
    assert captured.out == ""
    # With the adapter the same config is accepted.
    lora = _write_config(tmp_path / "lora.yaml", tiny_model_dir, tmp_path / "run", model={"quantization": bits, "lora": {"r": 8}})
    assert main(["config", "validate", lora]) == 0
    assert capsys.readouterr().out.startswith("config ok")
