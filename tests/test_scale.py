"""Scale: 4-bit + LoRA on two processes with every installed method plugin stacked, vLLM generation behind the
same hooks, and the launch configs (model presets, accelerate files) a user switches between.

One torchrun launch (tests/distributed_worker.py, on CPU with gloo) runs three jobs. ``job`` is the whole
``stackrl train`` job on the float tiny model: its evaluations before, during (every step) and after training are
split over the two processes, and the main process alone writes its metrics and samples. The other two train a
4-bit nf4 + LoRA model, each saving a checkpoint at its last step:

- ``greedy``: the test plugins that touch every stage (prompt transform, rewards, per-token advantages, a loss
  term, step state), greedy decoding, on the tiny model. Its single-process reference trains in this process.
- ``methods``: every method plugin installed from plugins/*/ (with its CPU recipe's settings; each pair of them
  validates together, tests/test_combination.py), on top of the test plugins, sampled, on the built-in model
  ``stackrl/arith-tiny``. Both steps are mrrlvr's first stage, whose rows have no answer: the methods that read
  one pass them through as plain GRPO (tests/test_answerless_rows.py). Method plugins may sample inside their
  hooks (a second rollout, a teacher's), so this run is checked for what holds whatever they do: identical state
  on both processes, whole groups, a full checkpoint.

Layout as in tests/test_distributed.py: 6 rows per process, groups of 4, so a group straddles the processes; the
single-process reference uses 12 rows per device, the same global batch, so TRL's seeded sampler feeds the same
prompts per step.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from stackrl.cli import main
from stackrl.config import load_config
from stackrl.plots import METRICS_FILE
from stackrl.run import build_plugin_manager
from stackrl.samples import SAMPLES_FILE
from stackrl.testing.repository import method_plugins
from stackrl.testing.tiny import TINY_TRAINER

ROOT = Path(__file__).resolve().parent.parent

NPROC, PER_DEVICE, GROUP, STEPS = 2, 6, 4, 2
GLOBAL = NPROC * PER_DEVICE
TEST_STACK = ["prompt_suffix", "digit_reward", "group_rank", "token_decay", "logp_loss", "step_counter"]
QLORA = {
    "quantization": 4,
    "quant_type": "nf4",
    "double_quant": True,
    "lora": {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": "all-linear"},
}
EVAL = {"split": "test", "size": 24, "samples": 2, "batch_size": 8, "temperature": 1.0, "seed": 3}


def _exclusive_winners(methods: dict) -> dict[str, str]:
    """A winner for each exclusive hook several method plugins claim: sage where it claims one (in its recipe's
    mode sage, losing its generation is an error), else the first claimant that its recipe runs alone. One that
    leans on another plugin (the game methods read the ``env`` runner's columns) cannot act on sage's rollout, and
    winning would leave the hook unexercised."""
    from stackrl.manager import EXCLUSIVE_HOOKS, PluginManager, installed_plugins

    claimants = {hook: [] for hook in EXCLUSIVE_HOOKS}
    for name in methods:
        plugin = installed_plugins()[name].load()()
        plugin.name = name
        for hook in EXCLUSIVE_HOOKS:
            if PluginManager([plugin]).has(hook):
                claimants[hook].append(name)
    winners = {}
    for hook, names in claimants.items():
        if len(names) > 1:
            alone = [name for name in names if not methods[name]["stacked"]]
            winners[hook] = "sage" if "sage" in names else (alone or names)[0]
    return winners


def _runs(out: Path) -> dict[str, dict]:
    trainer = {
        "per_device_train_batch_size": PER_DEVICE,
        "num_generations": GROUP,
        "max_steps": STEPS,
        "save_strategy": "steps",
        "save_steps": STEPS,
    }
    methods = method_plugins(ROOT)
    rewards = {"exact_match": 1.0, **{n: m["reward"] for n, m in methods.items() if m["reward"] is not None}}
    return {
        "job": {
            "name": "job",
            "job": True,
            "plugins": [],
            "sections": {
                "output_dir": str(out / "job" / "run"),
                # 3 batches over 2 processes: one process evaluates a repeated batch, whose figures are dropped
                "eval": {**EVAL, "before_and_after": True, "every_steps": 1},
                "trainer": {"per_device_train_batch_size": PER_DEVICE, "num_generations": GROUP, "max_steps": 2},
            },
        },
        "greedy": {
            "name": "greedy",
            "plugins": TEST_STACK,
            "sections": {
                "model": QLORA,
                "output_dir": str(out / "greedy" / "run"),
                # SGD, not Adam: Adam divides each gradient element by its own running scale, so rounding-level
                # differences on near-zero elements become full-size steps and would hide what is compared.
                "trainer": {**trainer, "generation_kwargs": {"do_sample": False}, "optim": "sgd",
                            "learning_rate": 0.05},
            },
        },
        "methods": {
            "name": "methods",
            "plugins": [*methods, *TEST_STACK],
            "sections": {
                "model": {**QLORA, "name_or_path": "stackrl/arith-tiny"},
                "rewards": rewards,
                "exclusive": _exclusive_winners(methods),
                "output_dir": str(out / "methods" / "run"),
                "trainer": trainer,
                **{name: m["settings"] for name, m in methods.items()},
            },
        },
    }


@pytest.fixture(scope="module")
def launched(tiny_model_dir, tmp_path_factory, worker):
    out = tmp_path_factory.mktemp("scale")
    runs = _runs(out)
    worker.launch(tiny_model_dir, list(runs.values()), out)
    return runs, out


def _checkpoint(out: Path, name: str) -> Path:
    folder = out / name / "run" / f"checkpoint-{STEPS}"
    for file in ("adapter_model.safetensors", "adapter_config.json", "stackrl_plugins.pt", "stackrl_config.yaml"):
        assert (folder / file).is_file(), file
    return folder


def test_qlora_two_processes_match_one_process(launched, tiny_model_dir, tmp_path, worker):
    runs, out = launched
    ranks = worker.reports(out, "greedy")
    assert ranks[0]["reward_calls"] == ranks[1]["reward_calls"]
    assert ranks[0]["param_hash"] == ranks[1]["param_hash"]  # DDP kept the adapters (and the 4-bit base) equal

    reference = worker.single_process(tiny_model_dir, runs["greedy"], tmp_path, GLOBAL)

    # What must be equal, exactly: greedy decoding makes each completion a function of its prompt and the weights,
    # and the sampler gives both layouts the same prompts, so the first rollout is the same; rewards, group ranks
    # and advantages are functions of the whole gathered rollout, so they are equal too. The gradient is the same
    # sum computed in another order (per process, then averaged by DDP; TRL normalises by the global token count),
    # so the adapter after a step differs by float rounding only, far too little to change a greedy argmax: the
    # second rollout, its rewards and the plugins' state are equal as well.
    assert len(reference["reward_calls"]) == STEPS
    assert min(len(ids) for call in reference["reward_calls"] for ids in call["completion_ids"]) > 1  # not trivial
    for got, want in zip(ranks[0]["reward_calls"], reference["reward_calls"], strict=True):
        assert got["prompts"] == want["prompts"]
        assert got["prompt_texts"] == want["prompt_texts"]  # prompt_suffix's transform reached generation
        assert got["completion_ids"] == want["completion_ids"]
        assert got["builtin_rewards"] == want["builtin_rewards"]
        assert got["result"] == want["result"]
    assert ranks[0]["seen"] == reference["seen"]

    # What may differ by rounding only: the trained adapter. bitsandbytes' CPU 4-bit path rounds far more coarsely
    # than a float32 matmul, and how much depends on the batch shape: measured, the two layouts' adapters differ by
    # at most 0.75% of each tensor's largest entry (median 0.2%); unquantized, the same stack differs by ~1e-7.
    two = torch.load(out / "greedy" / "rank0-trainable.pt")
    one = torch.load(tmp_path / "single" / "rank0-trainable.pt")
    assert two.keys() == one.keys() and any("lora_B" in name for name in two)
    for name in one:
        scale = one[name].abs().max()
        if "lora_B" in name:  # LoRA B starts at zero: all of it is what training did
            assert scale > 0, f"{name} did not train"
        assert (two[name] - one[name]).abs().max() <= 2e-2 * scale, name

    states = torch.load(_checkpoint(out, "greedy") / "stackrl_plugins.pt", weights_only=True)
    assert states["step_counter"]["steps"] == STEPS
    assert [s["rewards"] for s in states["group_rank"]["seen"]] == [s["rewards"] for s in reference["seen"]]


def test_every_method_plugin_stacked_on_qlora_two_processes(launched, worker):
    runs, out = launched
    ranks = worker.reports(out, "methods")
    for report in ranks:
        assert report["world_size"] == NPROC and report["global_step"] == STEPS
        assert [(s["group_size"], s["rows"]) for s in report["seen"]] == [(GROUP, GLOBAL)] * STEPS
    assert ranks[0]["reward_calls"] == ranks[1]["reward_calls"]
    assert ranks[0]["param_hash"] == ranks[1]["param_hash"]
    # Both steps are mrrlvr's first stage: no row has an answer for the outcome reward to score.
    outcome = [value for call in ranks[0]["reward_calls"] for value in call["builtin_rewards"]["exact_match"]]
    assert len(outcome) == STEPS * GLOBAL and all(math.isnan(value) for value in outcome)
    config = yaml.safe_load((_checkpoint(out, "methods") / "stackrl_config.yaml").read_text())
    assert config["plugins"] == runs["methods"]["plugins"]
    states = torch.load(_checkpoint(out, "methods") / "stackrl_plugins.pt", weights_only=True)
    assert states["step_counter"]["steps"] == STEPS
    # Every plugin with state has it in the checkpoint (the saved config is the run's, loadable as is).
    saved = load_config([_checkpoint(out, "methods") / "stackrl_config.yaml"])
    assert set(build_plugin_manager(saved).implementers("state_dict")) <= set(states)


def test_evaluation_is_split_over_processes_and_matches_one_process(launched, make_config, worker):
    from stackrl.evaluation import evaluate
    from stackrl.modeling import load_model, load_tokenizer

    _, out = launched
    ranks = worker.reports(out, "job")
    assert ranks[0]["evaluations"] == ranks[1]["evaluations"]  # every process got the whole split's figures
    assert list(ranks[0]["evaluations"]) == ["before", "step 1", "after"]
    # The main process alone writes the run's files: each evaluation once, whole groups of each logged step.
    run = out / "job" / "run"
    metrics = [json.loads(line) for line in (run / METRICS_FILE).read_text().splitlines()]
    assert [r["step"] for r in metrics if "eval/pass@1" in r] == [0, 1, 2]
    samples = [json.loads(line) for line in (run / SAMPLES_FILE).read_text().splitlines()]
    assert [(r["step"], r["group"]) for r in samples] == [(s, g) for s in (1, 2) for g in (0, 1) for _ in range(GROUP)]
    for step_group in {(r["step"], r["group"]) for r in samples}:
        assert len({r["prompt"] for r in samples if (r["step"], r["group"]) == step_group}) == 1
    before = ranks[0]["evaluations"]["before"]
    assert before["problems"] == EVAL["size"]
    # Before training both layouts evaluate the same weights, and each batch is sampled with its own seed: the
    # figures of two processes, each a share of the batches, are exactly those of one process doing them all.
    config = make_config(eval=EVAL)
    model, _ = load_model(config.host.model, torch.device("cpu"))
    max_new_tokens = TINY_TRAINER["max_completion_length"]
    assert evaluate(model, load_tokenizer(config.host.model), config, max_new_tokens) == before


# -- vLLM generation ----------------------------------------------------------------------------------------------


class _RecordedSamplingParams(dict):
    """Stands in for ``vllm.SamplingParams``: keeps the keyword arguments TRL builds it with."""

    def __init__(self, **kwargs):
        super().__init__(kwargs)


class _StandInLLM:
    """Stands in for ``vllm.LLM`` (absent on CPU): records each call's prompts and SamplingParams and answers with
    the trainer's own model through transformers, greedy at temperature 0, as vLLM would."""

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer, self.calls = model, tokenizer, []

    def generate(self, prompts, sampling_params, use_tqdm=False):
        self.calls.append(([p["prompt_token_ids"] for p in prompts], dict(sampling_params)))
        outputs = []
        for prompt in prompts:
            ids = torch.tensor([prompt["prompt_token_ids"]])
            greedy = sampling_params["temperature"] == 0
            new = self.model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                do_sample=not greedy,
                temperature=None if greedy else sampling_params["temperature"],
                max_new_tokens=sampling_params["max_tokens"],
                pad_token_id=self.tokenizer.pad_token_id,
            )[0, ids.size(1) :].tolist()
            token_lp = [{t: SimpleNamespace(rank=1, logprob=0.0)} for t in new]
            completion = SimpleNamespace(token_ids=new, logprobs=token_lp)
            outputs.append(SimpleNamespace(prompt_token_ids=prompt["prompt_token_ids"], outputs=[completion]))
        return outputs


