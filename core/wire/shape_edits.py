"""Edits by shape: each built-in provider's places in turn, for a format that cannot tell the provider.

The generic format serves every request no provider's path gave away: OpenAI-compatible servers
and gateways on their own paths, proxies that relabel a provider. Their answers are recognised by
shape, each provider's module asked in turn; a plugin format that speaks a built-in provider's
shapes can delegate here, or to that provider's `*_edits` module.
"""

from __future__ import annotations

from typing import Any

from brownout.core.wire import anthropic_edits, gemini_edits, ollama_edits, openai_edits
from brownout.core.wire.edits import ArgumentsEdit, TextEdit

__all__ = ["assistant_text", "drift_field", "event_text", "stream_tool_arguments", "tool_arguments"]

_PROVIDERS = (openai_edits, anthropic_edits, gemini_edits, ollama_edits)


def tool_arguments(doc: Any, edit: ArgumentsEdit) -> int:
    """Every provider's tool-call arguments in a whole response; returns how many changed."""
    return sum(p.tool_arguments(doc, edit) for p in _PROVIDERS)


def stream_tool_arguments(doc: Any, edit: ArgumentsEdit) -> int:
    """Fragments (OpenAI, Anthropic) and whole calls (a Gemini chunk, an Ollama line) in one event."""
    n = openai_edits.stream_tool_arguments(doc, edit) + anthropic_edits.stream_tool_arguments(doc, edit)
    if isinstance(doc, dict) and ("candidates" in doc or ("message" in doc and "done" in doc)):
        n += tool_arguments(doc, edit)
    return n


def assistant_text(doc: Any, edit: TextEdit) -> bool:
    """Every provider's place for the assistant's text in a whole response."""
    done = False
    for p in _PROVIDERS:  # every provider is asked, as a mixed document may hold several places
        done = p.assistant_text(doc, edit) or done
    return done


def event_text(doc: Any, edit: TextEdit) -> bool:
    """The first piece of assistant text in one event, whichever provider's shape it has."""
    if isinstance(doc, dict) and doc.get("type") == "content_block_delta":
        return anthropic_edits.event_text(doc, edit)  # an Anthropic event, whatever else it holds
    return (
        openai_edits.event_text(doc, edit) or gemini_edits.event_text(doc, edit) or ollama_edits.event_text(doc, edit)
    )


def drift_field(doc: Any) -> str | None:
    """The first provider's field the document has; else a JSON-RPC `result` or an `error` object."""
    for p in _PROVIDERS:
        field = p.drift_field(doc)
        if field is not None:
            return field
    if not isinstance(doc, dict):
        return None
    return next((key for key in ("result", "error") if key in doc), None)
