r"""How world text enters a model's context: as data, never as markup.

What a world supplies (a tool's response, its tool list, a task, a verifier's code, a
reference solution) reaches several models: the actor (inside
``<tool_response>...</tool_response>``), the LLM expert, the SQL-mode judge, the GRPO
policy (TRL's tool docstrings, tool messages and prompts), the state texts of
``states.parquet`` (``<|tool|>`` blocks) and the PRM and helpers that read them.
:func:`render_observation` is the one rendering for all of them; :data:`BOUNDARIES`
lists every place it is applied (``tests/test_render_boundaries.py`` holds the list
complete). It leaves ordinary output (JSON, prose, any script) as it is and changes
only what could be read as a transcript's own structure:

* **role markers and special tokens**: the ``<`` of every ``<|`` becomes ``&lt;``
  (``<|expert|>`` -> ``&lt;|expert|>``), also for the look-alikes: full-width and small
  ``＜``/``﹤``, full-width ``｜``, invisible or space characters between them
  (``<\u200b|im_start|>``), and the spaced form ``< | im_start | >``;
* **the transcripts' tags** (``tool_call``, ``tool_response``, ``tool_result``,
  ``tools``, ``think``, ``function``, ``parameter``, Gemma's turn tags, ``<s>``,
  ``<bos>``/``<eos>``; any case, full-width letters, spaces or invisible characters
  inside, attributes, self-closing) become entities: ``</tool_response foo=1>`` ->
  ``&lt;/tool_response foo=1&gt;``;
* **the help header at a line start** (``Expert help:``, or the interventions' own
  ``header``) is quoted (``> Expert help:``), also behind invisible, space or control
  characters and when spelled with invisible characters inside, full-width letters or
  the common Cyrillic/Greek homoglyphs;
* **control and invisible characters** (C0 but tab and newline, DEL, C1, bidirectional
  overrides and isolates, line and paragraph separators, the BOM, lone surrogates,
  zero-width space, word joiner and invisible operators, Hangul fillers, the tag
  characters U+E0000-E007F and the variation selectors U+E0100-E01EF, which can carry
  hidden text) become ``\uXXXX`` (a surrogate pair beyond the BMP); ``\r\n`` becomes
  ``\n``. Joiners (emoji sequences), the soft hyphen, NBSP and the other spaces stay.

The rendering is idempotent (rendering twice changes nothing more), so any layer may
apply it again, and valid JSON stays valid JSON (every change is inside a string, and
``\uXXXX`` is JSON's own escape). ASCII text without those tags and markers is
returned unchanged. :func:`render_state_text` is the state texts' counterpart for the
classifiers (PRM, helper). Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

__all__ = [
    "BOUNDARIES",
    "HELP_HEADERS",
    "STATE_ROLES",
    "neutralise_markers",
    "render_observation",
    "render_state_text",
]

HELP_HEADERS = ("Expert help:",)
"""Line starts that announce help in the actor's context (the interventions' default)."""

STATE_ROLES = ("user", "assistant", "tool", "expert")
"""The block markers of a state text (:class:`collect.rollout.TextRenderer`)."""

BOUNDARIES = (
    "collect.rollout:EpisodeRunner.start",  # the task in the actor's context and state texts
    "collect.rollout:EpisodeRunner.advance",  # tool output in the actor's context
    "collect.awm.episode:trajectory_text",  # the expert's and the judge's trajectory
    "collect.awm.episode:ResetResult.messages",  # collect.awm.serve's reset answer
    "collect.awm.protocol:judge_messages",  # the SQL-mode judge: task, verifier output
    "collect.interventions:Oracle.help",  # the reference solution's call and answer
    "collect.interventions:ExpertLLM._make_criteria",  # criteria=llm: task and verifier code
    "collect.interventions:ExpertLLM.messages",  # task, tools, criteria, trajectory, errors
    "collect.interventions:ExpertLLM.help",  # the expert's reply, as the actor reads it
    "helpdp.train.envs:RemoteEnv.trajectory_text",  # a collect.awm.serve server's output
    "helpdp.train.env_factory:tool_method",  # tool descriptions -> TRL's tools block
    "helpdp.train.env_factory:AWMToolEnvironment.reset",  # the task the expert sees
    "helpdp.train.env_factory:AWMToolEnvironment._step",  # tool output -> TRL's tool message
    "helpdp.train.env_factory:AWMEnvironmentFactory.rows",  # the task -> the GRPO prompt
    "helpdp.train.rollout:task_prompts",  # the task -> rollout_func's prompt rows
    "prm.lm:LMPRM.encode",  # state texts -> the PRM's tokenizer
    "helpdp.models.encoder:Encoder.__call__",  # state texts -> the helper's tokenizer
)
"""Every function where world text enters a model's context, as ``module:qualname``;
each applies :func:`render_observation` (the state-text readers
:func:`render_state_text`)."""

# invisible characters (Unicode 15's Cf and non-ASCII Zs, and the default-ignorable
# code points): they may sit between a header's letters or a tag's characters
_INVISIBLE = (
    "\u00a0\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
    "\u1680\u17b4\u17b5\u180b-\u180f\u2000-\u200f\u202a-\u202f\u205f-\u206f\u3000\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff"
# what becomes \uXXXX: controls, bidi, BOM, and the invisibles that carry no text
_ESCAPED = re.compile(
    f"[{_CONTROLS}\u061c\u115f\u1160\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufeff\uffa0\ufff9-\ufffb\U000e0000-\U000e007f\U000e0100-\U000e01ef]"
)
# an invisible character already rendered; a terminal's escape sequence (raw or rendered)
_ESC_SEQ = r"(?:\x1b|\\u001[bB])\[[0-9;?]*[ -/]*[@-~]|\\u[0-9a-fA-F]{4}"
_GAP = rf"(?:[{_INVISIBLE}{_CONTROLS}]|{_ESC_SEQ})"  # between the letters of a word
_SPACE = rf"(?:\s|{_GAP})"
_LT, _GT, _BAR = "<\ufe64\uff1c", ">\ufe65\uff1e", "|\uff5c"

# letters spelled by other scripts that read as Latin (Cyrillic, Greek)
_HOMOGLYPHS = {
    "a": "\u0430\u03b1",
    "b": "\u0432\u03b2",
    "c": "\u0441\u03f2",
    "d": "\u0501",
    "e": "\u0435\u0451\u04bd",
    "h": "\u04bb\u043d\u03b7",
    "i": "\u0456\u03b9\u04cf",
    "j": "\u0458",
    "k": "\u043a\u03ba",
    "l": "\u04cf\u0131",
    "m": "\u043c\u03bc",
    "n": "\u0578",
    "o": "\u043e\u03bf",
    "p": "\u0440\u03c1",
    "q": "\u051b",
    "s": "\u0455",
    "t": "\u0442\u03c4",
    "u": "\u03c5",
    "v": "\u03bd",
    "w": "\u051d",
    "x": "\u0445\u03c7",
    "y": "\u0443\u03b3",
}
_PUNCT = {":": ":\uff1a\ufe55\u2236\ua789", "_": "_\uff3f", "/": "/\uff0f", "=": "=\uff1d"}


def _char_class(ch: str, homoglyphs: bool) -> str:
    """A class of what reads as ``ch``: both cases, full-width forms (and homoglyphs)."""
    if ch in _PUNCT:
        return "[" + re.escape(_PUNCT[ch]) + "]"
    if not ch.isascii() or not ch.isalnum():
        return re.escape(ch)
    forms = {ch.lower(), ch.upper()}
    forms |= {chr(ord(c) + 0xFEE0) for c in list(forms)}  # full-width
    if homoglyphs and ch.isalpha():
        extra = _HOMOGLYPHS.get(ch.lower(), "")
        forms |= set(extra) | set(extra.upper())
    return "[" + "".join(re.escape(c) for c in sorted(forms)) + "]"


def _word(word: str, homoglyphs: bool) -> str:
    """``word`` with invisible characters allowed between its letters."""
    return f"{_GAP}*".join(_char_class(c, homoglyphs) for c in word)


_TAG_NAMES = (
    "tool_calls?",
    "tool_responses?",
    "tool_results?",
    "tools",
    "think",
    "thinking",
    "function_calls?",
    "function",
    "parameter",
    "start_of_turn",
    "end_of_turn",
    "bos",
    "eos",
    "s",
)


def _tag_name(name: str) -> str:
    plural = name.endswith("?")
    stem = name.rstrip("s?") if plural else name
    body = _word(stem, False)
    return body + (f"(?:{_GAP}*{_char_class('s', False)})?" if plural else "")


_NAMES = "|".join(_tag_name(n) for n in sorted(_TAG_NAMES, key=len, reverse=True))
_TAG = re.compile(
    rf"[{_LT}](?P<inner>{_SPACE}*{_char_class('/', False)}?{_SPACE}*(?:{_NAMES})"
    rf"(?:{_SPACE}*(?:[\s/=\uff1d{_INVISIBLE}][^{_LT}{_GT}\n]{{0,200}}?)?)?)[{_GT}]",
    re.IGNORECASE,
)
# ``<|``, its look-alikes, and the spaced ``< | name | >``
_MARKER = re.compile(
    rf"[{_LT}](?={_GAP}*[{_BAR}]|{_SPACE}*[{_BAR}]{_SPACE}*[^\s{_BAR}{_LT}{_GT}]{{1,80}}?"
    rf"{_SPACE}*[{_BAR}]{_SPACE}*[{_GT}])"
)
_ANY_LT = re.compile(f"[{_LT}]")
# bracketed special tokens of encoder tokenizers (BERT, MiniLM) and Mistral's controls
_BRACKET = re.compile(
    r"\[(?=(?:PAD|CLS|SEP|MASK|UNK|/?INST|/?AVAILABLE_TOOLS|/?TOOL_RESULTS|TOOL_CALLS"
    r"|/?SYSTEM_PROMPT)\])"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def neutralise_markers(text: str) -> str:
    """``text`` with the ``<`` of every ``<|`` (role marker, special token) and of its
    look-alikes as ``&lt;``."""
    if not _ANY_LT.search(text):
        return text
    return _MARKER.sub("&lt;", text)


@lru_cache(maxsize=64)
def _header_pattern(headers: tuple[str, ...]) -> re.Pattern[str] | None:
    words = sorted({h.strip() for h in headers if h and h.strip()}, key=len, reverse=True)
    if not words:
        return None
    alternatives = "|".join(
        f"{_SPACE}+".join(_word(part, True) for part in w.split()) for w in words
    )
    return re.compile(rf"^((?:[ \t]|{_GAP})*)({alternatives})", re.IGNORECASE | re.MULTILINE)


def _quote(match: re.Match[str]) -> str:
    lead, header = match.group(1), match.group(2)
    if lead.strip(" \t"):  # something invisible before it: the quote goes first
        return f"> {lead}{header}"
    return f"{lead}> {header}"


def render_observation(text: str, headers: Iterable[str] | None = None) -> str:
    """``text`` (a tool's output, a task) as it may appear in a model's context (see the
    module docstring). ``headers``: the help headers to quote at line starts (default
    :data:`HELP_HEADERS`)."""
    if not text:
        return ""
    text = text.replace("\r\n", "\n")
    pattern = _header_pattern(HELP_HEADERS if headers is None else tuple(headers))
    if pattern is not None:
        text = pattern.sub(_quote, text)
    if _ANY_LT.search(text):
        text = _TAG.sub(lambda m: f"&lt;{m.group('inner')}&gt;", text)
        text = _MARKER.sub("&lt;", text)
    if "[" in text:
        text = _BRACKET.sub("&#91;", text)
    return _ESCAPED.sub(_escape, text)


_BLOCK = re.compile(r"(?:(?<=\n)|^)<\|(?:" + "|".join(STATE_ROLES) + r")\|>(?=\n)")


def render_state_text(text: str) -> str:
    """A state text (``<|role|>`` blocks, :class:`collect.rollout.TextRenderer`) as a
    classifier's tokenizer may read it: its own block markers stay, every other
    spelling of ``<|`` (look-alikes included) and the bracketed special tokens of
    encoder tokenizers (``[SEP]``, ``[PAD]``...) are neutralised. A state text the
    collector wrote is returned unchanged."""
    if not text:
        return ""
    if _ANY_LT.search(text):
        keep = {m.start() for m in _BLOCK.finditer(text)}
        text = _MARKER.sub(lambda m: m.group() if m.start() in keep else "&lt;", text)
    if "[" in text:
        text = _BRACKET.sub("&#91;", text)
    return text
