# Set-up and the two commands the README gives. Everything lives in .venv; nothing is downloaded from a model hub.
PYTHON ?= python3
# Where torch comes from. Empty: wherever pip finds it, as for any package; on Linux that is the CUDA build, which
# brings the nvidia-* CUDA libraries (several GB). TORCH_INDEX=https://download.pytorch.org/whl/cpu takes the CPU
# build (about 190 MB) from PyTorch's own index.
TORCH_INDEX ?=
# The extras the set-up installs: envs (TextArena, OpenSpiel: about 10 s) so that the environment adapters' tests
# play their games rather than skip.
EXTRAS ?= test,envs
VENV := .venv
BIN := $(VENV)/bin

# Tests run in parallel, one process per core (pytest-xdist): CI has two. A module's tests, or a class's, go to one
# process, where they share the module's fixtures (the multi-process runs, the built wheels) instead of each process
# building them again.
PYTEST := HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -n auto --dist loadscope

.PHONY: demo test bench

$(BIN)/stackrl: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch first, from TORCH_INDEX if given: the install below then keeps it.
	$(BIN)/pip install --quiet torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/pip install --quiet -e ".[$(EXTRAS)]" $(foreach p,$(wildcard plugins/*/pyproject.toml),-e $(dir $(p)))
	touch $@

# The demo replaces its earlier run (--overwrite): `stackrl train` alone refuses a folder that holds a run.
demo: $(BIN)/stackrl
	HF_HUB_OFFLINE=1 $(BIN)/stackrl train configs/demo.yaml --overwrite

# The mechanism tests (statistical, minutes) are left to `make bench`; the rest hold to the time budget in
# pyproject.toml.
test: $(BIN)/stackrl
	$(PYTEST) -m "not mechanism" --durations=15

bench: $(BIN)/stackrl
	$(PYTEST) -m mechanism --durations=0
