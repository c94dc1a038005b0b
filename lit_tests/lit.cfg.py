# lit configuration of tdf's FileCheck tests.
import importlib.util
import os
import shutil
import sys

import lit.formats

config.name = "tdf"
config.test_format = lit.formats.ShTest()
config.suffixes = [".mlir", ".py"]
config.excludes = ["lit.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
repo = os.path.dirname(config.test_source_root)
config.test_exec_root = os.path.join(repo, "build", "lit")

# Tools: tdf-opt from the environment's bin, FileCheck & co. from the LLVM
# tools wheel, mlir-opt from the MLIR tools wheel.
bindir = os.path.dirname(sys.executable)
llvm_bin = os.path.join(
    list(importlib.util.find_spec("llvm").submodule_search_locations)[0], "bin")
mlir_bin = os.path.join(
    list(importlib.util.find_spec("mlir").submodule_search_locations)[0], "bin")
config.environment["PATH"] = os.pathsep.join(
    [bindir, llvm_bin, mlir_bin, config.environment.get("PATH", os.environ["PATH"])])
config.environment["FILECHECK_OPTS"] = "-enable-var-scope --dump-input=fail"
config.environment["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
config.substitutions.append(("%python", sys.executable))
# One-Shot Bufferize configured as every tdf pipeline runs it: function
# boundaries bufferized with identity layouts, loops may yield fresh buffers.
# Use as `--one-shot-bufferize="%one_shot_options"` or, in a pipeline,
# `one-shot-bufferize{%one_shot_options test-analysis-only}`.
config.substitutions.append(
    ("%one_shot_options",
     "bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map "
     "allow-return-allocs-from-loops"))
if shutil.which("ptxas", path=config.environment["PATH"]):
    config.available_features.add("ptxas")
