"""Bounded label values for brownout's metrics: models on an allowlist, providers of the config's wire formats,
known operations, and the first tool (and MCP prompt) names seen, never a secret-shaped one; anything else
is `other`, so a hostile or buggy client cannot blow up the series count."""

from __future__ import annotations

import fnmatch
import threading
from collections.abc import Iterable

from brownout.core.exchange import CONNECTION_ERRORS
from brownout.core.secret_paths import secret_segment
from brownout.core.secrets import redact_keys
from brownout.exporters.metric_labels import OPERATIONS

__all__ = ["MAX_ERROR_TYPES", "LabelBounds"]

MAX_ERROR_TYPES = 50  # distinct error.type values a registry keeps as labels; providers document a dozen or so


def _secret_like(name: str) -> bool:
    return redact_keys(name) is not name or secret_segment(name)


class LabelBounds:
    """The label caps of one metrics registry (its own: two proxies in one process never share them)."""

    def __init__(
        self, *, providers: Iterable[str], model_allowlist: Iterable[str], max_models: int, max_tools: int
    ) -> None:
        self._providers = frozenset(providers)  # the config's wire formats: a bounded label set
        self._allow = tuple(model_allowlist)
        self._max_models = max_models
        self._models: dict[str, str] = {}
        self._max_tools = max_tools
        self._tools: set[str] = set()
        self._prompts: set[str] = set()  # MCP prompt names, capped like tools
        self._errors: set[str] = set()  # provider error types (error.type), the first MAX_ERROR_TYPES seen
        self._lock = threading.Lock()  # guards the caches; prometheus_client metrics lock themselves

    def model_label(self, model: str | None) -> str:
        """The model if allowlisted (and under the cap), else 'other'."""
        if not model:
            return "none"
        known = self._models.get(model)
        if known is not None:
            return known
        label = model if any(fnmatch.fnmatchcase(model, g) for g in self._allow) and len(model) <= 100 else "other"
        with self._lock:
            if label != "other" and len(self._models) >= self._max_models:
                label = "other"
            if len(self._models) < self._max_models * 4:  # cache "other" verdicts too, boundedly
                self._models[model] = label
        return label

    def provider_label(self, provider: str) -> str:
        return provider if provider in self._providers else "other"

    @staticmethod
    def operation_label(operation: str) -> str:
        return operation if operation in OPERATIONS else "other"

    def tool_label(self, tool: str | None) -> str:
        """The tool name for the first `max_tools` tools seen, else 'other'; 'none' for no tool."""
        return self._capped(self._tools, tool) if tool else "none"

    def error_label(self, error: str | None) -> str:
        """error.type as on the span, bounded: '' for none; an HTTP status or a transport error as it is; a
        provider's own type (`rate_limit_error`, `RESOURCE_EXHAUSTED`) for the first MAX_ERROR_TYPES seen;
        else `_OTHER`, the conventions' fallback."""
        if not error:
            return ""
        if error in CONNECTION_ERRORS or (error.isdigit() and len(error) == 3):
            return error
        return self._capped(self._errors, error, cap=MAX_ERROR_TYPES, other="_OTHER")

    def _capped(self, seen: set[str], name: str, *, cap: int | None = None, other: str = "other") -> str:
        """`name` while fewer than `cap` (default `max_tools`) names were seen in `seen` (or it was one of them),
        else `other`.

        A name shaped like a secret (a key, a random token) is `other` too: a label is kept for good."""
        if name in seen:
            return name
        with self._lock:
            if len(seen) < (self._max_tools if cap is None else cap) and len(name) <= 100 and not _secret_like(name):
                seen.add(name)
                return name
        return other
