"""Schema drift: rename or drop a field the client's parser relies on."""

from __future__ import annotations

from typing import Any

from brownout.faults.jsonedit import iter_path, parse_path

__all__ = ["apply_drift", "default_drift_path"]


def default_drift_path(doc: Any) -> str | None:
    """The field a provider's SDK cannot do without, for this document's shape."""
    if not isinstance(doc, dict):
        return None
    choices = doc.get("choices")
    if isinstance(choices, list):  # OpenAI chat: completions carry `message`, chunks `delta`
        first = choices[0] if choices and isinstance(choices[0], dict) else {}
        return "choices[].delta" if "delta" in first else "choices[].message"
    kind = doc.get("type")
    if isinstance(kind, str) and kind.startswith("response."):  # OpenAI Responses events
        return "delta" if "delta" in doc else "response.output" if "response" in doc else None
    if kind == "message" or kind == "content_block_start":  # Anthropic
        return "content" if kind == "message" else "content_block"
    if kind == "content_block_delta":
        return "delta"
    if kind == "message_start":
        return "message.content"
    for key in ("output", "candidates", "message", "response", "result", "error"):
        # Responses, Gemini, Ollama chat, Ollama generate, JSON-RPC (MCP)
        if key in doc:
            return key
    return None


def apply_drift(doc: Any, path: str | None, action: str, rename_to: str | None) -> int:
    """Rename or drop every field at `path` (default: by shape); returns how many changed."""
    path = path or default_drift_path(doc)
    if path is None:
        return 0
    parts = parse_path(path)
    new_name = rename_to or f"{parts[-1]}_v2"
    hits = [(c, k) for c, k in iter_path(doc, parts) if isinstance(c, dict)]
    for container, key in hits:
        value = container.pop(key)
        if action == "rename":
            container[new_name] = value
    return len(hits)
