"""Corrupting tool-call arguments so the agent cannot use them (malformed_json, target tool_arguments).

The wire format says where its responses carry arguments and in what form
(`brownout.core.wire.edits`); this module decides what broken means for each form:

- JSON text (OpenAI) gets a seeded corruption that never parses;
- a JSON value the client decodes (Gemini, Ollama) becomes a string holding its broken serialisation;
- an object that must stay one (Anthropic `input`, which the API always sends as an object)
  becomes one that breaks the tool's declared schema, the way models do: a required key left
  out, a value of the wrong type;
- streamed fragments: the first non-empty fragment of each call loses its opening brace, so the
  reassembled text never parses whatever follows, and complete repeats of a streamed call
  (OpenAI Responses) are broken the same way so they agree with what the fragments add up to.
"""

from __future__ import annotations

import json
import random
from collections.abc import Hashable, Mapping
from typing import Any

from brownout.core.wire.edits import ArgumentsEdit
from brownout.faults.jsonedit import corrupt_json_text

__all__ = ["CorruptArguments", "break_fragment", "break_schema"]


def break_fragment(fragment: str) -> str:
    """Make the string this fragment starts unparseable whatever follows: drop its first '{'.

    An object's text minus its opening brace always fails: what remains starts with a key
    followed by ':' (extra data) or with '}'.
    """
    i = fragment.find("{")
    return fragment[:i] + fragment[i + 1 :] if i >= 0 else "}" + fragment


def break_schema(arguments: dict[str, Any], schema: Any) -> bool:
    """Make an arguments object violate its tool's schema; False when it has nothing to break.

    The first of the schema's `required` keys that is present is left out; without one, the
    first value gets the wrong type (a string becomes a one-item array, anything else its JSON text).
    """
    required = schema.get("required") if isinstance(schema, Mapping) else None
    for key in required if isinstance(required, list) else ():
        if isinstance(key, str) and key in arguments:
            del arguments[key]
            return True
    for key, value in arguments.items():
        arguments[key] = [value] if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return True
    return False


class CorruptArguments(ArgumentsEdit):
    """Breaks every tool call's arguments it is handed; one instance per response (it tracks streamed calls)."""

    def __init__(self, rng: random.Random, schemas: Mapping[str, Any] | None = None) -> None:
        self.rng = rng
        self.schemas = schemas or {}  # tool name -> its declared JSON Schema (or None)
        self.broken: set[Hashable] = set()  # streamed calls whose first fragment was already broken

    def text(self, arguments: str) -> str:
        return corrupt_json_text(arguments, self.rng)

    def value(self, arguments: Any) -> Any:
        return corrupt_json_text(json.dumps(arguments, ensure_ascii=False), self.rng)

    def object(self, arguments: dict[str, Any], tool: str | None) -> bool:
        return break_schema(arguments, self.schemas.get(tool) if tool is not None else None)

    def fragment(self, call: Hashable, fragment: str) -> str:
        # Only the first non-empty fragment of each call breaks; later ones pass unchanged.
        if call in self.broken or not fragment.strip():
            return fragment
        self.broken.add(call)
        return break_fragment(fragment)

    def repeat(self, call: Hashable, arguments: str) -> str:
        return break_fragment(arguments)
