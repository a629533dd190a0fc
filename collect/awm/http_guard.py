"""The servers' guard: the bearer token and the size limits, checked before any body is read,
and the limits on connections, held before any header is read.

``_Guard`` is the ASGI middleware of :mod:`collect.awm.serve` and
:mod:`collect.awm.openenv_server`: it checks the bearer token of every request and
WebSocket handshake (``/health`` excepted, compared in constant time) and limits request
bodies and WebSocket messages without buffering more than the limit (the body of a
request refused for its token is read for at most ``drain_timeout_s``).
:func:`is_loopback` tells whether a bind address needs a token; :data:`DEFAULT_TOKEN_ENV`
names the environment variable the server and its clients
(:mod:`collect.awm.client`) read the token from.

The token can only be checked once a request's headers are in: below the ASGI app,
:func:`guarded_protocol` makes uvicorn's HTTP protocol hold :class:`ConnectionLimits`
(a connection's headers must arrive within ``header_timeout_s``; at most
``max_connections`` open, kept below the open-file limit, and
``max_connections_per_client`` of one address), so that connections that never finish
their headers (slowloris) cannot use up the server's file descriptors.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import resource
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from helpdp.cliconf import doc_field as _f

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "DEFAULT_TOKEN_ENV",
    "ConnectionLimits",
    "connection_cap",
    "guarded_protocol",
    "is_loopback",
    "listen_backlog",
]

_log = logging.getLogger("collect.awm.http_guard")

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
    ``max_bytes`` without buffering more than that. The body of a request refused for
    its token is read (so that the client sees the 401) for at most ``drain_timeout_s``,
    then the connection is closed."""

    def __init__(
        self, app: ASGIApp, token: str | None, max_bytes: int, drain_timeout_s: float = 10.0
    ):
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None
        self.max_bytes = max_bytes
        self.drain_timeout_s = drain_timeout_s

    def _authorized(self, scope: Scope) -> bool:
        if self.expected is None or scope.get("path") == "/health":
            return True
        given = b""
        for name, value in scope.get("headers") or []:
            if name.lower() == b"authorization":
                given = value
        return hmac.compare_digest(given, self.expected)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._authorized(scope):
            # read (and drop) a body within the limit first: closing a connection with an
            # unread request body in it resets it, and the client may never see the 401
            try:
                drained = await asyncio.wait_for(
                    _drain(receive, self.max_bytes), self.drain_timeout_s
                )
            except asyncio.TimeoutError:  # a body that never ends: no reason to wait
                drained = False
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

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._authorized(scope):
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008})  # -> HTTP 403
            return

        async def bounded() -> Message:
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


async def _drain(receive: Receive, limit: int) -> bool:
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
    send: Send, status: int, message: str, *, bearer: bool = False, close: bool = True
) -> None:
    headers = [(b"content-type", b"application/json")]
    if close:
        headers.append((b"connection", b"close"))
    if bearer:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps({"detail": message}).encode()})


# ---------------------------------------------------------------------------
# connections: below the ASGI app, before any header is read
# ---------------------------------------------------------------------------


@dataclass
class ConnectionLimits:
    """Limits on the server's TCP connections, held before a request's headers are read
    (the bearer token is in the headers: until they are in, any client may hold a
    connection)."""

    header_timeout_s: float = _f(
        10.0,
        "a connection's request headers must be in within this many seconds of its opening "
        "(or of the end of its previous response); else it is closed",
    )
    max_connections: int = _f(
        512,
        "TCP connections open at once (HTTP and WebSocket), at most half the process's "
        "open-file limit (RLIMIT_NOFILE); one more closes the oldest connection still "
        "waiting for its headers, or is itself closed when there is none",
    )
    max_connections_per_client: int = _f(
        64,
        "connections of one client address (the socket's peer: behind a reverse proxy, "
        "the proxy); one more closes that client's oldest connection still waiting for "
        "its headers, or is itself closed",
    )


