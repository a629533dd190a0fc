"""Walkthrough notebooks run top to bottom (their code cells, in a fresh process)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(nb, tmp_path):
    cells = json.loads(nb.read_text())["cells"]
    code = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    script = tmp_path / f"{nb.stem}.py"
    script.write_text(code)
    env = {**os.environ, "MPLBACKEND": "Agg"}
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, check=True, timeout=600)
