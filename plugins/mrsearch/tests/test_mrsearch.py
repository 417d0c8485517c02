"""Tests of the `mrsearch` plugin: the host's conformance suite, then the method's own."""

from stackrl.testing.conformance import PluginConformance


class TestConformance(PluginConformance):
    plugin_name = "mrsearch"


# Add here:
# - unit tests of the method's formulas on small hand-built tensors whose results you know by hand;
# - a mechanism test on the built-in task and model, asserting the effect the paper claims, measured on the run.
#   It is marked `mechanism`: `make test` leaves it out (a plugin's other tests share a time budget there) and
#   `make bench` runs it. The test kit's fixtures (make_config, tiny_model_dir, hook_recorder) need no import: a
#   test names them as arguments. The function train_steps is imported:
#
#       import pytest
#
#       from stackrl.testing.fixtures import train_steps
#
#       @pytest.mark.mechanism
#       def test_mechanism(make_config):
#           config = make_config(["mrsearch"], model={"name_or_path": "stackrl/arith-tiny"})
#           trainer = train_steps(config, steps=4)
