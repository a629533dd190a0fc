"""The real CPU actor behind llama.cpp: ``N`` llama-cpp-python servers and one front.

``python -m collect.realserve slots=2 threads=1 port=8011`` (after ``make llama-server``)
checks the GGUF file that ``make real-actor`` installed (size, metadata and the pinned
sha256), starts ``slots`` processes ``python -m llama_cpp.server`` from the llama venv
(``.venv-llama``: llama-cpp-python is never installed in the project's venv), each with
the model, ``threads`` threads and its own KV cache, on ``127.0.0.1:port+1..port+N``,
and serves one OpenAI-compatible endpoint on ``127.0.0.1:port``:

    python -m collect out=DIR collect/actor=qwen_coder_0_5b_llamacpp executor.workers=2

A llama-cpp-python server computes one request at a time and reuses the longest common
prefix of its previous prompt (its KV cache holds one sequence). The front therefore
sends an episode's next turn back to the free slot whose previous prompt it extends
(only the new tokens are computed) and a new episode to the free slot that answered
least recently (:class:`Slots`). With as many collector workers as slots no request
waits.

``stop_after_tool_call`` (default on) makes a turn end at the first ``</tool_call>``
as the in-process actor's turns do (the server is asked to stop there and the front
puts the tag back, which the server's stop rule drops); without it a turn runs on to
the model's end token. ``GET /v1/models`` names the served file's ``sha256`` (checked at
start against the pin) and a slot's context window ``n_ctx``, which the openai actor's
``model_sha256`` and ``context_window`` are checked against.
The processes are stopped with their process groups when the
command ends (Ctrl-C, SIGTERM) or, with ``check=true``, after one test request.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from collect.awm.protocol import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from collect.realmodel import MODELS, ModelError, ensure_model
from helpdp.cliconf import doc_field as _f
from helpdp.cliconf import run_app

__all__ = ["RealServeConfig", "ServeError", "Slots", "serve", "server_command", "with_served"]


class ServeError(RuntimeError):
    """A server that cannot start, answer, or be found."""


@dataclass
class RealServeConfig:
    """python -m collect.realserve: the real actor behind llama.cpp servers (one per slot)."""

    model: str = _f(next(iter(MODELS)), f"the installed model to serve: {' | '.join(MODELS)}")
    cache_dir: str | None = _f(
        None, "where make real-actor put it; null: $HELPDP_MODEL_CACHE or ~/.cache/helpdp/models"
    )
    python: str = _f(
        ".venv-llama/bin/python", "the python of the venv with llama-cpp-python (make llama-server)"
    )
    slots: int = _f(1, "server processes, one sequence each (one per collector worker)")
    threads: int = _f(1, "threads per slot (n_threads and n_threads_batch)")
    host: str = _f("127.0.0.1", "the address the front and the servers listen on")
    port: int = _f(8011, "the front's port; slot i listens on port + 1 + i")
    alias: str = _f(
        "",
        "the model name the endpoint answers to (actor.model); empty: the model's own name, "
        "so that source.actor is the in-process actor's (the datasets merge)",
    )
    n_ctx: int = _f(32768, "context window per slot (the model's own)")
    stop_after_tool_call: bool = _f(True, "end a turn at its first </tool_call>, kept in the text")
    start_timeout_s: float = _f(300.0, "seconds a slot may take to answer before it is a failure")
    log_dir: str | None = _f(None, "write slot i's server log to LOG_DIR/slot-i.log (else discard)")
    check: bool = _f(False, "start, send one chat request through the front, print it, stop")


def alias(config: RealServeConfig) -> str:
    """The model name the endpoint answers to."""
    return config.alias or config.model


def server_command(config: RealServeConfig, gguf: Path, slot: int) -> list[str]:
    """The command line of slot ``slot``'s ``llama_cpp.server``."""
    t = str(int(config.threads))
    return [
        config.python,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--model_alias",
        alias(config),
        "--host",
        config.host,
        "--port",
        str(config.port + 1 + slot),
        "--n_ctx",
        str(int(config.n_ctx)),
        "--n_threads",
        t,
        "--n_threads_batch",
        t,
        # the server's default keeps every prompt token's logits: an n_ctx x vocabulary
        # float32 array (20 GB at 32 768 tokens) and the output layer run on every prompt
        # token; sampling needs only the last row
        "--logits_all",
        "false",
    ]


