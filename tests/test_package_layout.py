"""The package layout every tool sees: ``tdf`` is ``python/tdf`` and
``tdf.passes`` is the top-level ``passes/`` (through the symlink
``python/tdf/passes``); nothing else in the repository imports as ``tdf.*``."""

import importlib
import os

import pytest

import tdf
import tdf.passes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_repository_root_is_not_a_tdf_package_dir():
    assert os.path.realpath(REPO) not in [os.path.realpath(p) for p in tdf.__path__]
    assert os.path.realpath(os.path.join(REPO, "python", "tdf")) in [
        os.path.realpath(p) for p in tdf.__path__]


@pytest.mark.parametrize("name", ["tdf.tests", "tdf.tests.conftest", "tdf.benchmarks",
                                  "tdf.lit_tests", "tdf.examples"])
def test_other_folders_do_not_import_as_tdf(name):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(name)


def test_passes_is_the_top_level_passes_folder():
    assert os.path.realpath(os.path.dirname(tdf.passes.__file__)) == os.path.realpath(
        os.path.join(REPO, "passes"))
    assert os.path.islink(os.path.join(REPO, "python", "tdf", "passes"))
