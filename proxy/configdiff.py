"""What a hot reload changed, in one line: the rules added, removed and changed (by name)."""

from __future__ import annotations

from typing import Any

__all__ = ["describe_reload"]


def describe_reload(old: Any, new: Any) -> str:
    """`rules added: a, b; removed: c; changed: d` (only the non-empty parts), or `rules unchanged`;
    the other sections that changed (seed, plugins, invariants, proxy) are named after it."""
    before = {rule.name: rule for rule in old.rules}
    after = {rule.name: rule for rule in new.rules}
    parts = [
        f"{what}: {', '.join(names)}"
        for what, names in (
            ("added", [n for n in after if n not in before]),
            ("removed", [n for n in before if n not in after]),
            ("changed", [n for n in after if n in before and after[n] != before[n]]),
        )
        if names
    ]
    line = f"rules {'; '.join(parts)}" if parts else "rules unchanged"
    # Not the sections the command line may override (listen addresses, cassette directories).
    others = [name for name in ("seed", "plugins", "invariants", "proxy") if getattr(old, name) != getattr(new, name)]
    return f"{line}; also changed: {', '.join(others)}" if others else line