@pytest.fixture
def vllm_trainer(make_config, monkeypatch):
    """A trainer generating through TRL's own vLLM backend object, with vLLM's engine replaced by the stand-in."""
    from trl.generation import vllm_generation

    from stackrl.run import build_trainer

    monkeypatch.setattr(vllm_generation.VLLMGeneration, "_init_vllm", lambda self: None)
    monkeypatch.setattr(vllm_generation, "SamplingParams", _RecordedSamplingParams, raising=False)
    config = make_config(["prompt_suffix"], trainer={"generation_kwargs": {"repetition_penalty": 1.0}})
    trainer = build_trainer(config)
    engine = vllm_generation.VLLMGeneration(
        model=trainer.model,
        accelerator=trainer.accelerator,
        processing_class=trainer.processing_class,
        mode="colocate",
        temperature=trainer.temperature,
        max_completion_length=trainer.max_completion_length,
        generation_kwargs=trainer.args.generation_kwargs,
    )
    engine.llm = _StandInLLM(trainer.model, trainer.processing_class)
    engine.sync_weights = lambda: None  # the stand-in generates with the trainer's own model: nothing to send
    trainer.use_vllm, trainer.vllm_generation, trainer.vllm_mode = True, engine, "colocate"
    trainer._last_loaded_step = -1  # what GRPOTrainer sets up with vLLM on
    trainer.vllm_importance_sampling_correction = False  # the stand-in's log-probs are placeholders
    return trainer


