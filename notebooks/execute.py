"""Execute the walkthrough notebooks in place, so that they ship with their outputs.

    python notebooks/execute.py               # every notebook here (what `make notebooks` runs)
    python notebooks/execute.py 03_helper     # some of them, by name

Each notebook runs top to bottom in a fresh kernel whose working directory is this
folder, as when a reader opens it in Jupyter; what it writes goes under the directory
it names (``notebook-outputs/NN``, ignored by git). The outputs are made deterministic
(no timings, no progress bars, fixed hash seed, no volatile metadata), so that
``tests/test_notebooks.py`` can run every notebook again and check that each text
output is the same: a change that moves a number fails there, and is shipped by
running this script again.

Needs the ``notebooks`` extra: ``pip install -e '.[notebooks]'`` (nbclient, nbformat and
ipykernel: what runs them; to open them interactively, add the Jupyter of your choice,
e.g. ``pip install jupyterlab``, or use an editor that runs ipykernel kernels).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
NOTEBOOKS = sorted(HERE.glob("*.ipynb"))
TIMEOUT_S = 1800  # per cell (a loaded 2-core machine runs 02 and 03 ten times slower)

# What the kernel's environment sets, so that outputs do not depend on the machine.
KERNEL_ENV = {
    "PYTHONHASHSEED": "0",
    "TQDM_DISABLE": "1",  # tqdm >= 4.66 honours it: no progress bar anywhere
    "PYTHONWARNINGS": "ignore",  # a warning's text names the file it came from
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "OMP_NUM_THREADS": "2",
    "MKL_NUM_THREADS": "2",
}
COMPARED = ("text/plain", "text/markdown")  # rich outputs whose text must not change
# Stable notebook metadata: no Python version in the shipped file.
METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {
        "codemirror_mode": {"name": "ipython", "version": 3},
        "file_extension": ".py",
        "mimetype": "text/x-python",
        "name": "python",
        "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3",
    },
}


def kernel_env() -> dict[str, str]:
    env = {**os.environ, **KERNEL_ENV}
    env.pop("MPLBACKEND", None)  # the kernel's inline backend: plots become PNG outputs
    # the interpreter running this script runs the kernel (the venv's, not whatever is on PATH)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def execute(nb_path: Path, cwd: Path) -> nbformat.NotebookNode:
    """Run ``nb_path`` in a fresh kernel in ``cwd``; return the executed notebook.

    Raises ``nbclient.exceptions.CellExecutionError`` when a cell fails.
    """
    nb = nbformat.read(nb_path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=TIMEOUT_S,
        record_timing=False,
        coalesce_streams=True,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute(cwd=str(cwd), env=kernel_env())
    return clean(nb)


def clean(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drop what changes from run to run and is no output: timings, kernel version."""
    nb.metadata = nbformat.from_dict(METADATA)
    nb.nbformat, nb.nbformat_minor = 4, 5
    for i, cell in enumerate(nb.cells):
        cell.setdefault("id", f"cell-{i:02d}")  # stable ids (nbformat 4.5 wants one)
        for key in ("execution", "collapsed", "scrolled"):
            cell.metadata.pop(key, None)
        for out in cell.get("outputs", []):
            out.get("metadata", {}).pop("execution", None)
    return nb


def text_outputs(nb: nbformat.NotebookNode) -> list[dict]:
    """Per code cell, what the test compares: its stdout and stderr text, and each rich
    output's plain text and markdown; other types (a table's HTML, a plot's PNG) as a
    marker that they are there, not their bytes."""
    cells = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        streams = {"stdout": "", "stderr": ""}
        rich = []
        for out in cell.outputs:
            if out.output_type == "stream":
                streams[out.name] += out.text
            elif out.output_type == "error":
                rich.append(("error", out.ename, out.evalue))
            else:
                data = out.get("data", {})
                rich.append(
                    (out.output_type,)
                    + tuple(
                        (mime, data[mime] if mime in COMPARED else "<present>")
                        for mime in sorted(data)
                    )
                )
        cells.append({"cell": i, **streams, "outputs": rich})
    return cells


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "names", nargs="*", help="notebooks by name (e.g. 01_budget_search); all if none"
    )
    args = ap.parse_args(argv)
    paths = NOTEBOOKS
    if args.names:
        by_name = {p.stem: p for p in NOTEBOOKS} | {p.name: p for p in NOTEBOOKS}
        unknown = [n for n in args.names if n not in by_name]
        if unknown:
            ap.error(
                f"no notebook {', '.join(unknown)} (have: {', '.join(p.stem for p in NOTEBOOKS)})"
            )
        paths = [by_name[n] for n in args.names]
    for path in paths:
        started, cpu = time.perf_counter(), _children_cpu()
        nb = execute(path, cwd=HERE)
        nbformat.validate(nb)
        nbformat.write(nb, path)
        print(
            f"{path.name}: executed in {time.perf_counter() - started:.0f}s "
            f"({_children_cpu() - cpu:.0f} CPU-s in the kernel and the processes it waited for)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
