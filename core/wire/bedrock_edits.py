"""Where Bedrock responses carry tool-call arguments and the assistant's text, for faults that edit them.

- Converse: `toolUse` blocks of `output.message.content` carry `input` as an object (it must stay
  one); ConverseStream sends it as `delta.toolUse.input` text fragments, one call per
  `contentBlockIndex`. Text: the first `text` block; streamed `delta.text`.
- InvokeModel with Claude carries Anthropic's own message and events (a stream's `chunk` events are
  handed over decoded): Anthropic's places, told apart by their `type`.
"""

from __future__ import annotations

from typing import Any

from brownout.core.wire import anthropic_edits
from brownout.core.wire.edits import ArgumentsEdit, TextEdit, edit_fragment, member, members

__all__ = ["assistant_text", "drift_field", "event_text", "stream_tool_arguments", "tool_arguments"]


def _claude(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("type"), str)


def _content(doc: Any) -> Any:
    """`output.message` of a whole Converse response ({} when there is none)."""
    return member(member(doc, "output"), "message")


def tool_arguments(doc: Any, edit: ArgumentsEdit) -> int:
    """Every toolUse block's `input` in a whole response; returns how many changed."""
    if _claude(doc):
        return anthropic_edits.tool_arguments(doc, edit)
    n = 0
    for block in members(_content(doc), "content"):
        use = member(block, "toolUse")
        if isinstance(use.get("input"), dict):
            name = use.get("name")
            n += edit.object(use["input"], name if isinstance(name, str) else None)
    return n


def stream_tool_arguments(doc: Any, edit: ArgumentsEdit) -> int:
    """The `toolUse.input` fragment of one `contentBlockDelta` event."""
    if _claude(doc):
        return anthropic_edits.stream_tool_arguments(doc, edit)
    if not isinstance(doc, dict) or "contentBlockIndex" not in doc:
        return 0
    use = member(member(doc, "delta"), "toolUse")
    return edit_fragment(use, "input", ("bedrock", doc.get("contentBlockIndex")), edit)


def assistant_text(doc: Any, edit: TextEdit) -> bool:
    """The first `text` block of a whole response; one is added in front when there is none."""
    if _claude(doc):
        return anthropic_edits.assistant_text(doc, edit)
    message = _content(doc)
    if not isinstance(message.get("content"), list):
        return False
    blocks = [b for b in members(message, "content") if isinstance(b.get("text"), str)]
    if blocks:
        blocks[0]["text"] = edit(blocks[0]["text"])
    else:
        message["content"].insert(0, {"text": edit("")})
    return True


def event_text(doc: Any, edit: TextEdit) -> bool:
    """The `delta.text` of a `contentBlockDelta` event."""
    if _claude(doc):
        return anthropic_edits.event_text(doc, edit)
    delta = member(doc, "delta")
    if isinstance(doc, dict) and "contentBlockIndex" in doc and isinstance(delta.get("text"), str):
        delta["text"] = edit(delta["text"])
        return True
    return False


def drift_field(doc: Any) -> str | None:
    """What a Bedrock client reads the answer from: a response's `output`; in streams, by event shape,
    `delta`, `start`, `stopReason` or `usage`; Claude's bodies as Anthropic's."""
    if _claude(doc):
        return anthropic_edits.drift_field(doc)
    if not isinstance(doc, dict):
        return None
    for key in ("output", "delta", "start", "stopReason", "usage"):
        if key in doc:
            return key
    return None
