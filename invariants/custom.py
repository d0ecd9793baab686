"""custom: a user function `package.module:function(span, session)` returning violations."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any, Literal

from pydantic import Field

from brownout.core.spans import ExchangeSpan
from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.records import Violation
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary

__all__ = ["Custom", "CustomConfig", "load_callable"]


class CustomConfig(InvariantConfigBase):
    """`callable` is imported once at load; `params` are passed as keyword `params=` when given."""

    type: Literal["custom"]
    callable: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", description="package.module:function")
    params: dict[str, Any] = Field(default_factory=dict)


def load_callable(spec: str) -> Callable[..., Any]:
    """Import `package.module:function`; ValueError naming the spec when that fails."""
    module_name, _, attr = spec.partition(":")
    try:
        func = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"custom invariant callable {spec!r} cannot be imported: {exc}") from exc
    if not callable(func):
        raise ValueError(f"custom invariant callable {spec!r} is not callable")
    return func


class Custom(Invariant[CustomConfig]):
    """Calls the user's function per span; it returns Violations, dicts (message, severity, details) or strings."""

    type = "custom"
    Config = CustomConfig

    def __init__(self, config: CustomConfig) -> None:
        super().__init__(config)
        self._func = load_callable(config.callable)

    def check_span(self, span: ExchangeSpan, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        kwargs = {"params": dict(self.config.params)} if self.config.params else {}
        result = self._func(span, session, **kwargs)
        return [self._coerce(item, session, exchange) for item in _iterate(result)]

    def _coerce(self, item: object, session: Session, exchange: ExchangeSummary) -> Violation:
        if isinstance(item, Violation):
            return item
        if isinstance(item, str):
            return self.violation(item, session, exchange)
        if isinstance(item, dict) and isinstance(item.get("message"), str):
            severity = item.get("severity")
            if severity is not None and severity not in ("info", "warning", "error", "critical"):
                raise ValueError(f"custom invariant {self.name!r} returned severity {severity!r}")
            return self.violation(
                item["message"], session, exchange, severity=severity, details=item.get("details") or {}
            )
        raise TypeError(f"custom invariant {self.name!r} returned {type(item).__name__}, not a violation")


def _iterate(result: object) -> Iterable[object]:
    if result is None:
        return ()
    if isinstance(result, (str, dict, Violation)):
        return (result,)
    if isinstance(result, Iterable):
        return result
    raise TypeError(f"custom invariant returned {type(result).__name__}")
