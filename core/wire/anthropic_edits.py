"""Where Anthropic responses carry tool-call arguments and the assistant's text, for faults that edit them.

- `tool_use` (and `server_tool_use`) blocks carry `input` as an object, always: the API never
  sends it as text, so it is handed over as an object that must stay one. In streams the input
  arrives as `input_json_delta.partial_json` fragments, one call per content block `index`.
- Text: the first `text` block (a tool-use-only answer gets one in front); streamed `text_delta`.
"""

from __future__ import annotations

from typing import Any

from brownout.core.wire.edits import ArgumentsEdit, TextEdit, edit_fragment, member, members

__all__ = ["assistant_text", "drift_field", "event_text", "stream_tool_arguments", "tool_arguments"]

_TOOL_BLOCKS = ("tool_use", "server_tool_use")


def tool_arguments(doc: Any, edit: ArgumentsEdit) -> int:
    """Every tool_use block's `input` in a whole message; returns how many changed."""
    n = 0
    for block in members(doc, "content"):
        if block.get("type") in _TOOL_BLOCKS and isinstance(block.get("input"), dict):
            name = block.get("name")
            n += edit.object(block["input"], name if isinstance(name, str) else None)
    return n


def stream_tool_arguments(doc: Any, edit: ArgumentsEdit) -> int:
    """The `partial_json` fragment in one `content_block_delta` event."""
    if not isinstance(doc, dict) or doc.get("type") != "content_block_delta":
        return 0
    delta = member(doc, "delta")
    if delta.get("type") != "input_json_delta":
        return 0
    return edit_fragment(delta, "partial_json", ("anthropic", doc.get("index")), edit)


def assistant_text(doc: Any, edit: TextEdit) -> bool:
    """The first `text` block of a whole message; one is added in front when there is none."""
    if not isinstance(doc, dict) or doc.get("type") != "message" or not isinstance(doc.get("content"), list):
        return False
    blocks = [b for b in members(doc, "content") if b.get("type") == "text"]
    if blocks:
        blocks[0]["text"] = edit(blocks[0].get("text") or "")
    else:
        doc["content"].insert(0, {"type": "text", "text": edit("")})
    return True


def event_text(doc: Any, edit: TextEdit) -> bool:
    """The text of a `content_block_delta` event's `text_delta`."""
    if not isinstance(doc, dict) or doc.get("type") != "content_block_delta":
        return False
    delta = doc.get("delta")
    if isinstance(delta, dict) and delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
        delta["text"] = edit(delta["text"])
        return True
    return False


# Event or message type -> the field its SDK reads the answer from.
_DRIFT = {"message": "content", "content_block_start": "content_block", "content_block_delta": "delta",
          "message_start": "message.content"}  # fmt: skip


def drift_field(doc: Any) -> str | None:
    """What the SDK cannot do without: a message's `content`; in streams `content_block`, `delta` or
    `message.content`, by event type."""
    kind = doc.get("type") if isinstance(doc, dict) else None
    return _DRIFT.get(kind) if isinstance(kind, str) else None