def test_vllm_generate_overrides_reach_sampling_params_and_are_undone(vllm_trainer):
    from stackrl.policy import PolicyAccess

    policy = PolicyAccess(vllm_trainer, sharded=True)
    engine = vllm_trainer.vllm_generation
    before = dict(engine.generation_kwargs)
    prompts = ["1+2=", "3*4="]
    generations = policy.generate(prompts, do_sample=False, max_new_tokens=3, top_k=5, seed=7)
    _, params = engine.llm.calls[-1]
    assert params["temperature"] == 0.0 and params["max_tokens"] == 3 and params["top_k"] == 5 and params["seed"] == 7
    assert params["repetition_penalty"] == 1.0 and params["n"] == 1
    assert engine.generation_kwargs == before  # the run's own settings are back

    policy.generate(prompts)  # no override: the run's settings
    _, params = engine.llm.calls[-1]
    assert params["temperature"] == vllm_trainer.temperature
    assert params["max_tokens"] == vllm_trainer.max_completion_length

    # The same Generation objects as with transformers generation (both greedy on the same weights).
    vllm_trainer.use_vllm = False
    assert policy.generate(prompts, do_sample=False, max_new_tokens=3) == generations
    assert all(len(g.completion_ids) <= 3 for g in generations)


def test_prompt_transforms_reach_vllm_in_training(vllm_trainer):
    vllm_trainer.args.max_steps = 1
    vllm_trainer.train()
    prompt_ids, params = vllm_trainer.vllm_generation.llm.calls[0]
    texts = vllm_trainer.processing_class.batch_decode(prompt_ids, skip_special_tokens=True)
    assert texts and all(t.endswith(" Answer:") for t in texts)
    assert params["max_tokens"] == vllm_trainer.max_completion_length


