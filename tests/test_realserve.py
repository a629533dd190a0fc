"""collect.realserve: the front over N llama.cpp slots, run against stand-in servers (a
``llama_cpp.server`` module that answers like one), so no weights and no llama.cpp."""

import http.client
import json
import socket
import sys
from pathlib import Path

import pytest

from collect import realserve
from collect.realserve import RealServeConfig, ServeError, Slots, close_open_call, server_command

FAKE = """
import json, os, subprocess, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
port = int(args["--port"])
child = subprocess.Popen(["sleep", "300"])  # a process of its tree: stopped with it
print(json.dumps({"pid": os.getpid(), "child": child.pid, "threads": args["--n_threads"]}),
      flush=True)
class H(BaseHTTPRequestHandler):
    def _send(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self._send({"data": [{"id": args["--model_alias"]}]})
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        stop = req.get("stop") == ["</tool_call>"]
        text = json.dumps({"port": port, "stop_at_tag": stop, "model": req["model"]})
        self._send({"choices": [{"finish_reason": "stop", "message": {"role": "assistant",
                    "content": text + " <tool_call>{}"}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
    def log_message(self, *a):
        pass
HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def _free_ports(n: int) -> int:
    """A base port with ``n`` free ports from it."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free ports")


def _chat(port: int, messages: list[dict]) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = json.dumps({"model": "m", "messages": messages, "seed": 3})
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    reply = json.loads(resp.read())
    conn.close()
    return reply


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def test_the_front_keeps_episodes_on_their_slots_and_stops_the_process_trees(tmp_path, monkeypatch):
    pkg = tmp_path / "fake" / "llama_cpp"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "server.py").write_text(FAKE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "fake"))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(realserve, "ensure_model", lambda *a, **k: gguf)
    port = _free_ports(3)
    cfg = RealServeConfig(
        slots=2, threads=1, port=port, python=sys.executable, log_dir=str(tmp_path / "logs")
    )
    sys_msg = {"role": "system", "content": "tools"}
    a1 = [sys_msg, {"role": "user", "content": "task A"}]
    b1 = [sys_msg, {"role": "user", "content": "task B"}]
    turn = [{"role": "assistant", "content": "call"}, {"role": "user", "content": "result"}]
    with realserve.serve(cfg) as url:
        assert url == f"http://127.0.0.1:{port}/v1"
        got = []
        for messages in (a1, b1, a1 + turn, b1 + turn, a1 + turn + turn, [sys_msg]):
            reply = _chat(port, messages)
            text = reply["choices"][0]["message"]["content"]
            assert text.endswith(" <tool_call>{}</tool_call>")  # the stop's tag, put back
            seen = json.loads(text.split(" <tool_call>")[0])
            assert seen["stop_at_tag"] and seen["model"] == "m"
            got.append(seen["port"] - port - 1)
        # A on slot 0, B on the unused slot 1, each next turn on its own slot; a new
        # episode on the slot that answered least recently (0: A's turn 2 came before B's)
        # ... after A's third turn (slot 0), the least recent is slot 1
        assert got == [0, 1, 0, 1, 0, 1]
    logs = [json.loads((tmp_path / "logs" / f"slot-{i}.log").read_text()) for i in (0, 1)]
    assert [x["threads"] for x in logs] == ["1", "1"]
    for x in logs:
        assert _gone(x["pid"]) and _gone(x["child"])


def test_slots_prefer_the_continued_prompt_then_the_least_recent():
    s = Slots(3)
    assert s.pick('[{"a": 1}]') == 0
    assert s.pick('[{"b": 1}]') == 1  # slot 0 busy; 1 and 2 unused: the lowest
    s.done(1, '[{"b": 1}]')
    s.done(0, '[{"a": 1}]')
    assert s.pick('[{"a": 1}, {"c": 2}]') == 0  # continues slot 0's prompt
    assert s.pick('[{"d": 1}]') == 2  # a new prompt: the never-used slot
    s.done(2, '[{"d": 1}]')
    assert s.pick('[{"e": 1}]') == 1  # slot 1 answered before slot 2
    s.done(1, "")  # a failed request: nothing to continue
    # slot 1 lost B's prompt, so B's next turn is a new prompt: to the least recent, slot 2
    assert s.pick('[{"b": 1}, {"x": 2}]') == 2
    with pytest.raises(ValueError, match="at least 1"):
        Slots(0)


