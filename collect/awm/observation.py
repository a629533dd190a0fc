r"""How world text enters a model's context: as data, never as markup.

What a world supplies (a tool's response, its tool list, a task, a verifier's code, a
reference solution) reaches several models: the actor (inside
``<tool_response>...</tool_response>``), the LLM expert, the SQL-mode judge, the GRPO
policy (TRL's tool docstrings, tool messages and prompts), the state texts of
``states.parquet`` (``<|tool|>`` blocks) and the PRM and helpers that read them.
:func:`render_observation` is the one rendering for all of them; :data:`BOUNDARIES`
lists every place it is applied (``tests/test_render_boundaries.py`` holds the list
complete). It leaves ordinary output (JSON, prose, any script) as it is and changes
only what could be read as a transcript's own structure. What it matches is matched on
what a reader sees (the *skeleton*): JSON's escapes decoded, also behind more
backslashes (``\u003c`` and ``\\u003c`` read as ``<``, ``\/`` as ``/``, ``\n`` as a line
break), NFKD (full-width, mathematical and other compatibility letters as ASCII), no
combining marks, no invisible, control or non-ASCII space characters, no terminal
escape sequences, the common Cyrillic/Greek homoglyphs and the look-alikes of ``< > |
[ ] / : _`` (angle quotation marks, CJK and mathematical brackets, ``∣``, ``ǀ``...)
folded; the change is then made to the original characters:

* **role markers and special tokens**: the ``<`` of every ``<|`` and ``<name|>``
  (Gemma 4's ``<turn|>``) becomes ``&lt;`` (``<|expert|>`` -> ``&lt;|expert|>``), and of
  the spaced form ``< | im_start | >``; the tokenizers' own special tokens in angle
  brackets (``<s>``, ``</s>``, ``<bos>``, ``<eos>``, ``<pad>``, ``<mask>``, ``<unk>``,
  ``<sep>``, ``<cls>``, ``<image>``, ``<extra_id_N>``...) become entities, and the
  ``[`` of the bracketed ones (BERT's ``[SEP]``/``[PAD]``..., Mistral's ``[INST]``,
  ``[TOOL_CALLS]``, ``[THINK]``, ``[ARGS]``, ``[CALL_ID]``, ``[TOOL_CONTENT]``...) becomes
  ``&#91;``;
* **the transcripts' tags** (``tool_call``, ``tool_response``, ``tool_result``,
  ``tools``, ``think``, ``function``, ``function_calls``, ``parameter``, ``invoke``,
  Gemma's turn and image tags, GLM's ``arg_key``/``arg_value``; any case, a namespace
  prefix, spaces or newlines inside): their ``<`` becomes ``&lt;`` whatever follows
  (attributes of any length, newlines, no ``>`` at all), and their ``>`` ``&gt;``:
  ``</tool_response foo=1>`` -> ``&lt;/tool_response foo=1&gt;``;
* **the help header at a line start** (``Expert help:``, or the interventions' own
  ``header``) is quoted (``> Expert help:``), also behind invisible, space or control
  characters, after any line break (``\r``, U+2028, JSON's ``\n``), and when spelled
  with invisible characters or combining marks inside, full-width or mathematical
  letters or the common Cyrillic/Greek homoglyphs;
* **control and invisible characters** (C0 but tab and newline, DEL, C1, bidirectional
  overrides and isolates, line and paragraph separators, the BOM, lone surrogates,
  zero-width space, word joiner and invisible operators, Hangul fillers, the tag
  characters U+E0000-E007F and the variation selectors U+E0100-E01EF, which can carry
  hidden text) become ``\uXXXX`` (a surrogate pair beyond the BMP); ``\r\n`` becomes
  ``\n``. Joiners (emoji sequences), the soft hyphen, NBSP and the other spaces stay.

The rendering is idempotent (rendering twice changes nothing more), so any layer may
apply it again, and valid JSON stays valid JSON (every change is inside a string, and
``\uXXXX`` is JSON's own escape, and an escape is replaced whole). Text without
those tags, tokens and markers is returned unchanged, accents and every script
included (the skeleton is only read, never returned). :func:`render_state_text` is the state texts' counterpart for the
classifiers (PRM, helper). Standard library only.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from bisect import bisect_right
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
_IS_INVISIBLE = re.compile(f"[{_INVISIBLE}]")
# line breaks a reader (or str.splitlines) sees: a help header may follow any of them
_BREAKS = frozenset("\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")

# letters spelled by other scripts that read as Latin (Cyrillic, Greek)
_HOMOGLYPHS = {
    "a": "\u0430\u03b1",
    "b": "\u0432\u03b2",
    "c": "\u0441\u03f2",
    "d": "\u0501",
    "e": "\u0435\u0451\u04bd",
    "h": "\u04bb\u043d\u03b7",
    "i": "\u0456\u03b9\u0131",
    "j": "\u0458",
    "k": "\u043a\u03ba",
    "l": "\u04cf",
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
# look-alikes of the ASCII punctuation of special tokens, tags and headers that NFKD
# leaves alone (full-width and small forms it already folds)
_PUNCT = {
    "<": "\u2039\u276e\u27e8\u3008\u02c2\u1438\u2770\u29fc\u276c\u227a",
    ">": "\u203a\u276f\u27e9\u3009\u02c3\u1433\u2771\u29fd\u276d\u227b",
    "|": "\u01c0\u2223\u2502\u2503\u2758\u2759\u275a\u05c0\u2d4f\u4e28\u23d0\u2016",
    "[": "\u27e6\u3010\u3014\u3016\u3018\u301a\u2045",
    "]": "\u27e7\u3011\u3015\u3017\u3019\u301b\u2046",
    "/": "\u2215\u2044\u29f8\u2571",
    ":": "\u2236\ua789\u02d0\u0589",
    "_": "\u02cd",
}
_CONFUSABLE = {c: a for a, cs in _PUNCT.items() for c in cs}
for _a, _cs in _HOMOGLYPHS.items():
    _CONFUSABLE.update({c: _a for c in _cs})
    _CONFUSABLE.update({c.upper(): _a.upper() for c in _cs if c.upper() != c})


@lru_cache(maxsize=8192)
def _fold(ch: str) -> str:
    """What ``ch`` reads as: a line break, nothing (invisible, control, combining mark,
    a space other than ASCII's), or its NFKD letters with confusables folded to ASCII."""
    if ch in _BREAKS:
        return "\n"
    if ch in "\t\n" or " " <= ch <= "~":
        return ch
    cat = unicodedata.category(ch)
    if cat[0] in "CM" or cat == "Zs" or _IS_INVISIBLE.match(ch):
        return ""
    if ch in _CONFUSABLE:
        return _CONFUSABLE[ch]
    decomposed = unicodedata.normalize("NFKD", ch)
    if decomposed == ch:
        return ch
    return "".join(_fold(c) for c in decomposed)


# the units of a text: ASCII runs (read as they are), a terminal's escape sequence (raw
# or rendered), JSON's escapes (a surrogate pair, \uXXXX, \n...), one other character.
# An escape behind more backslashes is one unit too: ``\\u003c`` is JSON's way to write
# ``\u003c`` inside a string, which reads as ``<`` one decoding later
_ESCAPES = (
    r"(?P<term>(?:\x1b|(?<!\\)\\+u001[bB])\[[0-9;?]*[ -/]*[@-~])"
    r"|(?<!\\)\\+u(?P<hi>[dD][89abAB][0-9a-fA-F]{2})\\+u(?P<lo>[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\)\\+u(?P<hex>[0-9a-fA-F]{4})"
    r"|(?<!\\)\\+(?P<esc>[nrtbf/\"])"
)
_UNIT = re.compile(
    rf"(?P<plain>[\t\n\x20-\x5b\x5d-\x7e]+)|{_ESCAPES}|(?P<wide>[^\x00-\x7f]+)|(?P<one>\\+|.)",
    re.DOTALL,
)
# the same escapes for _quick, led by the characters they start with (a fast scan); a run
# of backslashes is read from its first one only (linear in the run)
_ESCAPE = re.compile(
    r"(?<!\\)\\+(?:(?P<term>u001[bB]\[[0-9;?]*[ -/]*[@-~])"
    r"|u(?P<hi>[dD][89abAB][0-9a-fA-F]{2})\\+u(?P<lo>[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|u(?P<hex>[0-9a-fA-F]{4})|(?P<esc>[nrtbf/\"]))"
    r"|\x1b\[[0-9;?]*[ -/]*[@-~]",
    re.DOTALL,
)
_NOT_PLAIN = re.compile(r"[^\t\n\x20-\x7e]+")
_JSON_ESC = {"n": "\n", "r": "\n", "t": "\t", "b": "", "f": "\n"}
_PLAIN = re.compile(r"[\t\n\x20-\x5b\x5d-\x7e]*")


class _FoldTable(dict):
    """``str.translate``'s table of :func:`_fold`, filled as characters are met."""

    def __missing__(self, code: int) -> str:
        self[code] = folded = _fold(chr(code))
        return folded


_TABLE = _FoldTable()


def _decoded(m: re.Match[str]) -> str:
    kind = m.lastgroup
    if kind == "lo":
        return chr(0x10000 + ((int(m["hi"], 16) - 0xD800) << 10) + int(m["lo"], 16) - 0xDC00)
    if kind == "hex":
        return chr(int(m["hex"], 16))
    if kind == "esc":
        return _JSON_ESC.get(m["esc"], m["esc"])
    return ""  # an escape sequence


class _DecodeTable(dict):
    """An escape's text -> what it decodes to, filled as escapes are met."""

    def __missing__(self, escape: str) -> str:
        self[escape] = decoded = _decoded(_ESCAPE.fullmatch(escape))
        return decoded


_DECODE = _DecodeTable()


def _quick(text: str) -> str:
    """The skeleton's text alone (no spans), at ``str.translate``'s speed."""
    if "\\" in text or "\x1b" in text:
        text = _ESCAPE.sub(lambda m: _DECODE[m.group()], text)
    return _NOT_PLAIN.sub(lambda m: m.group().translate(_TABLE), text)


class _Skeleton:
    """What a reader sees in ``text``: JSON escapes decoded, NFKD, combining marks,
    invisible and control characters and escape sequences dropped, confusables folded
    (case kept); ``span(i)`` is the original text of the skeleton's character ``i``."""

    def __init__(self, text: str):
        self.text = text
        if _PLAIN.fullmatch(text):  # ASCII without escapes: the text is its own skeleton
            self.sk, self.starts = text, None
            return
        parts: list[str] = []
        self.starts, self.origins, self.ends, self.same = [], [], [], []
        n = 0

        def add(folded: str, start: int, end: int, same: bool) -> None:
            nonlocal n
            if folded:
                self.starts.append(n)
                n += len(folded)
                self.origins.append(start)
                self.ends.append(end)
                self.same.append(same)
                parts.append(folded)

        for m in _UNIT.finditer(text):
            kind, unit = m.lastgroup, m.group()
            if kind == "plain":
                add(unit, m.start(), m.end(), True)
            elif kind == "wide":  # non-ASCII: one segment where folding changes nothing
                folded = unit.translate(_TABLE)
                if folded == unit:
                    add(unit, m.start(), m.end(), True)
                else:
                    for j, ch in enumerate(unit, m.start()):
                        add(_TABLE[ord(ch)], j, j + 1, False)
            elif kind == "one":  # a control character, a run of backslashes
                add(unit.translate(_TABLE), m.start(), m.end(), False)
            else:  # an escape
                add(_DECODE[unit].translate(_TABLE), m.start(), m.end(), False)
        self.sk = "".join(parts)

    def span(self, i: int) -> tuple[int, int]:
        if self.starts is None:
            return i, i + 1
        k = bisect_right(self.starts, i) - 1
        if self.same[k]:
            at = self.origins[k] + i - self.starts[k]
            return at, at + 1
        return self.origins[k], self.ends[k]


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
    "invoke",
    "start_of_turn",
    "end_of_turn",
    "start_of_image",
    "end_of_image",
    "end_of_utterance",
    "arg_key",
    "arg_value",
)
# special tokens in angle brackets (only with their closing bracket)
_TOKEN_NAMES = (
    "s",
    "bos",
    "eos",
    "pad",
    "mask",
    "unk",
    "sep",
    "cls",
    "eot",
    "eod",
    "image",
    r"extra_id_\d{1,4}",
    r"unused\d{1,4}",
    r"special_\d{1,4}",
)
# bracketed special tokens: encoder tokenizers (BERT, MiniLM) and Mistral's controls
_BRACKET_NAMES = (
    "PAD",
    "CLS",
    "SEP",
    "MASK",
    "UNK",
    "INST",
    "AVAILABLE_TOOLS",
    "TOOL_RESULTS",
    "TOOL_CALLS",
    "TOOL_CONTENT",
    "SYSTEM_PROMPT",
    "THINK",
    "ARGS",
    "CALL_ID",
    "IMG",
    "IMG_BREAK",
    "IMG_END",
    "PREFIX",
    "MIDDLE",
    "SUFFIX",
    "BEGIN_AUDIO",
    "AUDIO",
    "TRANSCRIBE",
)


