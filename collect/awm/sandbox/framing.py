"""Length-prefixed JSON frames between the parent and a worker (standard library only).

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON: no
pickle, so a compromised worker cannot execute code in the parent. Both sides
use this module (the worker loads it by file path), and both copy files with its
:func:`copy_fd`, the one bounded copy loop of the sandbox. :func:`decode` turns every
way a frame can be bad (malformed or oversized JSON, nesting deep enough to
raise ``RecursionError``, a ``MemoryError``, a value that is not an object)
into a :class:`FrameError`, which the parent treats as a protocol violation.
"""

from __future__ import annotations

import json
import os
import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from helpdp.jsonvalue import JSON

HEADER = struct.Struct(">I")
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class FrameError(ValueError):
    """A frame that is not a JSON object within the size limit."""


def encode(obj: JSON) -> bytes:
    data = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str).encode(
        "utf-8", "surrogatepass"
    )
    return HEADER.pack(len(data)) + data


def check_size(size: int, limit: int = MAX_MESSAGE_BYTES) -> None:
    if size > limit:
        raise FrameError(f"frame of {size} bytes exceeds the message limit ({limit} bytes)")


def decode(body: bytes) -> dict[str, JSON]:
    """The object in ``body``; :class:`FrameError` for anything else."""
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise FrameError(f"malformed frame: {str(e)[:200]}") from None
    except RecursionError:
        raise FrameError("frame nested too deeply (RecursionError while decoding)") from None
    except MemoryError:
        raise FrameError("frame too large to decode (MemoryError)") from None
    if not isinstance(obj, dict):
        raise FrameError("frame is not a JSON object")
    return obj


def read_exact_blocking(fd: int, n: int) -> bytes | None:
    """``n`` bytes from ``fd``, or None at end of file."""
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def write_all_blocking(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def copy_fd(src: int, dst: int, max_bytes: int | None = None, name: str = "file") -> int:
    """Copy ``src`` to ``dst`` from their offsets to ``src``'s end, 1 MiB per read; the
    bytes copied. Bounded: more than ``max_bytes`` (a file that grows while it is
    copied) is an ``OSError`` naming ``name`` before anything past the bound is written.
    The one copy loop of both sides: the parent's reads of files workers wrote
    (``files.copy_file_nofollow``), its private seed copies (``worker.write_seed``) and a
    worker's copy of its read-only seed (``ops.op_load_app``)."""
    copied = 0
    while chunk := os.read(src, 1 << 20):
        copied += len(chunk)
        if max_bytes is not None and copied > max_bytes:
            raise OSError(f"{name} grew past {max_bytes} bytes while copying")
        write_all_blocking(dst, chunk)
    return copied


def recv_blocking(fd: int, limit: int = MAX_MESSAGE_BYTES) -> dict[str, JSON] | None:
    """One frame from a blocking ``fd`` (None at end of file)."""
    header = read_exact_blocking(fd, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    check_size(size, limit)
    body = read_exact_blocking(fd, size)
    if body is None:
        return None
    return decode(body)
