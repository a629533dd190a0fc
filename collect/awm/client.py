"""Clients of the environment server (:mod:`collect.awm.serve`), one session each.

:class:`EnvClient` talks HTTP (blocking); :class:`AsyncEnvClient` talks WebSocket
(asyncio, one session per connection). The bearer token is the one given, else
``$HELPDP_SERVE_TOKEN`` (:data:`~collect.awm.http_guard.DEFAULT_TOKEN_ENV`) if set.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os

from collect.awm.http_guard import DEFAULT_TOKEN_ENV
from helpdp.jsonvalue import JSON

__all__ = ["AsyncEnvClient", "EnvClient"]


def _auth_headers(token: str | None) -> dict[str, str]:
    token = token if token is not None else os.environ.get(DEFAULT_TOKEN_ENV, "").strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


class EnvClient:
    """Blocking HTTP client of :func:`create_app`'s server (one session).

    ``token``: the server's bearer token; None: ``$HELPDP_SERVE_TOKEN`` if set.
    ``session_id``: a session this client already holds (ids are made by the server).
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 120.0,
        session_id: str | None = None,
        token: str | None = None,
    ):
        import httpx

        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), timeout=timeout, headers=_auth_headers(token)
        )
        self.session_id = session_id

    def _post(self, path: str, body: dict[str, JSON]) -> dict[str, JSON]:
        response = self._http.post(path, json=body)
        if response.status_code >= 400:
            raise RuntimeError(f"{path}: HTTP {response.status_code}: {response.text}")
        return response.json()

    def _get(self, path: str, **params: JSON) -> dict[str, JSON]:
        response = self._http.get(path, params=params or None)
        if response.status_code >= 400:
            raise RuntimeError(f"{path}: HTTP {response.status_code}: {response.text}")
        return response.json()

    def health(self) -> dict[str, JSON]:
        return self._get("/health")

    def scenarios(self) -> list[dict[str, JSON]]:
        return self._get("/scenarios")["scenarios"]

    def reset(
        self, scenario: str | None = None, task_idx: int = 0, **kwargs: JSON
    ) -> dict[str, JSON]:
        body = {"scenario": scenario, "task_idx": task_idx, **kwargs}
        if self.session_id:
            body["session_id"] = self.session_id
        reply = self._post("/reset", body)
        self.session_id = reply["session_id"]
        return reply

    def step(self, text: str) -> dict[str, JSON]:
        """One model turn (tool-call tags or a final answer)."""
        return self.act({"type": "turn", "text": text})

    def list_tools(self) -> dict[str, JSON]:
        return self.act({"type": "list_tools"})

    def call_tool(
        self, tool_name: str, arguments: dict[str, JSON] | str | None = None
    ) -> dict[str, JSON]:
        return self.act({"type": "call_tool", "tool_name": tool_name, "arguments": arguments or {}})

    def act(self, action: dict[str, JSON]) -> dict[str, JSON]:
        return self._post("/step", {"action": action, "session_id": self.session_id})

    def state(self) -> dict[str, JSON]:
        return self._get("/state", session_id=self.session_id)

    def close(self) -> None:
        if self.session_id:
            with contextlib.suppress(Exception):
                self._post("/close", {"session_id": self.session_id})
        self._http.close()

    def __enter__(self) -> EnvClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncEnvClient:
    """Asyncio WebSocket client (one session per connection); use ``async with``.

    ``token``: the server's bearer token; None: ``$HELPDP_SERVE_TOKEN`` if set.
    """

    def __init__(self, url: str, *, timeout: float = 120.0, token: str | None = None):
        self.url = url.replace("http://", "ws://").replace("https://", "wss://").rstrip("/")
        if not self.url.endswith("/ws"):
            self.url += "/ws"
        self.timeout = timeout
        self._headers = _auth_headers(token)
        self._ws = None

    async def __aenter__(self) -> AsyncEnvClient:
        import websockets

        self._ws = await websockets.connect(
            self.url,
            open_timeout=self.timeout,
            max_size=2**26,
            additional_headers=self._headers or None,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, kind: str, data: dict[str, JSON] | None = None) -> dict[str, JSON]:
        assert self._ws is not None, "use 'async with AsyncEnvClient(...)'"
        await self._ws.send(json.dumps({"type": kind, "data": data or {}}))
        reply = json.loads(await asyncio.wait_for(self._ws.recv(), self.timeout))
        if reply.get("type") == "error":
            raise RuntimeError(reply["data"].get("message"))
        return reply["data"]

    async def reset(
        self, scenario: str | None = None, task_idx: int = 0, **kwargs: JSON
    ) -> dict[str, JSON]:
        return await self._call("reset", {"scenario": scenario, "task_idx": task_idx, **kwargs})

    async def step(self, text: str) -> dict[str, JSON]:
        return await self._call("step", {"type": "turn", "text": text})

    async def act(self, action: dict[str, JSON]) -> dict[str, JSON]:
        return await self._call("step", action)

    async def state(self) -> dict[str, JSON]:
        return await self._call("state")

    async def close(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.send(json.dumps({"type": "close"}))
            await self._ws.close()
            self._ws = None