class Slots:
    """Which slot serves the next request, given each slot's previous prompt.

    A prompt is the JSON list of the request's messages. A request that continues a free
    slot's previous prompt (the same list with messages added: the episode's next turn)
    goes there, to the longest such; any other request (a new episode) to the free slot
    that finished last the longest ago (never used first): a slot that has just answered
    is likely to hold an episode whose next turn is on its way. Every slot busy: wait."""

    def __init__(self, n: int):
        if n < 1:
            raise ValueError(f"slots must be at least 1, not {n}")
        self.last = [""] * n  # the prompt each slot computed last (what its KV cache holds)
        self.busy = [False] * n
        self.finished = [0] * n  # when each slot last answered, as a count of answers
        self._answers = 0
        self._cond = threading.Condition()

    def pick(self, prompt: str) -> int:
        with self._cond:
            while all(self.busy):
                self._cond.wait()
            free = [i for i, b in enumerate(self.busy) if not b]
            cont = [i for i in free if self.last[i] and prompt.startswith(self.last[i][:-1])]
            if cont:
                best = max(cont, key=lambda i: (len(self.last[i]), -i))
            else:
                best = min(free, key=lambda i: (self.finished[i], i))
            self.busy[best] = True
            return best

    def done(self, slot: int, prompt: str) -> None:
        """Slot ``slot`` answered (``prompt``: what it holds now; empty after a failure)."""
        with self._cond:
            self._answers += 1
            self.last[slot], self.busy[slot] = prompt, False
            self.finished[slot] = self._answers
            self._cond.notify()


def close_open_call(reply: dict) -> dict:
    """Put back the ``</tool_call>`` that a ``stop`` at it removed: a choice that stopped
    (not at the length limit) with more opening than closing tags ends with the tag."""
    for choice in reply.get("choices") or []:
        msg = choice.get("message") or {}
        text = msg.get("content")
        if (
            choice.get("finish_reason") == "stop"
            and isinstance(text, str)
            and text.count(TOOL_CALL_OPEN) > text.count(TOOL_CALL_CLOSE)
        ):
            msg["content"] = text + TOOL_CALL_CLOSE
    return reply


def _request(host: str, port: int, method: str, path: str, body: bytes | None, timeout: float):
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def with_served(data: bytes, sha256: str, n_ctx: int) -> bytes:
    """A ``/v1/models`` answer with each model's ``sha256`` (the checked file's) and
    ``n_ctx`` (a slot's context window): what the openai actor's ``model_sha256`` and
    ``context_window`` are checked against."""
    try:
        listing = json.loads(data)
        for entry in listing.get("data") or []:
            entry["sha256"] = sha256
            entry["n_ctx"] = n_ctx
    except (ValueError, AttributeError, TypeError):
        return data
    return json.dumps(listing).encode()


