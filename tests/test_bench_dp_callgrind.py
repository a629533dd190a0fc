"""bench/dp_callgrind.py: the jitted block's cost read from callgrind_annotate's text (a
sample of valgrind 3.19's format, written by hand; valgrind itself is not run here)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SAMPLE = """\
--------------------------------------------------------------------------------
Ir                      file:function
--------------------------------------------------------------------------------
4,867,029,629 (100.0%)  PROGRAM TOTALS
  471,601,885 ( 9.69%)  /tmp/Python-3.11.7/Python/ceval.c:_PyEval_EvalFrameDefault'2 [/lib/libpython3.11.so.1.0]
  187,937,290 ( 3.86%)  ???:crc32_z [/usr/lib/x86_64-linux-gnu/libz.so.1.2.13]
    5,483,769 ( 0.11%)  ???:0x000000000000aa60 [/usr/lib/x86_64-linux-gnu/libz.so.1.2.13]
  550,364,045 (11.31%)  ???:0x0000000007599000 [???]
      123,456 ( 0.00%)  ???:0x00000000075a1000 [???]
"""


def _bench():
    spec = importlib.util.spec_from_file_location(
        "bench_dp_callgrind", ROOT / "bench" / "dp_callgrind.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_jit_block_cost_is_the_largest_unnamed_block():
    # not the program total, not a symbol-less block of a named library (libz's 0xaa60)
    assert _bench().jit_block_cost(SAMPLE) == 550_364_045


def test_no_jitted_block_is_an_error():
    text = "\n".join(line for line in SAMPLE.splitlines() if "[???]" not in line)
    with pytest.raises(ValueError, match=r"no block of an unnamed object"):
        _bench().jit_block_cost(text)
