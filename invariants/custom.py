"""custom: a user function `package.module:function(span, session)` or `file.py:function` returning violations."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from brownout.core.config import BASE_DIR, context_value, resolve_against
from brownout.core.spans import ExchangeSpan
from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.records import Violation
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary

__all__ = ["Custom", "CustomConfig", "callable_beside", "load_callable"]


class CustomConfig(InvariantConfigBase):
    """`callable` is imported once at load; `params` are passed as keyword `params=` when given."""

    type: Literal["custom"]
    callable: str = Field(
        pattern=r"^(?:[A-Za-z_][\w.]*|.+\.py):[A-Za-z_]\w*$",
        description="package.module:function, or path/to/file.py:function (relative to the config file)",
    )
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("callable")
    @classmethod
    def _file_beside_the_config(cls, spec: str, info: ValidationInfo) -> str:
        return callable_beside(spec, context_value(info, BASE_DIR, None))


def callable_beside(spec: str, base_dir: str | None) -> str:
    """`spec` with a relative `file.py` resolved against `base_dir` (a module name stays as it is)."""
    path, _, attr = spec.rpartition(":")
    return f"{resolve_against(path, base_dir)}:{attr}" if path.endswith(".py") else spec


def load_callable(spec: str) -> Callable[..., Any]:
    """Import `package.module:function` or load `path/file.py:function`; ValueError naming the spec when that fails."""
    module_name, _, attr = spec.rpartition(":")
    try:
        module = _load_file(module_name) if module_name.endswith(".py") else importlib.import_module(module_name)
        func = getattr(module, attr)
    except (ImportError, AttributeError, OSError, SyntaxError) as exc:
        raise ValueError(f"custom invariant callable {spec!r} cannot be imported: {exc}") from exc
    if not callable(func):
        raise ValueError(f"custom invariant callable {spec!r} is not callable")
    return func


def _load_file(path: str) -> ModuleType:
    """The module in `path`, executed afresh (a hot reload sees the file's changes)."""
    path = os.path.abspath(path)
    # A name of its own per file: two checks.py in different directories never collide.
    digest = hashlib.sha256(path.encode()).hexdigest()[:12]
    name = f"brownout_custom_{digest}_{''.join(c if c.isalnum() else '_' for c in os.path.basename(path)[:-3])}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickle look a class's module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


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