def _alternatives(names: Iterable[str]) -> str:
    return "|".join(sorted(names, key=len, reverse=True))


_S = r"[ \t\n]*"
# ``<|``, ``<name|>``, the spaced ``< | name | >`` (on the skeleton)
_MARKER = re.compile(
    rf"<(?=\||{_S}\|{_S}[^\s|<>]{{1,80}}?{_S}\|{_S}>|[A-Za-z_][A-Za-z0-9_.-]{{0,40}}\|>)"
)
# a transcript tag: its ``<`` whatever follows (attributes, newlines), and its ``>``
_TAG = re.compile(
    rf"(?P<lt><){_S}/?{_S}(?:[A-Za-z]{{1,16}}:)?(?:{_alternatives(_TAG_NAMES)})"
    r"(?![A-Za-z0-9_-])(?:[^<>]*?(?P<gt>>))?",
    re.IGNORECASE,
)
_TOKEN = re.compile(
    rf"(?P<lt><){_S}/?{_S}(?:{_alternatives(_TOKEN_NAMES)}){_S}/?{_S}(?P<gt>>)", re.IGNORECASE
)
_BRACKET = re.compile(rf"\[(?=/?(?:{_alternatives(_BRACKET_NAMES)})\])")
_BLOCK = re.compile(r"(?:(?<=\n)|^)<\|(?:" + "|".join(STATE_ROLES) + r")\|>(?=\n)")
_HINT = re.compile(r"[^\t\n\x20-\x7e]|[<\[\\]")  # what a rendering can act on


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


