"""JSON helpers for body faults: seeded syntactic corruption, paths, and safe load/dump.

Every edit is robust to bodies that are not JSON: helpers return None (or the input
unchanged) instead of raising, and the caller passes the body through. JSON nested deeper
than Python's parser goes raises `NotApplicable`: the fault is recorded as not applied.
"""

from __future__ import annotations

import json
import logging
import random
import re
from collections.abc import Callable, Iterator
from typing import Any

from brownout.faults.base import NotApplicable

__all__ = [
    "NOT_JSON",
    "corrupt_json_text",
    "dumps",
    "find_longest_string",
    "iter_path",
    "load",
    "parse_path",
]

log = logging.getLogger(__name__)

NOT_JSON: Any = object()  # load() result for bodies that are not JSON


def load(body: bytes | str) -> Any:
    """The decoded JSON document, or NOT_JSON; raises NotApplicable for JSON nested too deeply to edit."""
    try:
        return json.loads(body)
    except (ValueError, TypeError):
        return NOT_JSON
    except RecursionError:
        raise NotApplicable("JSON nested too deeply to edit") from None


def dumps(doc: Any, *, compact: bool = False) -> str:
    """Serialise like the providers do: UTF-8 text; compact separators inside stream events."""
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":") if compact else None)


def _invalid(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):  # too deep to check: every strategy breaks the syntax itself
        return True
    return False


def _drop_last_closer(s: str, rng: random.Random) -> str:
    # A response cut short by one byte: the outermost closing bracket is missing.
    i = max(s.rfind("}"), s.rfind("]"))
    return s[:i] + s[i + 1 :] if i >= 0 else s


def _trailing_comma(s: str, rng: random.Random) -> str:
    # The classic hand-rolled-serialiser bug: a comma before the closing bracket.
    i = max(s.rfind("}"), s.rfind("]"))
    return s[:i] + "," + s[i:] if i > 0 else s


def _drop_quote(s: str, rng: random.Random) -> str:
    quotes = [m.start() for m in re.finditer('"', s)]
    if not quotes:
        return s
    i = rng.choice(quotes)
    return s[:i] + s[i + 1 :]


def _stray_byte(s: str, rng: random.Random) -> str:
    # A stray byte between tokens (never inside a string, where it could stay valid).
    spots = [m.end() for m in re.finditer(r"[{\[,:]", s)] or [0]
    i = rng.choice(spots)
    return s[:i] + rng.choice("}]:,\\") + s[i:]


def _single_quotes(s: str, rng: random.Random) -> str:
    # Python-repr style keys, as a model or a buggy tool server emits them.
    m = re.search(r'"([^"\\]*)"\s*:', s)
    return s[: m.start()] + "'" + m.group(1) + "'" + s[m.end(1) + 1 :] if m else s


STRATEGIES: dict[str, Callable[[str, random.Random], str]] = {
    "drop_closer": _drop_last_closer,
    "trailing_comma": _trailing_comma,
    "drop_quote": _drop_quote,
    "stray_byte": _stray_byte,
    "single_quotes": _single_quotes,
}


def corrupt_json_text(text: str, rng: random.Random) -> str:
    """A seeded corruption of `text` that is guaranteed not to parse as JSON."""
    names = list(STRATEGIES)
    rng.shuffle(names)
    for name in names:
        out = STRATEGIES[name](text, rng)
        if out != text and _invalid(out) and "\n" not in out[len(text.rstrip()) :]:
            return out
    # Scalars and odd inputs: an unterminated object is never valid.
    return "{" + text if text.strip() else "{"


def parse_path(path: str) -> list[str]:
    """'choices[].message' / 'choices.*.message' / 'choices.0.message' -> components ('*' = every item)."""
    parts = [p for p in re.split(r"\.|(?=\[)", path.strip()) if p]
    out: list[str] = []
    for p in parts:
        if p in ("[]", "[*]"):
            out.append("*")
        elif p.startswith("[") and p.endswith("]"):
            out.append(p[1:-1])
        else:
            out.append(p)
    if not out:
        raise ValueError(f"empty JSON path {path!r}")
    return out


def iter_path(doc: Any, parts: list[str]) -> Iterator[tuple[Any, str | int]]:
    """Every (container, key) whose key is the path's last component, in document order."""
    nodes: list[Any] = [doc]
    for part in parts[:-1]:
        nxt: list[Any] = []
        for node in nodes:
            nxt.extend(_children(node, part))
        nodes = nxt
    last = parts[-1]
    for node in nodes:
        if isinstance(node, dict) and last in node:
            yield node, last
        elif isinstance(node, list):
            if last == "*":
                yield from ((node, i) for i in range(len(node)))
            elif last.lstrip("-").isdigit() and -len(node) <= int(last) < len(node):
                yield node, int(last) % len(node)


def _children(node: Any, part: str) -> list[Any]:
    if isinstance(node, dict):
        return [node[part]] if part in node else []
    if isinstance(node, list):
        if part == "*":
            return list(node)
        if part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node):
            return [node[int(part)]]
    return []


def find_longest_string(doc: Any) -> tuple[Any, str | int] | None:
    """The (container, key) of the longest string value in the document (ties: first)."""
    best: tuple[Any, str | int] | None = None
    best_len = -1
    stack: list[Any] = [doc]
    while stack:
        node = stack.pop(0)
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if isinstance(value, str) and len(value) > best_len:
                best, best_len = (node, key), len(value)
            elif isinstance(value, (dict, list)):
                stack.append(value)
    return best