def connection_cap(limits: ConnectionLimits) -> int:
    """``limits.max_connections`` kept to at most half the soft open-file limit (the
    rest for the pool's workers, databases and the listening socket); at least 1."""
    cap = max(1, int(limits.max_connections))
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY:
        cap = min(cap, max(1, soft // 2))
    return cap


def listen_backlog() -> int:
    """The listen queue to ask for: asyncio accepts up to that many connections in one go
    before any of them is looked at (and a closed one frees its descriptor only a few
    loop turns later), so a flood takes the cap plus a few backlogs of descriptors. Kept
    to 1/16 of the soft open-file limit, between 8 and uvicorn's default of 2048."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 2048
    return max(8, min(2048, soft // 16))


class _Cycle(Protocol):
    """What the guard reads of uvicorn's request-response cycle (``H11Protocol``'s and
    ``HttpToolsProtocol``'s ``RequestResponseCycle``)."""

    response_complete: bool


def _peer(conn: asyncio.BaseProtocol) -> object:
    transport = getattr(conn, "transport", None)
    try:
        name = transport.get_extra_info("peername") if transport is not None else None
    except Exception:  # noqa: BLE001 - a transport of another kind: no address
        return None
    return name[0] if isinstance(name, tuple) and name else name


def _open(conn: asyncio.BaseProtocol) -> bool:
    transport = getattr(conn, "transport", None)
    return transport is not None and not transport.is_closing()


def guarded_protocol(base: type, limits: ConnectionLimits) -> type:
    """A subclass of uvicorn's HTTP protocol ``base`` (``H11Protocol``,
    ``HttpToolsProtocol``: each sets ``self.cycle`` when a request's headers are in and
    calls ``on_response_complete`` after its response) that holds ``limits``:

    - a connection opened, or done with its previous response, has ``header_timeout_s``
      for the headers of its next request, else it is closed (uvicorn has no such
      timeout: its keep-alive timer stops at the first byte received);
    - over :func:`connection_cap` connections in all (WebSockets included: uvicorn's
      server state counts them), or ``max_connections_per_client`` of one address, a new
      connection closes the oldest one still waiting for its headers (of that address,
      for the per-client limit), and is itself closed when there is none. Waiting
      connections cannot keep honest ones out; requests in progress and WebSocket
      sessions are never closed for a newcomer.

    The subclass counts what it closed in ``closed`` (``header_timeout``, ``over_cap``,
    ``over_client_cap``, ``evicted``)."""
    cap = connection_cap(limits)
    per_client = max(1, int(limits.max_connections_per_client))
    timeout = float(limits.header_timeout_s)

    class GuardedProtocol(base):
        closed = {"header_timeout": 0, "over_cap": 0, "over_client_cap": 0, "evicted": 0}
        max_connections = cap
        _last_warning = [0.0]

        @property
        def cycle(self) -> _Cycle | None:
            return self.__dict__.get("_guarded_cycle")

        @cycle.setter
        def cycle(self, value: _Cycle | None) -> None:
            self.__dict__["_guarded_cycle"] = value
            if value is not None:  # a request's headers are in
                self._disarm()

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self._waiting_since: float | None = None
            self._header_timer: asyncio.TimerHandle | None = None
            self._arm()
            if not self._admit():
                self._disarm()
                transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            self._arm()  # first: a pipelined request started by super() disarms it
            super().on_response_complete()

        # -- the header timeout -----------------------------------------------------
        def _arm(self) -> None:
            self._disarm()
            self._waiting_since = time.monotonic()
            self._header_timer = self.loop.call_later(timeout, self._header_timeout)

        def _disarm(self) -> None:
            timer = getattr(self, "_header_timer", None)
            if timer is not None:
                timer.cancel()
            self._header_timer = None
            self._waiting_since = None

        def _waiting(self) -> bool:
            """Open, still this transport's protocol (not upgraded to a WebSocket), and
            waiting for the headers of its next request."""
            return (
                self._waiting_since is not None
                and _open(self)
                and self.transport.get_protocol() is self
            )

        def _header_timeout(self) -> None:
            self._header_timer = None
            cycle = self.cycle
            if not self._waiting() or (cycle is not None and not cycle.response_complete):
                self._waiting_since = None
                return
            self._waiting_since = None
            type(self).closed["header_timeout"] += 1
            self.transport.close()

        # -- the connection caps ----------------------------------------------------
        def _admit(self) -> bool:
            conns = [c for c in list(self.connections) if _open(c)]
            peer = _peer(self)
            mine = [c for c in conns if _peer(c) == peer] if peer is not None else []
            if len(mine) > per_client:
                return self._make_room(mine, "over_client_cap")
            if len(conns) > cap:
                return self._make_room(conns, "over_cap")
            return True

        def _make_room(self, conns: list[asyncio.BaseProtocol], why: str) -> bool:
            waiting = [
                c
                for c in conns
                if c is not self and isinstance(c, GuardedProtocol) and c._waiting()
            ]
            counts = type(self).closed
            if not waiting:
                counts[why] += 1
                self._warn(why)
                return False
            oldest = min(waiting, key=lambda c: c._waiting_since)
            oldest._disarm()
            oldest.transport.close()
            counts["evicted"] += 1
            self._warn("evicted")
            return True

        def _warn(self, why: str) -> None:
            now = time.monotonic()
            if now - self._last_warning[0] >= 60.0:  # at most one line a minute
                self._last_warning[0] = now
                _log.warning(
                    "connection limits (max_connections=%d, max_connections_per_client=%d): "
                    "closed so far %s",
                    cap,
                    per_client,
                    dict(type(self).closed),
                )

    GuardedProtocol.__name__ = GuardedProtocol.__qualname__ = f"Guarded{base.__name__}"
    return GuardedProtocol
