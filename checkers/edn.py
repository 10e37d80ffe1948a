"""A streaming reader for the EDN that Jepsen, Knossos, Elle and Maelstrom write.

Theory of operation
-------------------
A history file is a sequence of top-level forms: one operation map per
line (Jepsen 0.3's ``history.edn``, Porcupine's kv files), or one vector or
list holding every operation (Knossos's ``data/``), possibly pretty-printed
over many lines, possibly with ``;`` comments, ``#_`` discards and tagged
records (``#jepsen.history.Op{...}``). ``forms(path)`` yields the
*operations*: every top-level map or tuple, and every element of a
top-level vector or list, as soon as it is complete, so a history of
millions of operations is never held whole.

The tokenizer is one regular expression run line by line (a string that
spans lines is carried to the next one); the parser is an explicit stack,
so nesting depth costs no recursion. Values become Python values:
keywords become ``Keyword`` (a string without the colon that remembers it
was one: its repr is ``:a``), symbols strings, ``nil`` None,
vectors, lists and sets lists, maps dicts, ``#inst``/``#uuid`` their
string, any other tag its form (records are maps). Jepsen's independent
tuples (``#jepsen.independent.Tuple{:key k :value v}``) become
``IndependentTuple``.

Errors name the file, line and column of the first bad form
(``EDNError``); nothing after it is guessed at.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator


class EDNError(ValueError):
    """Bad EDN; the message names file:line:column."""


class Keyword(str):
    """An EDN keyword: equal to its name as a string (``:send`` == "send"), written back
    with its colon (``repr``), so a report shows a value as the history wrote it."""
    __slots__ = ()

    def __repr__(self) -> str:
        return ":" + str.__str__(self)


_KEYWORDS: dict = {}


def _keyword(name: str) -> Keyword:
    k = _KEYWORDS.get(name)
    if k is None:
        if len(_KEYWORDS) > 100_000:  # values of a history of keywords: not worth keeping
            return Keyword(name)
        k = _KEYWORDS[name] = Keyword(name)
    return k


@dataclass(frozen=True, slots=True)
class IndependentTuple:
    """Jepsen's ``jepsen.independent`` tuple: an operation on one key of many."""
    key: Any
    value: Any


_TOKEN = re.compile(r"""
    (?P<ws>[\s,]+|;[^\n]*)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<open>\#\{|[\[({])
  | (?P<close>[\])}])
  | (?P<disc>\#_)
  | (?P<tag>\#[A-Za-z][^\s,{}\[\]()"\#;]*)
  | (?P<char>\\(?:newline|space|tab|return|backspace|formfeed|u[0-9a-fA-F]{4}|\S))
  | (?P<atom>[^\s,{}\[\]()"\#;\\][^\s,{}\[\]()";\\]*)
  | (?P<unterminated>")
""", re.X)

_INT = re.compile(r"[+-]?\d+N?$")
_FLOAT = re.compile(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?M?$")
_RATIO = re.compile(r"[+-]?\d+/\d+$")
_STR_ESC = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")
_ESC = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "b": "\b", "f": "\f"}
_CHARS = {"newline": "\n", "space": " ", "tab": "\t", "return": "\r", "backspace": "\b",
          "formfeed": "\f"}
_CLOSE_OF = {"[": "]", "(": ")", "{": "}", "#{": "}"}
_SPECIAL = {"nil": None, "true": True, "false": False}


def _string(tok: str) -> str:
    body = tok[1:-1]
    if "\\" not in body:
        return body
    return _STR_ESC.sub(lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "u"
                        and len(m.group(1)) == 5 else _ESC.get(m.group(1), m.group(1)), body)


def _atom(tok: str, where) -> Any:
    c = tok[0]
    if c == ":":
        return _keyword(tok[1:] if tok[1:2] != ":" else tok[2:])
    if c.isdigit() or (c in "+-" and len(tok) > 1 and tok[1].isdigit()):
        if _INT.match(tok):
            return int(tok.rstrip("N"))
        if _FLOAT.match(tok):
            return float(tok.rstrip("M"))
        if _RATIO.match(tok):
            n, d = tok.split("/")
            return int(n) / int(d)
        raise EDNError(f"{where()}: not a number: {tok!r}")
    if tok in _SPECIAL:
        return _SPECIAL[tok]
    return tok  # a symbol


def hashable(v):
    """Vectors and maps as tuples, so values can be map keys, states and cache keys."""
    t = type(v)
    if t is str or t is int or v is None:
        return v
    if isinstance(v, list):
        return tuple(hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted(((hashable(k), hashable(x)) for k, x in v.items()), key=repr))
    return v


def _tagged(tag: str, v):
    if tag == "jepsen.independent.Tuple" and isinstance(v, dict):
        return IndependentTuple(v.get("key"), v.get("value"))
    return v  # records are maps; #inst and #uuid keep their string


class _Frame:
    __slots__ = ("kind", "items", "line", "col", "tags", "discards", "streamed")

    def __init__(self, kind: str, line: int, col: int) -> None:
        self.kind = kind
        self.items: list = []
        self.line = line
        self.col = col
        self.tags: list = []  # tags waiting for this frame's next form
        self.discards = 0  # #_ waiting for this frame's next form
        self.streamed = False  # elements were yielded as they completed

    def take(self, value):
        """Apply pending tags and discards to a completed form; (keep?, value)."""
        while self.tags:
            value = _tagged(self.tags.pop(), value)
        if self.discards:
            self.discards -= 1
            return False, None
        return True, value


