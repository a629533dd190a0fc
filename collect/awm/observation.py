r"""How environment output enters a transcript: as data, never as markup.

What a world supplies (a tool's response, a task's text) is put into three places:
the actor's chat context (inside ``<tool_response>...</tool_response>``), the state
texts of ``states.parquet`` (``<|tool|>`` blocks, what the PRM and the helpers read)
and the helper's prompt. :func:`render_observation` is the one rendering for all of
them (:mod:`collect.rollout` applies it once per step and keeps the result). It leaves
ordinary output (JSON, prose, any script) as it is and changes only what could be read
as the transcript's own structure:

* **role markers and special tokens**: the ``<`` of every ``<|`` (and full-width
  ``<｜``) becomes ``&lt;``, ``<|expert|>`` -> ``&lt;|expert|>``: no ``<|role|>`` block of
  a state text and no chat-template token (``<|im_start|>``, ``<|eot_id|>``...) can be
  spelled;
* **the transcript's tags** (``tool_call``, ``tool_response``, ``think``, Gemma's turn
  tags, ``<s>``/``</s>``; any case, spaces inside) become entities:
  ``</tool_response>`` -> ``&lt;/tool_response&gt;``;
* **the help header at a line start** (``Expert help:``, or the interventions' own
  ``header``) is quoted: ``> Expert help:``;
* **control characters** (C0 but tab and newline, DEL, C1, bidirectional overrides and
  isolates, line and paragraph separators, the BOM, lone surrogates) become ``\uXXXX``;
  ``\r\n`` becomes ``\n``.

The rendering is idempotent (rendering twice changes nothing more), so any layer may
apply it again, and valid JSON stays valid JSON (every change is inside a string, and
``\uXXXX`` is JSON's own escape). Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["HELP_HEADERS", "neutralise_markers", "render_observation"]

HELP_HEADERS = ("Expert help:",)
"""Line starts that announce help in the actor's context (the interventions' default)."""

_MARKER = re.compile("<([|\uff5c])")
_TAG = re.compile(
    r"<(\s*/?\s*(?:tool_calls?|tool_response|tools|think|function_calls?|start_of_turn"
    r"|end_of_turn|s)\s*)>",
    re.IGNORECASE,
)
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]"
)


def neutralise_markers(text: str) -> str:
    """``text`` with the ``<`` of every ``<|`` (role marker, special token) as ``&lt;``."""
    return _MARKER.sub(r"&lt;\1", text) if "<" in text else text


def _header_pattern(headers: Iterable[str]) -> re.Pattern[str] | None:
    words = sorted({h.strip() for h in headers if h and h.strip()}, key=len, reverse=True)
    if not words:
        return None
    alternatives = "|".join(r"\s+".join(map(re.escape, w.split())) for w in words)
    return re.compile(rf"^([ \t]*)({alternatives})", re.IGNORECASE | re.MULTILINE)


_DEFAULT_HEADER = _header_pattern(HELP_HEADERS)


def render_observation(text: str, headers: Iterable[str] | None = None) -> str:
    """``text`` (a tool's output, a task) as it may appear in a transcript (see the module
    docstring). ``headers``: the help headers to quote at line starts (default
    :data:`HELP_HEADERS`)."""
    if not text:
        return ""
    text = text.replace("\r\n", "\n")
    text = _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    if "<" in text:
        text = _TAG.sub(r"&lt;\1&gt;", text)
        text = neutralise_markers(text)
    pattern = _DEFAULT_HEADER if headers is None else _header_pattern(headers)
    if pattern is not None:
        text = pattern.sub(r"\1> \2", text)
    return text
