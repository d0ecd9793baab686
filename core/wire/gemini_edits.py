"""Where Gemini responses carry tool-call arguments and the assistant's text, for faults that edit them.

- `candidates[].content.parts[].functionCall.args` is an object, sent whole even in streams
  (every streamed chunk is a complete GenerateContentResponse).
- Text: the first candidate's first text part that is not a thought summary (one is added in
  front when there is none); in streams, the first non-empty one of a chunk.
"""

from __future__ import annotations

from typing import Any

from brownout.core.wire.edits import ArgumentsEdit, TextEdit, edit_value, member, members

__all__ = ["assistant_text", "drift_field", "event_text", "stream_tool_arguments", "tool_arguments"]


def tool_arguments(doc: Any, edit: ArgumentsEdit) -> int:
    """Every `functionCall.args` of every candidate; returns how many changed."""
    n = 0
    for cand in members(doc, "candidates"):
        for part in members(member(cand, "content"), "parts"):
            n += edit_value(member(part, "functionCall"), "args", edit)
    return n


# A streamed chunk is a whole response: its calls are complete.
stream_tool_arguments = tool_arguments


def _texts(parts: Any, *, non_empty: bool) -> list[dict[str, Any]]:
    # Thought summaries are text parts too, but not the answer.
    if not isinstance(parts, list):
        return []
    return [
        p
        for p in parts
        if isinstance(p, dict)
        and isinstance(p.get("text"), str)
        and (p["text"] or not non_empty)
        and not p.get("thought")
    ]


def assistant_text(doc: Any, edit: TextEdit) -> bool:
    """The first candidate's first text part."""
    if not isinstance(doc, dict):
        return False
    for cand in members(doc, "candidates")[:1]:
        content = cand.setdefault("content", {"role": "model", "parts": []})
        parts = content.setdefault("parts", [])
        texts = _texts(parts, non_empty=False)
        if texts:
            texts[0]["text"] = edit(texts[0]["text"])
        else:  # a call-only answer: the text goes in front of the call
            parts.insert(0, {"text": edit("")})
        return True
    return False


def event_text(doc: Any, edit: TextEdit) -> bool:
    """The first non-empty text part of a streamed chunk's first candidate."""
    for cand in members(doc, "candidates")[:1]:
        for part in _texts(member(cand, "content").get("parts"), non_empty=True)[:1]:
            part["text"] = edit(part["text"])
            return True
    return False


def drift_field(doc: Any) -> str | None:
    """What the SDK cannot do without: `candidates`, in a whole answer and every streamed chunk."""
    return "candidates" if isinstance(doc, dict) and "candidates" in doc else None
