"""Per-provider JSON locations of tool-call arguments, for the tool_arguments corruption.

The wire modules own provider bytes (errors, terminal events); these are only the JSON
paths where each provider puts tool arguments, recognised by shape so that OpenAI-
compatible servers and proxies that relabel the provider still match.

- OpenAI chat: `choices[].message.tool_calls[].function.arguments` is a JSON string; in
  streams, `choices[].delta.tool_calls[].function.arguments` fragments keyed by `index`.
- OpenAI Responses: `function_call` output items' `arguments` string; in streams
  `response.function_call_arguments.delta` fragments plus the full string repeated in
  `.done`, `response.output_item.done` and `response.completed`.
- Anthropic: `tool_use.input` is an object; in streams `input_json_delta.partial_json`.
- Gemini `functionCall.args` and Ollama `message.tool_calls[].function.arguments` are
  objects, sent whole even in streams.

Anthropic's API always returns `input` as an object, so a whole response cannot carry
broken JSON there: the input becomes an object that breaks the tool's `input_schema` the
way models do (a required key left out, a value of the wrong type), which is what a client
that validates tool inputs meets. Gemini and Ollama arguments become a string with the
corrupted serialisation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["StreamArgsCorrupter", "break_fragment", "break_schema", "corrupt_tool_args"]

Corrupt = Callable[[str], str]
Schemas = Mapping[str, Any]  # tool name -> its declared JSON Schema (or None)


def break_fragment(fragment: str) -> str:
    """Make the string this fragment starts unparseable whatever follows: drop its first '{'.

    An object's text minus its opening brace always fails: what remains starts with a key
    followed by ':' (extra data) or with '}'.
    """
    i = fragment.find("{")
    return fragment[:i] + fragment[i + 1 :] if i >= 0 else "}" + fragment


def _objects(doc: Any, key: str) -> list[dict[str, Any]]:
    value = doc.get(key) if isinstance(doc, dict) else None
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _dict(doc: Any, key: str) -> dict[str, Any]:
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, dict) else {}


def _corrupt_openai_calls(calls: list[dict[str, Any]], corrupt: Corrupt) -> int:
    n = 0
    for call in calls:
        fn = _dict(call, "function")
        if isinstance(fn.get("arguments"), str):
            fn["arguments"] = corrupt(fn["arguments"])
            n += 1
    return n


def _stringify(holder: dict[str, Any], key: str, corrupt: Corrupt) -> int:
    if key not in holder or isinstance(holder[key], str):
        return 0
    holder[key] = corrupt(json.dumps(holder[key], ensure_ascii=False))
    return 1


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


def corrupt_tool_args(doc: Any, corrupt: Corrupt, schemas: Schemas | None = None) -> int:
    """Corrupt every tool call's arguments in a whole response document; returns how many.

    `schemas` are the tools the request declared, for arguments that must stay objects."""
    n = 0
    for choice in _objects(doc, "choices"):  # OpenAI chat (and every OpenAI-compatible server)
        msg = _dict(choice, "message")
        n += _corrupt_openai_calls(_objects(msg, "tool_calls"), corrupt)
        fc = _dict(msg, "function_call")  # the legacy functions API
        if isinstance(fc.get("arguments"), str):
            fc["arguments"] = corrupt(fc["arguments"])
            n += 1
    for item in _objects(doc, "output"):  # OpenAI Responses
        if item.get("type") == "function_call" and isinstance(item.get("arguments"), str):
            item["arguments"] = corrupt(item["arguments"])
            n += 1
    for block in _objects(doc, "content"):  # Anthropic
        if block.get("type") in ("tool_use", "server_tool_use") and isinstance(block.get("input"), dict):
            n += break_schema(block["input"], (schemas or {}).get(str(block.get("name"))))
    for cand in _objects(doc, "candidates"):  # Gemini
        for part in _objects(_dict(cand, "content"), "parts"):
            n += _stringify(_dict(part, "functionCall"), "args", corrupt)
    for call in _objects(_dict(doc, "message"), "tool_calls"):  # Ollama
        n += _stringify(_dict(call, "function"), "arguments", corrupt)
    return n


class StreamArgsCorrupter:
    """Corrupts tool-call arguments event by event so the reassembled arguments never parse."""

    def __init__(self, corrupt_whole: Corrupt) -> None:
        self.corrupt_whole = corrupt_whole  # for arguments that arrive whole (Gemini, Ollama)
        self.broken: set[Any] = set()  # the calls whose first fragment was already broken
        self.count = 0

    def _fragment(self, key: Any, fragment: Any) -> Any:
        # Break the first non-empty fragment of each call; later fragments pass unchanged.
        if key in self.broken or not isinstance(fragment, str) or not fragment.strip():
            return fragment
        self.broken.add(key)
        self.count += 1
        return break_fragment(fragment)

    def edit(self, doc: Any) -> bool:
        """Edit one event's JSON in place; True when it changed."""
        before = self.count
        kind = doc.get("type") if isinstance(doc, dict) else None
        for choice in _objects(doc, "choices"):  # OpenAI chat chunks
            for call in _objects(_dict(choice, "delta"), "tool_calls"):
                fn = _dict(call, "function")
                if "arguments" in fn:
                    fn["arguments"] = self._fragment(("chat", choice.get("index"), call.get("index")), fn["arguments"])
        if kind == "response.function_call_arguments.delta":
            doc["delta"] = self._fragment(("resp", doc.get("item_id")), doc.get("delta"))
        elif kind == "response.function_call_arguments.done" and isinstance(doc.get("arguments"), str):
            doc["arguments"] = self._whole(doc["arguments"])
        elif kind in ("response.output_item.done", "response.output_item.added"):
            item = _dict(doc, "item")
            if item.get("type") == "function_call" and isinstance(item.get("arguments"), str) and item["arguments"]:
                item["arguments"] = self._whole(item["arguments"])
        elif kind == "response.completed":
            for item in _objects(_dict(doc, "response"), "output"):
                if item.get("type") == "function_call" and isinstance(item.get("arguments"), str):
                    item["arguments"] = self._whole(item["arguments"])
        elif kind == "content_block_delta":  # Anthropic
            delta = _dict(doc, "delta")
            if delta.get("type") == "input_json_delta":
                delta["partial_json"] = self._fragment(("anthropic", doc.get("index")), delta.get("partial_json"))
        if "candidates" in doc or ("message" in doc and "done" in doc):  # Gemini / Ollama: whole args
            self.count += corrupt_tool_args(doc, self.corrupt_whole)
        return self.count != before

    def _whole(self, arguments: str) -> str:
        # Repeats of the full string must match what the broken fragments reassemble to.
        self.count += 1
        return break_fragment(arguments)