def test_vllm_config_is_refused_without_vllm(make_config):
    from stackrl.errors import ConfigError

    with pytest.raises(ConfigError, match=r"trainer.use_vllm: vLLM is not installed; install it with .*\[vllm\]"):
        make_config(trainer={"use_vllm": True})
    with pytest.raises(ConfigError, match="colocate mode cannot load 8-bit"):
        make_config(model={"quantization": 8, "lora": {"r": 4}}, trainer={"use_vllm": True})


# -- launch configs -----------------------------------------------------------------------------------------------

PRESET = str(ROOT / "configs" / "model" / "qwen2.5-1.5b-bf16.yaml")
QUANTIZED = str(ROOT / "configs" / "model" / "qwen2.5-1.5b-4bit-lora.yaml")
ACCELERATE = sorted((ROOT / "configs" / "accelerate").glob("*.yaml"))


def _has_deepspeed() -> bool:
    import importlib.util

    return importlib.util.find_spec("deepspeed") is not None


@pytest.mark.parametrize("accelerate", ACCELERATE, ids=lambda p: p.stem)
def test_every_accelerate_config_validates(accelerate, capsys):
    """Passes: accelerate's loader reads it and nothing in the run contradicts it. Where deepspeed is absent, a
    DeepSpeed file still passes, with a note naming the package and the extra that installs it."""
    code = main(["config", "validate", PRESET, "rewards.exact_match=1.0", "--accelerate", str(accelerate)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "accelerate config ok" in out and f"accelerate launch --config_file {accelerate}" in out
    needs_note = "distributed_type: DEEPSPEED" in accelerate.read_text() and not _has_deepspeed()
    assert ("needs deepspeed where it is launched; not installed here: pip install 'stackrl[deepspeed]'" in out) == needs_note


@pytest.mark.parametrize("accelerate", ["zero3", "fsdp"])
def test_weight_sharding_refuses_a_quantized_model(accelerate, capsys):
    path = ROOT / "configs" / "accelerate" / f"{accelerate}.yaml"
    assert main(["config", "validate", QUANTIZED, "rewards.exact_match=1.0", "--accelerate", str(path)]) == 2
    assert "shards the weights, but model.quantization=4" in capsys.readouterr().err


def test_accelerate_config_errors_name_the_file(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("distributed_type: MULTI_GPU\nnot_an_accelerate_key: 1\n")
    assert main(["config", "validate", PRESET, "rewards.exact_match=1.0", "--accelerate", str(bad)]) == 2
    assert f"accelerate config {bad}: accelerate cannot read it" in capsys.readouterr().err
    ddp = str(ROOT / "configs" / "accelerate" / "ddp.yaml")
    on_cpu = [PRESET, "rewards.exact_match=1.0", "trainer.use_cpu=true"]
    assert main(["config", "validate", *on_cpu, "--accelerate", ddp]) == 2
    assert "trainer.use_cpu is true" in capsys.readouterr().err


@pytest.mark.parametrize("preset", sorted((ROOT / "configs" / "model").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_model_preset_validates(preset, capsys):
    code = main(["config", "validate", str(preset), "rewards.exact_match=1.0"])
    err = capsys.readouterr().err
    if "use_vllm: true" in preset.read_text():
        assert code == 2 and "pip install 'stackrl[vllm]'" in err
    else:
        assert code == 0, err
