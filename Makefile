# Set-up-and-go targets (see README): `make example`, `make test`.
# Everything is installed into ./.venv at the versions pinned in constraints.txt.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BUILD_DIR := build/editable
# Concurrent builds in one checkout share BUILD_DIR: serialize them.
BUILD_LOCK ?= /tmp/tdf-build.lock
LOCK := $(if $(shell command -v flock),flock $(BUILD_LOCK))

# `make setup` redoes a step only when its inputs changed (stamp files in the
# venv, so a fresh clone or a new venv sets up fully): the requirements when
# requirements-dev.txt, constraints.txt or pyproject.toml change; the C++
# extension when those or a C++/CMake/ODS source changes. Python sources need
# neither: the editable install imports them from the tree.
REQS_STAMP := $(VENV)/.tdf-requirements.stamp
BUILD_STAMP := $(VENV)/.tdf-build.stamp
PRUNE := \( -path ./.git -o -path ./$(VENV) -o -path ./build \) -prune -o
NATIVE_SOURCES := $(shell find . $(PRUNE) -type f \( -name '*.cpp' -o -name '*.h' \
	-o -name '*.td' -o -name 'CMakeLists.txt' -o -name '*.cmake' \) -print)
CXX_SOURCES := $(filter %.cpp %.h,$(NATIVE_SOURCES))
# Type stub of the extension for the type check, generated from the built module.
STUB := python/tdf/_tdf.pyi

.PHONY: setup example test lit pytest lint format docs clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(REQS_STAMP): requirements-dev.txt constraints.txt pyproject.toml | $(PY)
	@touch $@.new
	$(PY) -m pip install -q -r requirements-dev.txt
	@mv $@.new $@

# The stamp is taken before the build: a source saved during it rebuilds next time.
$(BUILD_STAMP): $(REQS_STAMP) $(NATIVE_SOURCES) pyproject.toml
	@touch $@.new
	$(LOCK) $(PY) -m pip install -q --no-build-isolation -e . -Cbuild-dir=$(BUILD_DIR)
	@mv $@.new $@

setup: $(BUILD_STAMP)

example: setup
	$(PY) examples/jax_decode.py
	$(PY) examples/kv_cache_decode.py
	$(PY) examples/flax_train.py

lit: setup
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/lit -sv lit_tests

# pytest runs on every core (pytest-xdist; `make test PYTEST_WORKERS=0` runs
# it in one process): the tests are independent processes' worth of
# compiles, and the suite takes half the time on two cores.
PYTEST_WORKERS ?= auto

pytest: setup
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) tests

test: setup
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/lit -sv lit_tests
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) tests

$(STUB): $(BUILD_STAMP)
	$(PY) -m nanobind.stubgen -q -m tdf._tdf -o $@

# ruff (pyflakes, isort, bugbear, pyupgrade, complexity), clang-format (C++),
# mypy (basic type check); configured in pyproject.toml and .clang-format.
lint: setup $(STUB)
	$(VENV)/bin/ruff check --quiet .
	$(VENV)/bin/clang-format --dry-run --Werror $(CXX_SOURCES)
	$(VENV)/bin/mypy

# Apply what lint can fix by itself: import order, pyupgrade, C++ layout.
format: setup
	$(VENV)/bin/ruff check --quiet --fix --select I,UP .
	$(VENV)/bin/clang-format -i $(CXX_SOURCES)

# Refresh the generated references in docs/ (dialect from the ODS, passes
# from the registry).
docs: setup
	$(PY) -m tdf.docgen --write docs

clean:
	rm -rf build lit_tests/Output $(BUILD_STAMP) $(STUB)
