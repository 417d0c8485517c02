"""Quick CPU configs on a tiny model, for tests of the host and of plugins."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from stackrl.config import LoadedConfig, load_config

TINY_TRAINER = {
    "use_cpu": True,
    "bf16": False,
    "gradient_checkpointing": False,
    "per_device_train_batch_size": 4,
    "num_generations": 4,
    "max_completion_length": 12,
    "max_steps": 2,
    "learning_rate": 1e-3,
    "logging_steps": 1,
    "report_to": "none",
    "save_strategy": "no",
    "dataloader_num_workers": 0,
    "seed": 0,
    "disable_tqdm": True,
}


def build_tiny_model(folder: Path, seed: int = 0, hidden_size: int = 32) -> Path:
    """Save a random tiny Qwen2 (about 100k parameters) and a tokenizer trained on the built-in task's text."""
    import torch

    from stackrl.tasks.arithmetic import make_dataset
    from stackrl.tiny import tiny_model, train_tokenizer

    rows = make_dataset(split="train", size=200, seed=seed)
    tokenizer = train_tokenizer([q + s for q, s in zip(rows["question"], rows["solution"])], vocab_size=256)
    torch.manual_seed(seed)
    model = tiny_model(tokenizer, hidden_size=hidden_size, num_layers=2, num_heads=2)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_config(model_dir, plugins=(), tmp_dir=None, overrides=(), **sections) -> LoadedConfig:
    """A validated config on ``model_dir`` with ``plugins``; ``sections`` merge over the defaults.

    The config is written to a YAML file first, so it goes through exactly the path users' files take.
    """
    tree = {
        "model": {"name_or_path": str(model_dir)},
        "data": {"source": "arithmetic", "size": 32, "seed": 0},
        "plugins": list(plugins),
        "rewards": {"exact_match": 1.0},
        "trainer": dict(TINY_TRAINER),
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(tree.get(key), dict):
            tree[key] = {**tree[key], **value}
        else:
            tree[key] = value
    tmp_dir = Path(tmp_dir or os.getcwd())
    tmp_dir.mkdir(parents=True, exist_ok=True)
    path = tmp_dir / "tiny.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return load_config([path], overrides)
