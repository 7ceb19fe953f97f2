"""The package's own metadata builds without deprecation warnings: the license is an SPDX
expression (PEP 639), which needs the setuptools the build system asks for."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: The first setuptools that reads ``license = "MIT"`` as an SPDX expression.
SPDX_LICENSE_SETUPTOOLS = Version("77")


def build_requirement(name):
    return next(Requirement(text) for text in PYPROJECT["build-system"]["requires"] if Requirement(text).name == name)


def test_license_is_an_spdx_expression_and_the_build_asks_for_a_setuptools_that_reads_it():
    assert PYPROJECT["project"]["license"] == "MIT"
    specifier = build_requirement("setuptools").specifier
    assert not specifier.contains(Version("76.1")) and specifier.contains(SPDX_LICENSE_SETUPTOOLS)


def test_metadata_builds_without_a_license_deprecation(tmp_path):
    setuptools = pytest.importorskip("setuptools")
    if not build_requirement("setuptools").specifier.contains(Version(setuptools.__version__)):
        pytest.skip(f"setuptools {setuptools.__version__} here; pip builds with the one pyproject.toml asks for")
    source = tmp_path / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    script = (
        "import sys, warnings\n"
        "warnings.simplefilter('always')\n"
        "from setuptools import build_meta\n"
        "out = sys.argv[1]  # build_meta rewrites sys.argv\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    name = build_meta.prepare_metadata_for_build_wheel(out)\n"
        "for warning in caught:\n"
        "    print('WARNING', warning.category.__name__, str(warning.message).splitlines()[0], file=sys.stderr)\n"
        "print(open(f'{out}/{name}/METADATA', encoding='utf-8').read())\n"
    )
    (tmp_path / "out").mkdir()
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path / "out")], cwd=source, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "License-Expression: MIT" in run.stdout.splitlines()
    assert [line for line in run.stderr.splitlines() if line.startswith("WARNING") and "icense" in line] == []
