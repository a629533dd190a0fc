"""The walkthrough notebooks ship with their outputs, and running them again reproduces them.

Each notebook is executed with nbclient (as ``notebooks/execute.py`` does for
``make notebooks``), on a copy, in a fresh kernel whose working directory is a temp
dir, and every text output (stdout, stderr, each result's plain text and markdown)
must equal the shipped one exactly; where a plot or a table's HTML is shipped, the
new run must show one too (their bytes are not compared). A change that moves a
number the notebooks show fails here: run ``make notebooks`` and commit the result.
"""

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

EXTRA = "the notebooks extra: pip install -e '.[notebooks]'"
nbformat = pytest.importorskip("nbformat", reason=EXTRA)
pytest.importorskip("nbclient", reason=EXTRA)
pytest.importorskip("ipykernel", reason=EXTRA)

NOTEBOOK_DIR = Path(__file__).parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))


def _load_execute():
    spec = importlib.util.spec_from_file_location("notebooks_execute", NOTEBOOK_DIR / "execute.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


execute = _load_execute()


def test_every_notebook_ships_executed():
    assert NOTEBOOKS, NOTEBOOK_DIR
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                assert cell.execution_count is not None, f"{path.name} cell {i} was not executed"
                assert not [o for o in cell.outputs if o.output_type == "error"], (
                    f"{path.name} cell {i} ships an error"
                )
        assert not [c for c in nb.cells if c.get("metadata", {}).get("execution")], (
            f"{path.name} ships timings: run `make notebooks`"
        )


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_reproduces_its_outputs(path, tmp_path):
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    ran = execute.execute(copy, cwd=cwd)

    shipped = execute.text_outputs(nbformat.read(path, as_version=4))
    got = execute.text_outputs(ran)
    assert len(got) == len(shipped)
    for want, have in zip(shipped, got):
        where = f"{path.name} cell {want['cell']}"
        assert have["stdout"] == want["stdout"], f"{where}: stdout changed (make notebooks)"
        assert have["stderr"] == want["stderr"], f"{where}: stderr changed (make notebooks)"
        assert have["outputs"] == want["outputs"], f"{where}: outputs changed (make notebooks)"
    # everything it wrote is under the one directory it names, none in the working dir's top
    assert [p.name for p in cwd.iterdir()] in ([], ["notebook-outputs"])