def test_close_open_call_puts_back_only_a_stopped_tag():
    def reply(text, finish="stop"):
        return {"choices": [{"finish_reason": finish, "message": {"content": text}}]}

    assert close_open_call(reply("<tool_call>{}"))["choices"][0]["message"]["content"] == (
        "<tool_call>{}</tool_call>"
    )
    for text, finish in (
        ("done.", "stop"),
        ("<tool_call>{}</tool_call>", "stop"),
        ("<tool_call>{", "length"),
    ):
        assert close_open_call(reply(text, finish))["choices"][0]["message"]["content"] == text


def test_server_command_and_the_checks_before_starting(tmp_path):
    cfg = RealServeConfig(slots=2, threads=3, port=9000, python="/py")
    cmd = server_command(cfg, Path("/m/q.gguf"), 1)
    assert cmd[:3] == ["/py", "-m", "llama_cpp.server"]
    opts = dict(zip(cmd[3::2], cmd[4::2]))
    assert opts == {
        "--model": "/m/q.gguf",
        "--model_alias": cfg.model,
        "--host": "127.0.0.1",
        "--port": "9002",
        "--n_ctx": "32768",
        "--n_threads": "3",
        "--n_threads_batch": "3",
        "--logits_all": "false",
    }
    with pytest.raises(ServeError, match="make llama-server"):
        with realserve.serve(RealServeConfig(python=str(tmp_path / "nope"))):
            pass
    with pytest.raises(ServeError, match="at least 1"):
        with realserve.serve(RealServeConfig(slots=0)):
            pass


def test_the_openai_actor_checks_the_served_sha256_and_cuts_after_the_call(tmp_path, monkeypatch):
    from collect.actors import OpenAIActor, OpenAIActorConfig
    from collect.realmodel import MODELS
    from collect.types import TurnRequest

    pkg = tmp_path / "fake" / "llama_cpp"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "server.py").write_text(FAKE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "fake"))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(realserve, "ensure_model", lambda *a, **k: gguf)
    cfg = RealServeConfig(slots=1, port=_free_ports(2), python=sys.executable)
    pin = MODELS[cfg.model].sha256
    with realserve.serve(cfg) as url:

        def actor(**kw):
            return OpenAIActor(OpenAIActorConfig(base_url=url, model=cfg.model, retries=0, **kw))

        with pytest.raises(ValueError, match=rf"^actor.model_sha256: .* sha256 '{pin}', not 0+ "):
            actor(model_sha256="0" * 64)
        # the context window the run pins (a longer episode ends context_full) is the served one
        with pytest.raises(
            ValueError, match=r"^actor.context_window: .* with n_ctx 32768, not 16384"
        ):
            actor(model_sha256=pin, context_window=16384)
        actor(context_window=cfg.n_ctx).close()
        a = actor(model_sha256=pin, stop_after_tool_call=True)
        (reply,) = a.generate([TurnRequest([{"role": "user", "content": "hi"}], 1, None)])
        a.close()
        assert reply.error is None and reply.text.endswith(" <tool_call>{}</tool_call>")
        # another model name under the endpoint: no sha256 for it
        with pytest.raises(ValueError, match="serves 'other' with sha256 None"):
            OpenAIActor(OpenAIActorConfig(base_url=url, model="other", model_sha256=pin, retries=0))


def test_with_served_names_the_file_and_the_window_in_each_model_entry():
    got = json.loads(realserve.with_served(b'{"data": [{"id": "a"}, {"id": "b"}]}', "ab12", 8))
    assert got == {
        "data": [
            {"id": "a", "sha256": "ab12", "n_ctx": 8},
            {"id": "b", "sha256": "ab12", "n_ctx": 8},
        ]
    }
    assert realserve.with_served(b"not json", "ab12", 8) == b"not json"


def test_a_client_that_left_is_not_an_error():
    """A client that stops (a killed collection, a timed-out turn) before its reply is
    written: the front drops the reply and closes the connection, with no traceback."""

    class Gone:
        def write(self, data):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            pass

    server = realserve._front(RealServeConfig(port=_free_ports(1)))
    try:
        handler = object.__new__(server.RequestHandlerClass)
        handler.wfile, handler.request_version, handler.requestline = Gone(), "HTTP/1.1", "POST /"
        handler.close_connection = False
        handler._send(200, b"{}")
        assert handler.close_connection
    finally:
        server.server_close()
