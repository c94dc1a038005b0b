# Set-up-and-go targets (see README): `make example`, `make test`.
# Everything is installed into ./.venv from the pinned requirements.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BUILD_DIR := build/editable

.PHONY: setup example test lit pytest docs clean

$(PY):
	$(PYTHON) -m venv $(VENV)

setup: $(PY)
	$(PY) -m pip install -q -r requirements-dev.txt
	$(PY) -m pip install -q --no-build-isolation -e . -Cbuild-dir=$(BUILD_DIR)

example: setup
	$(PY) examples/jax_decode.py
	$(PY) examples/kv_cache_decode.py

lit: setup
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/lit -sv lit_tests

pytest: setup
	$(PY) -m pytest -q tests

test: setup
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/lit -sv lit_tests
	$(PY) -m pytest -q tests

# Refresh the generated references in docs/ (dialect from the ODS, passes
# from the registry).
docs: setup
	$(PY) -m tdf.docgen --write docs

clean:
	rm -rf build lit_tests/Output
