"""One OpenAI-compatible chat client (the ``openai`` SDK) for every model endpoint.

The actor (``collect/actor=openai``), the ``expert_llm`` intervention and the SQL-mode
judge of :mod:`collect.awm.verification` all talk to ``POST {base_url}/chat/completions``
through :class:`ChatClient`, configured by one :class:`EndpointConfig` (their config
classes inherit its fields). Retries are the SDK's: ``retries`` more attempts after
a connection error, a timeout or an HTTP 408, 409, 429 or 5xx, with exponential
backoff (and the server's ``Retry-After``); any other 4xx fails at once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from helpdp.cliconf import doc_field as _f

if TYPE_CHECKING:
    import httpx2

__all__ = ["ChatClient", "ChatResult", "EndpointConfig", "EndpointError"]


@dataclass
class EndpointConfig:
    """An OpenAI-compatible chat endpoint."""

    base_url: str = _f("", "OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1")
    model: str = _f("", "model name sent to the endpoint")
    api_key_env: str = _f(
        "OPENAI_API_KEY",
        "environment variable holding the API key (unset or empty: no Authorization header)",
    )
    timeout_s: float = _f(120.0, "HTTP timeout of one request, s")
    retries: int = _f(
        3,
        "retries of a failed request (connection errors, timeouts, HTTP 408/409/429/5xx; "
        "exponential backoff, the server's Retry-After honoured)",
    )


class EndpointError(RuntimeError):
    """An endpoint failed (after its retries, or at once on a 4xx that is not retried).
    ``context_full``: it refused the request because the prompt does not fit the model's
    context window (HTTP 400 with OpenAI's ``context_length_exceeded``, which vLLM and
    llama.cpp's server also send, or their "maximum context length" message)."""

    def __init__(self, message: str, *, context_full: bool = False):
        super().__init__(message)
        self.context_full = context_full


#: how an OpenAI-compatible endpoint words a prompt that does not fit the context window
CONTEXT_FULL_MARKERS = ("context_length_exceeded", "maximum context length")


@dataclass
class ChatResult:
    """A completion's text and token counts."""

    text: str
    prompt_tokens: int
    completion_tokens: int


class ChatClient:
    """``chat.completions.create`` on one endpoint (thread-safe; one client per endpoint).

    ``transport``: an ``httpx2`` transport for tests (the SDK's HTTP library).
    """

    def __init__(self, config: EndpointConfig, *, transport: httpx2.BaseTransport | None = None):
        if not config.base_url:
            raise ValueError("an OpenAI-compatible endpoint needs base_url")
        self.model = config.model
        self.retries = int(config.retries)
        key = os.environ.get(config.api_key_env or "", "")
        http_client = None
        if transport is not None:
            import httpx2

            http_client = httpx2.Client(transport=transport)
        import openai  # the env extra; imported on use, so `--help` needs only the core

        self._openai = openai
        self._client = openai.OpenAI(
            base_url=config.base_url.rstrip("/"),
            api_key=key or "unset",  # the SDK wants one; without a key it is not sent:
            timeout=float(config.timeout_s),
            max_retries=self.retries,
            http_client=http_client,
        )
        self._headers = None if key else {"Authorization": openai.omit}

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        temperature: float,
        max_tokens: int,
        top_p: float = 1.0,
        seed: int | None = None,
        extra_body: dict | None = None,
    ) -> ChatResult:
        """One completion (``extra_body``: more request fields, e.g. a server's own
        sampling options); :class:`EndpointError` when the endpoint fails."""
        try:
            reply = self._client.chat.completions.create(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                temperature=temperature,
                top_p=top_p,
                max_tokens=max_tokens,
                seed=int(seed) if seed is not None else self._openai.omit,
                extra_headers=self._headers,
                extra_body=extra_body or None,
            )
        except self._openai.APIStatusError as e:
            body = e.response.text
            full = e.status_code == 400 and any(m in body for m in CONTEXT_FULL_MARKERS)
            raise EndpointError(f"HTTP {e.status_code}: {body[:500]}", context_full=full) from None
        except self._openai.APIConnectionError as e:
            raise EndpointError(f"{self.retries + 1} attempts failed; last: {e!r}"[:500]) from None
        try:
            text = reply.choices[0].message.content or ""
        except (AttributeError, IndexError, TypeError) as e:
            raise EndpointError(f"unreadable reply: {e!r}") from None
        usage = reply.usage
        return ChatResult(
            text,
            int(getattr(usage, "prompt_tokens", 0) or 0),
            int(getattr(usage, "completion_tokens", 0) or 0),
        )

    def close(self) -> None:
        self._client.close()
