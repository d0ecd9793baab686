"""Schema drift: rename or drop a field the client's parser relies on (the exchange's wire format names it)."""

from __future__ import annotations

from typing import Any

from brownout.faults.jsonedit import iter_path, parse_path

__all__ = ["apply_drift"]


def apply_drift(doc: Any, path: str | None, action: str, rename_to: str | None) -> int:
    """Rename or drop every field at `path` (the caller asks the wire format for one); returns how many changed."""
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
