"""The wheel, as a user installs it: built from the checkout, it carries the license, the package
metadata and the pages that the commands' help names; installed (not editable) into a new virtual
environment, it imports from there and simulates, with the same result as the checkout.

The new environment sees the dependencies of the project's own environment through a .pth file
(a path, not an import of hetlb: .pth files inside that folder, such as the editable install's, are
not read), so that the test costs seconds, not a download of numpy, numba and SciPy. The kernels
run as plain Python there (NUMBA_DISABLE_JIT=1), which saves the compilation of a fresh install.
"""

import email
import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from hetlb.cli import COMMAND_PAGES
from hetlb.version import __version__

ROOT = Path(__file__).resolve().parents[1]
SIMULATE = ["simulate", "--speeds", "1", "--load", "0.5", "--jobs", "2000", "--seed", "3", "--json", "--quiet"]
"""An M/M/1 queue at load 0.5: mean response time 1 / (mu - lambda) = 2 time units."""


def run(command: list[str], **options) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, **options)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(folder), str(ROOT)])
    (built,) = folder.glob("hetlb-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A new virtual environment with the wheel installed in it: its bin/ folder."""
    venv = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", str(wheel)])
    site_packages = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip()
    (Path(site_packages) / "project-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv / "bin"


def test_the_wheel_carries_license_metadata_and_pages(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        dist_info = f"hetlb-{__version__}.dist-info"
        assert archive.read(f"{dist_info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
        metadata = email.message_from_bytes(archive.read(f"{dist_info}/METADATA"))
    assert metadata["License-Expression"] == "MIT"
    assert metadata["Author"] == "the hetlb developers"
    assert metadata.get_all("Classifier") and metadata["Keywords"]
    assert metadata.get_payload().startswith("# hetlb")  # the README as the long description
    pages = {f"hetlb-{__version__}.data/data/share/hetlb/docs/{page}" for page in COMMAND_PAGES.values()}
    assert pages <= names


def test_the_installed_wheel_imports_and_simulates(installed, tmp_path):
    environment = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    where = run([str(installed / "python"), "-c", "import hetlb; print(hetlb.__file__)"], cwd=tmp_path).stdout
    assert Path(where.strip()).is_relative_to(installed.parent), where
    result = json.loads(run([str(installed / "hetlb"), *SIMULATE], cwd=tmp_path, env=environment).stdout)
    low, high = result["mean_response_time_ci"]
    assert low <= 2.0 <= high
    checkout = json.loads(run([sys.executable, "-m", "hetlb", *SIMULATE], cwd=ROOT, env=environment).stdout)
    measures = ("mean_response_time", "mean_response_time_ci", "mean_waiting_time", "p_wait")
    assert {key: result[key] for key in measures} == {key: checkout[key] for key in measures}


def test_the_installed_help_names_pages_that_exist(installed, tmp_path):
    help_text = run([str(installed / "hetlb"), "serve", "--help"], cwd=tmp_path).stdout
    page = Path(help_text.rstrip().splitlines()[-1].removeprefix("documentation: "))
    assert page.is_relative_to(installed.parent) and page.is_file(), page
    assert page.read_text().startswith("# hetlb serve")