@lru_cache(maxsize=64)
def _header_pattern(headers: tuple[str, ...]) -> re.Pattern[str] | None:
    words = sorted({h.strip() for h in headers if h and h.strip()}, key=len, reverse=True)
    if not words:
        return None
    alternatives = "|".join(
        "[ \t]*".join(re.escape(_Skeleton(part).sk) for part in w.split()) for w in words
    )
    return re.compile(rf"^([ \t]*)(?:{alternatives})", re.IGNORECASE | re.MULTILINE)


def _edits(sk: _Skeleton, *, tags: bool, keep_blocks: bool) -> list[tuple[int, int, str]]:
    """``(start, end, replacement)`` in the text: the special tokens' and tags' brackets."""
    s, out = sk.sk, []

    def put(i: int, repl: str) -> None:
        out.append((*sk.span(i), repl))

    if "<" in s:
        # a state text's own block markers: ASCII, whole lines of the text itself
        keep = {m.start() for m in _BLOCK.finditer(sk.text)} if keep_blocks else set()
        for m in _MARKER.finditer(s):
            if sk.span(m.start())[0] not in keep:
                put(m.start(), "&lt;")
        for m in itertools.chain(_TAG.finditer(s) if tags else (), _TOKEN.finditer(s)):
            put(m.start("lt"), "&lt;")
            if m.group("gt") is not None:
                put(m.start("gt"), "&gt;")
    if "[" in s:
        for m in _BRACKET.finditer(s):
            put(m.start(), "&#91;")
    return out


