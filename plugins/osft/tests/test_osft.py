"""OSFT: one step is exactly an SFT step on the policy's own colder samples, read at the loss's temperature."""

import torch
from transformers import AutoModelForCausalLM

from stackrl.testing.fixtures import train_steps
from stackrl.testing.conformance import PluginConformance

SGD_ONE_STEP = {"optim": "sgd", "learning_rate": 0.5, "max_grad_norm": 0.0, "lr_scheduler_type": "constant"}


class TestConformance(PluginConformance):
    plugin_name = "osft"
    refused_settings = [
        ({"sampling_temperature": 0.0}, "osft.sampling_temperature: must be positive, not 0.0"),
        ({"sampling_temperature": -0.5}, "osft.sampling_temperature: must be positive, not -0.5"),
    ]


def _train_recording_samples(config):
    """Train the config's steps; return the trainer and each step's (prompts, Samples)."""
    sampled = []

    def monitor(hook, plugin, kwargs, result):
        if hook == "generate_rollout":
            sampled.append((kwargs["prompts"], result))

    return train_steps(config, monitor=monitor), sampled


def test_one_step_is_the_nll_gradient_of_the_samples_at_the_loss_temperature(make_config):
    """SGD without clipping moves the weights by -lr times the gradient of the token-mean negative log-likelihood of
    the sampled completions at trainer.temperature: every advantage 1, no normalisation, no sign flip, and the
    loss does not read the samples at the (lower) sampling temperature."""
    config = make_config(["osft"], osft={"sampling_temperature": 0.7},
                         trainer={**SGD_ONE_STEP, "max_steps": 1, "temperature": 1.3})
    trainer, [(prompts, samples)] = _train_recording_samples(config)
    before = AutoModelForCausalLM.from_pretrained(config.host.model.name_or_path)
    prompt_ids = trainer._tokenize_prompts(prompts)[0]
    nll, tokens = 0.0, 0
    for context, completion in zip(prompt_ids, samples.completion_ids):
        logits = before(torch.tensor([list(context) + list(completion)])).logits[0, len(context) - 1 : -1] / 1.3
        nll = nll - logits.log_softmax(-1).gather(-1, torch.tensor(completion)[:, None]).sum()
        tokens += len(completion)
    (nll / tokens).backward()
    after = dict(trainer.model.named_parameters())
    for name, weight in before.named_parameters():
        expected = weight.detach() - SGD_ONE_STEP["learning_rate"] * weight.grad
        torch.testing.assert_close(after[name].detach(), expected, atol=1e-6, rtol=1e-4, msg=name)


def test_samples_are_drawn_at_the_sampling_temperature(make_config):
    """Near zero, a group's completions are all the greedy one; the run's own temperature (1.0) would vary them."""
    config = make_config(["osft"], osft={"sampling_temperature": 1e-4}, trainer={"max_steps": 1})
    _, [(prompts, samples)] = _train_recording_samples(config)
    groups = [samples.completion_ids[i : i + 4] for i in range(0, len(prompts), 4)]
    assert all(all(c == group[0] for c in group) for group in groups)
