# Set-up and the two commands the README gives. Everything lives in .venv; nothing is downloaded from a model hub.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test

$(BIN)/stackrl: pyproject.toml tests/fixture_plugins/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# An explicit CPU torch first: a bare `torch` requirement would pull a CUDA build of several GB.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[test]" -e tests/fixture_plugins $(foreach p,$(wildcard plugins/*/pyproject.toml),-e $(dir $(p)))
	touch $@

demo: $(BIN)/stackrl
	HF_HUB_OFFLINE=1 $(BIN)/stackrl train configs/demo.yaml

test: $(BIN)/stackrl
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest
