"""The example notebooks (examples/notebooks) run from top to bottom in a fresh kernel, without an
error, and write no file beside themselves."""

from pathlib import Path

import nbclient
import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).parents[1] / "examples" / "notebooks").glob("*.ipynb"))


def test_there_are_the_two_notebooks():
    assert [path.name for path in NOTEBOOKS] == ["compare-policies.ipynb", "placement-study.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_a_notebook_runs_and_shows_its_figures(path, tmp_path):
    notebook = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    assert any("image/png" in output.get("data", {}) for output in outputs)  # a returned Figure is shown
    assert list(tmp_path.iterdir()) == []