def loads(text: str, where: str = "value") -> Any:
    """One EDN value (a top-level vector is a value here, not a history)."""
    out = [v for v, _ in forms(where, lines=[text], history=False)]
    if len(out) != 1:
        raise EDNError(f"{where}: want one EDN value, found {len(out)}")
    return out[0]


def forms(path: str | Path, lines=None, history: bool = True) -> Iterator[tuple[Any, int]]:
    """(operation form, line) for each operation in an EDN history file.

    A top-level vector or list is opened: its elements are the operations,
    unless it is itself an operation tuple ``[process type f value]``.
    ``lines`` (an iterable of text lines) replaces reading ``path``;
    ``history=False`` yields top-level forms whole.
    """
    path = Path(path)
    own = lines is None
    if own:
        lines = open(path, encoding="utf-8", errors="replace")
    top = _Frame("top", 0, 0)
    stack: list[_Frame] = [top]
    carry = ""
    carry_line = 0
    lineno = 0
    match = _TOKEN.match
    try:
        for raw in lines:
            lineno += 1
            if carry:
                line, start_line = carry + raw, carry_line
            else:
                line, start_line = raw, lineno
            pos = 0
            n = len(line)
            while pos < n:
                m = match(line, pos)
                if m is None:
                    raise EDNError(f"{path}:{start_line}:{pos + 1}: unexpected "
                                   f"{line[pos:pos + 20]!r}")
                kind = m.lastgroup
                if kind == "ws":
                    pos = m.end()
                    continue
                if kind == "unterminated":
                    break  # a string going on to the next line
                tok = m.group()
                col = pos + 1
                pos = m.end()
                frame = stack[-1]
                if kind == "open":
                    stack.append(_Frame(tok, start_line, col))
                    continue
                if kind == "tag":
                    frame.tags.append(tok[1:])
                    continue
                if kind == "disc":
                    frame.discards += 1
                    continue
                if kind == "close":
                    if frame is top or _CLOSE_OF[frame.kind] != tok:
                        raise EDNError(f"{path}:{start_line}:{col}: unexpected {tok!r}" + (
                            "" if frame is top else f" (the {frame.kind!r} opened at "
                            f"{frame.line}:{frame.col} wants {_CLOSE_OF[frame.kind]!r})"))
                    stack.pop()
                    value = _close(frame, path)
                    parent = stack[-1]
                    if not history and parent is top:
                        keep, value = parent.take(value)
                        if keep:
                            yield value, frame.line
                        continue
                    if parent is top and frame.streamed:
                        if frame.items:
                            raise EDNError(f"{path}:{frame.line}:{frame.col}: the history "
                                           f"holds {frame.items[0]!r} among its operations")
                        parent.take(None)
                        continue
                    keep, value = parent.take(value)
                    if not keep:
                        continue
                    if parent is top:
                        if frame.kind in ("[", "(") and not _is_tuple(value):
                            for v in value:  # a small history read whole
                                yield v, frame.line
                        else:
                            yield value, frame.line
                    elif history and len(stack) == 2 and parent.kind in ("[", "(") and (
                            isinstance(value, dict) or _is_tuple(value)):
                        parent.streamed = True
                        yield value, frame.line
                    else:
                        parent.items.append(value)
                    continue
                if kind == "str":
                    value = _string(tok)
                elif kind == "char":
                    body = tok[1:]
                    value = _CHARS.get(body) or (chr(int(body[1:], 16))
                                                 if len(body) == 5 and body[0] == "u" else body)
                else:
                    value = _atom(tok, lambda: f"{path}:{start_line}:{col}")
                keep, value = frame.take(value)
                if not keep:
                    continue
                if frame is top:
                    yield value, start_line
                else:
                    frame.items.append(value)
            if pos < n:
                carry, carry_line = line[pos:], start_line
            else:
                carry = ""
        if carry:
            raise EDNError(f"{path}:{carry_line}: a string is never closed")
        if len(stack) > 1:
            f = stack[-1]
            raise EDNError(f"{path}:{f.line}:{f.col}: {f.kind!r} is never closed "
                           f"(the file ends at line {lineno})")
    finally:
        if own:
            lines.close()


def _close(frame: _Frame, path) -> Any:
    if frame.kind != "{":
        return frame.items
    items = frame.items
    if len(items) % 2:
        raise EDNError(f"{path}:{frame.line}:{frame.col}: a map with an odd number of forms "
                       f"({len(items)})")
    value = {}
    for i in range(0, len(items), 2):
        k = items[i]
        try:
            value[k] = items[i + 1]
        except TypeError:
            value[hashable(k)] = items[i + 1]
    return value


def _is_tuple(v) -> bool:
    """Knossos's ``[process type f value]`` operation tuple."""
    return (isinstance(v, list) and len(v) == 4 and isinstance(v[1], str)
            and v[1] in ("invoke", "ok", "fail", "info") and not isinstance(v[0], (list, dict)))
