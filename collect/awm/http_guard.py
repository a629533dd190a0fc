"""The servers' guard: the bearer token and the size limits, checked before any body is read.

``_Guard`` is the ASGI middleware of :mod:`collect.awm.serve` and
:mod:`collect.awm.openenv_server`: it checks the bearer token of every request and
WebSocket handshake (``/health`` excepted, compared in constant time) and limits request
bodies and WebSocket messages without buffering more than the limit.
:func:`is_loopback` tells whether a bind address needs a token; :data:`DEFAULT_TOKEN_ENV`
names the environment variable the server and its clients
(:mod:`collect.awm.client`) read the token from.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
from typing import Any

__all__ = ["DEFAULT_TOKEN_ENV", "is_loopback"]

DEFAULT_TOKEN_ENV = "HELPDP_SERVE_TOKEN"


def is_loopback(host: str) -> bool:
    """True for an address that only this machine can reach (``localhost`` included)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Guard:
    """ASGI middleware: checks the bearer token of every request and WebSocket handshake
    (``/health`` excepted), and limits request bodies and WebSocket messages to
    ``max_bytes`` without buffering more than that."""

    def __init__(self, app: Any, token: str | None, max_bytes: int):
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None
        self.max_bytes = max_bytes

    def _authorized(self, scope: dict) -> bool:
        if self.expected is None or scope.get("path") == "/health":
            return True
        given = b""
        for name, value in scope.get("headers") or []:
            if name.lower() == b"authorization":
                given = value
        return hmac.compare_digest(given, self.expected)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _http(self, scope: dict, receive: Any, send: Any) -> None:
        if not self._authorized(scope):
            # read (and drop) a body within the limit first: closing a connection with an
            # unread request body in it resets it, and the client may never see the 401
            drained = await _drain(receive, self.max_bytes)
            await _refuse(
                send, 401, "missing or wrong bearer token", bearer=True, close=not drained
            )
            return
        length = None
        for name, value in scope.get("headers") or []:
            if name.lower() == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    await _refuse(send, 400, "bad Content-Length")
                    return
        if length is not None and length > self.max_bytes:
            await _refuse(send, 413, f"request body over {self.max_bytes} bytes")
            return
        # count what arrives (chunked bodies, or a Content-Length that lies), keep at most
        # max_bytes, then replay it to the app
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _refuse(send, 413, f"request body over {self.max_bytes} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> dict:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _websocket(self, scope: dict, receive: Any, send: Any) -> None:
        if not self._authorized(scope):
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008})  # -> HTTP 403
            return

        async def bounded() -> dict:
            message = await receive()
            if message["type"] == "websocket.receive":
                data = message.get("bytes") or b""
                text = message.get("text")
                size = len(text.encode("utf-8", "surrogatepass")) if text else len(data)
                if size > self.max_bytes:
                    with contextlib.suppress(Exception):
                        await send({"type": "websocket.close", "code": 1009})
                    return {"type": "websocket.disconnect", "code": 1009}
            return message

        await self.app(scope, bounded, send)


async def _drain(receive: Any, limit: int) -> bool:
    """Read a request body to its end and drop it; False when it exceeds ``limit``
    bytes or the client went away (then the connection is closed instead)."""
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return False
        size += len(message.get("body", b""))
        if size > limit:
            return False
        if not message.get("more_body", False):
            return True


async def _refuse(
    send: Any, status: int, message: str, *, bearer: bool = False, close: bool = True
) -> None:
    headers = [(b"content-type", b"application/json")]
    if close:
        headers.append((b"connection", b"close"))
    if bearer:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps({"detail": message}).encode()})
