"""stackrl's test kit, loaded by pytest through the ``pytest11`` entry point (module :mod:`stackrl.testing.fixtures`).

- ``tiny_model_dir``: a tiny Qwen2 model and a tokenizer trained on the built-in task, saved once per test
  session, no download.
- ``make_config``: a validated config for the tiny model with the plugins you name, quick CPU settings.
- ``hook_recorder``: records every hook call of a run (hook, plugin, result) in order.
- ``built_in_trainer``: ``built_in_trainer(plugins, **sections)``, an untrained trainer on the built-in model.
- ``distilled_completions``: the completions a loss term scored the student on with gradient, and whether each is
  correct.
- ``train_steps(config, steps)``: build the trainer and train a few steps, returns the trainer.
- ``make_plugin(name, **settings)``: an installed plugin with its settings, for calling its hooks by hand.
- :class:`stackrl.testing.conformance.PluginConformance`: the checks every plugin package should pass.
- :mod:`stackrl.testing.budget`: the time a repository's tests may take, per plugin and per test (the ini options
  ``plugin_time_budget`` and ``test_time_ceiling``; this repository's ``conftest.py`` loads it).
"""

import os

from stackrl import noise

# Tests never reach a model hub, and TRL's telemetry stays silent.
for _key, _value in {
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TRL_EXPERIMENTAL_SILENCE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_key, _value)
# Before transformers is imported, which imports bitsandbytes and with it some of the noise. (pytest sets the
# warning filters anew for every test: the test kit's pytest_configure gives them to pytest too.)
noise.silence()