def _apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    if not edits:
        return text
    out, at = [], 0
    for start, end, repl in sorted(set(edits)):  # an insertion before a replacement
        if start < at:  # inside a replacement already made
            continue
        out += [text[at:start], repl]
        at = end
    out.append(text[at:])
    return "".join(out)


def _candidates(s: str, pattern: re.Pattern[str] | None, tags: bool) -> bool:
    """Whether the skeleton ``s`` holds anything to neutralise (most texts do not)."""
    if "<" in s and (_MARKER.search(s) or _TOKEN.search(s) or (tags and _TAG.search(s))):
        return True
    if "[" in s and _BRACKET.search(s):
        return True
    return pattern is not None and pattern.search(s) is not None


def _render(text: str, pattern: re.Pattern[str] | None, *, tags: bool, keep_blocks: bool) -> str:
    if not _HINT.search(text) and (pattern is None or not pattern.search(text)):
        return text  # printable ASCII without brackets or escapes, and no header
    if not _candidates(_quick(text), pattern, tags):
        return text
    sk = _Skeleton(text)
    edits = _edits(sk, tags=tags, keep_blocks=keep_blocks)
    if pattern is not None:
        for m in pattern.finditer(sk.sk):
            line = sk.span(m.start() - 1)[1] if m.start() else 0  # after the line break
            head = sk.span(m.end(1))[0]
            if text[line:head].strip(" \t"):  # something invisible before it: quote first
                head = line
            edits.append((head, head, "> "))
    return _apply(text, edits)