def _front(config: RealServeConfig) -> ThreadingHTTPServer:
    slots = Slots(config.slots)
    sha256 = MODELS[config.model].sha256  # serve() has checked the file against it

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, data: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client left (stopped, timed out): no one to tell

        def do_GET(self):  # /v1/models and the like: any slot answers
            status, data = _request(config.host, config.port + 1, "GET", self.path, None, 60)
            if status == 200 and self.path.rstrip("/").endswith("/models"):
                data = with_served(data, sha256, int(config.n_ctx))
            self._send(status, data)

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                req = json.loads(body)
            except ValueError:
                self._send(400, b'{"error": "the body is not JSON"}')
                return
            chat = isinstance(req, dict) and "messages" in req
            if chat and config.stop_after_tool_call and not req.get("stop"):
                req["stop"] = [TOOL_CALL_CLOSE]
            prompt = json.dumps(req.get("messages") if chat else req, sort_keys=True)
            slot = slots.pick(prompt)
            try:
                status, data = _request(
                    config.host,
                    config.port + 1 + slot,
                    "POST",
                    self.path,
                    json.dumps(req).encode(),
                    3600,
                )
            except OSError as e:
                slots.done(slot, "")
                self._send(502, json.dumps({"error": f"slot {slot}: {e!r}"}).encode())
                return
            slots.done(slot, prompt if status == 200 else "")
            if status == 200 and chat and config.stop_after_tool_call:
                data = json.dumps(close_open_call(json.loads(data))).encode()
            self._send(status, data)

        def log_message(self, format, *args):  # noqa: A002 - the base class's name
            pass

    return ThreadingHTTPServer((config.host, config.port), Handler)


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each server's process group, then SIGKILL what is left after 10 s."""
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def _wait_ready(config: RealServeConfig, procs: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + config.start_timeout_s
    pending = set(range(len(procs)))
    while pending:
        for i in sorted(pending):
            if procs[i].poll() is not None:
                where = f" (its log: {config.log_dir}/slot-{i}.log)" if config.log_dir else ""
                raise ServeError(f"slot {i}'s server exited with {procs[i].returncode}{where}")
            with contextlib.suppress(OSError):
                port = config.port + 1 + i
                if _request(config.host, port, "GET", "/v1/models", None, 5)[0] == 200:
                    pending.discard(i)
        if pending and time.monotonic() > deadline:
            raise ServeError(
                f"slots {sorted(pending)} did not answer in {config.start_timeout_s} s"
            )
        if pending:
            time.sleep(0.5)


@contextlib.contextmanager
def serve(config: RealServeConfig) -> Iterator[str]:
    """Start the slots and the front; yield the endpoint's base URL; stop them all."""
    if config.slots < 1 or config.threads < 1:
        raise ServeError(f"slots={config.slots}, threads={config.threads}: each must be at least 1")
    if not Path(config.python).is_file():
        raise ServeError(f"python={config.python}: not found; run `make llama-server` first")
    gguf = ensure_model(config.model, config.cache_dir, check_hash=True)
    logs = Path(config.log_dir) if config.log_dir else None
    if logs:
        logs.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen] = []
    front = None
    try:
        for i in range(config.slots):
            out = open(logs / f"slot-{i}.log", "wb") if logs else subprocess.DEVNULL  # noqa: SIM115
            procs.append(
                subprocess.Popen(
                    server_command(config, gguf, i),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
            if logs:
                out.close()
        _wait_ready(config, procs)
        front = _front(config)
        threading.Thread(target=front.serve_forever, daemon=True).start()
        yield f"http://{config.host}:{config.port}/v1"
    finally:
        if front is not None:
            front.shutdown()
            front.server_close()
        _stop(procs)


def run_serve(config: RealServeConfig) -> int:
    """Serve until interrupted; with ``check``, answer one request and stop."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with serve(config) as url:
        print(
            f"{url}: {config.slots} slot(s) x {config.threads} thread(s), model {alias(config)!r}"
        )
        sys.stdout.flush()
        if config.check:
            body = {
                "model": alias(config),
                "max_tokens": 16,
                "temperature": 0.0,
                "seed": 0,
                "messages": [{"role": "user", "content": "Say hello."}],
            }
            t0 = time.perf_counter()
            status, data = _request(
                config.host,
                config.port,
                "POST",
                "/v1/chat/completions",
                json.dumps(body).encode(),
                600,
            )
            if status != 200:
                raise ServeError(f"the check request got HTTP {status}: {data[:300]!r}")
            reply = json.loads(data)
            text = reply["choices"][0]["message"]["content"]
            print(
                f"check: {text!r} ({reply['usage']['completion_tokens']} tokens, "
                f"{time.perf_counter() - t0:.1f} s): ok"
            )
            return 0
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


def main() -> None:
    run_app(
        "collect.realserve",
        RealServeConfig,
        run_serve,
        config_name="realserve",
        errors=(ModelError, ServeError),
    )


if __name__ == "__main__":
    main()