def neutralise_markers(text: str) -> str:
    """``text`` with the ``<`` of every ``<|`` (role marker, special token), of
    ``<name|>`` and of their look-alikes as ``&lt;``; the special tokens of the
    tokenizers (``<pad>``, ``</s>``, ``[SEP]``, ``[INST]``...) neutralised too."""
    if not text:
        return ""
    return _render(text, None, tags=False, keep_blocks=False)


def render_observation(text: str, headers: Iterable[str] | None = None) -> str:
    """``text`` (a tool's output, a task) as it may appear in a model's context (see the
    module docstring). ``headers``: the help headers to quote at line starts (default
    :data:`HELP_HEADERS`)."""
    if not text:
        return ""
    text = text.replace("\r\n", "\n")
    pattern = _header_pattern(HELP_HEADERS if headers is None else tuple(headers))
    text = _render(text, pattern, tags=True, keep_blocks=False)
    return _ESCAPED.sub(_escape, text)


def render_state_text(text: str) -> str:
    """A state text (``<|role|>`` blocks, :class:`collect.rollout.TextRenderer`) as a
    classifier's tokenizer may read it: its own block markers stay, every other
    spelling of ``<|`` (look-alikes included) and the special tokens of the tokenizers
    (``[SEP]``, ``[PAD]``, ``<pad>``, ``<unk>``...) are neutralised. A state text the
    collector wrote is returned unchanged."""
    if not text:
        return ""
    return _render(text, None, tags=False, keep_blocks=True)
