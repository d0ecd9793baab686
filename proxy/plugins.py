"""Plugins: extra fault types, invariant types, exporters and wire formats from user code.

A config names plugins by import path; they load before the rest of the config is
validated, so rules and invariants may use the types they add::

    plugins:
      - acme.brownout_ext:plugin          # "package.module:object"
    rules:
      - {name: flaky-gateway, fault: {type: acme_gateway_error, rate: 0.5}}
    invariants:
      - {type: acme_cost_cap, max_usd: 2}

The object (a module, class or instance) may carry any of these attributes, each a sequence:

- `faults`: `faults.base.Fault` subclasses. Their `type` becomes a valid `rules[].fault.type`,
  validated by their `Params` model (`type: Literal["<type>"]`), exactly like built-in faults.
- `invariants`: `invariants.base.Invariant` subclasses; their `type` becomes a valid
  `invariants[].type`, validated by their `Config` model.
- `exporters`: zero-argument factories (a class will do). Each exporter hub calls every
  factory once and the object it returns may define any of `on_exchange(exchange, violations)`,
  `on_violation(violation)`, `on_decision(decision)` and `shutdown()`. An object that is also an
  OpenTelemetry `SpanProcessor` is attached to brownout's TracerProvider and sees every span.
- `wire_formats`: `brownout.core.wire.base.WireFormat` instances (subclass `brownout.core.wire.ProviderFormat` to
  give faults the provider's error bytes), tried after the built-in formats and before the
  generic fallback; `provider` must be unique.

Rules: names may not collide with built-ins or other plugins (a config error naming
`plugins[i]`). Registration is process-wide and idempotent (loading a plugin twice is a no-op);
a hot reload may add plugins but never removes one (`unregister` exists for tests). Plugin code
on the traffic path is contained like brownout's own: a failure is logged once, counted in
`brownout_internal_errors_total{component}` (`fault:<type>`, the invariant's name,
`exporter:<name>`, `wire`, `spans`) and never reaches the agent.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Sequence
from typing import Any

from brownout import faults, invariants
from brownout.core import wire
from brownout.core.wire.base import WireFormat
from brownout.exporters import hub
from brownout.faults.base import Fault
from brownout.invariants.base import Invariant

__all__ = ["SPEC", "load_plugin", "load_plugins", "unregister"]

log = logging.getLogger(__name__)

SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

_LOADED: dict[str, Any] = {}  # spec -> plugin object


def _seq(plugin: Any, attr: str) -> tuple[Any, ...]:
    value = getattr(plugin, attr, None) or ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"`{attr}` must be a list or tuple, not {type(value).__name__}")
    return tuple(value)


def _new_classes(kind: str, classes: tuple[Any, ...], base: type, registry: dict[str, Any]) -> list[Any]:
    """The classes not registered yet; ValueError for a wrong kind or a taken name."""
    new = []
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise ValueError(f"{kind} entry {cls!r} is not a {base.__module__}.{base.__name__} subclass")
        if registry.get(getattr(cls, "type", None)) is not cls:
            new.append(cls)
    return new


_ATTRS = ("faults", "invariants", "exporters", "wire_formats")


def _register(plugin: Any) -> None:
    if not any(hasattr(plugin, attr) for attr in _ATTRS):
        # Most likely the path points at the wrong object: say what was expected.
        raise ValueError(f"defines none of {', '.join(_ATTRS)}")
    fault_classes = _new_classes("faults", _seq(plugin, "faults"), Fault, faults.REGISTRY)
    invariant_classes = _new_classes("invariants", _seq(plugin, "invariants"), Invariant, invariants.REGISTRY)
    exporters = [f for f in _seq(plugin, "exporters") if f not in hub.EXTRA_EXPORTERS]
    if not all(callable(f) for f in exporters):
        raise ValueError("`exporters` entries must be zero-argument factories (callables)")
    formats = [f for f in _seq(plugin, "wire_formats") if f not in wire.FORMATS]
    if not all(isinstance(f, WireFormat) for f in formats):
        raise ValueError("`wire_formats` entries must be brownout.core.wire.base.WireFormat instances")
    # Validate everything before touching a registry, so a bad plugin leaves them as they were.
    new_faults = faults.build_registry([*faults.REGISTRY.values(), *fault_classes])
    new_invariants = invariants.build_registry([*invariants.REGISTRY.values(), *invariant_classes])
    wire.check_formats(formats)
    # In place: faults.config and invariants.config look the registries up at validation time.
    faults.REGISTRY.update(new_faults)
    invariants.REGISTRY.update(new_invariants)
    hub.EXTRA_EXPORTERS.extend(exporters)
    for fmt in formats:
        wire.register_format(fmt)


def load_plugin(spec: str) -> Any:
    """Import and register the plugin at "package.module:object"; ValueError saying why not."""
    if spec in _LOADED:
        return _LOADED[spec]
    if not SPEC.match(spec):
        raise ValueError(f"{spec!r} is not a 'package.module:object' path")
    module_name, _, attr = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as e:  # an import can raise anything; the user needs to see what
        raise ValueError(f"cannot import plugin {spec!r}: {type(e).__name__}: {e}") from e
    try:
        _register(obj)
    except ValueError as e:
        raise ValueError(f"plugin {spec!r}: {e}") from e
    _LOADED[spec] = obj
    log.info("brownout: loaded plugin %s", spec)
    return obj


def load_plugins(specs: object) -> None:
    """Load a raw `plugins:` value before the config is validated.

    Raises a pydantic ValidationError located at `plugins[i]`, so config errors name the entry
    (and configload its line). A malformed value is left to the field's own validation.
    """
    from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

    if not isinstance(specs, list):
        return
    errors: list[InitErrorDetails] = []
    for i, spec in enumerate(specs):
        if not isinstance(spec, str):
            continue  # the field validator reports the type
        try:
            load_plugin(spec)
        except ValueError as e:
            err = PydanticCustomError("plugin", "{reason}", {"reason": str(e)})
            errors.append(InitErrorDetails(type=err, loc=("plugins", i), input=spec))
    if errors:
        raise ValidationError.from_exception_data("BrownoutConfig", errors)


def unregister(spec: str) -> None:
    """Forget a loaded plugin and remove what it registered (for tests; running proxies keep theirs)."""
    plugin = _LOADED.pop(spec, None)
    if plugin is None:
        return
    for cls in _seq(plugin, "faults"):
        if faults.REGISTRY.get(cls.type) is cls:
            del faults.REGISTRY[cls.type]
    for cls in _seq(plugin, "invariants"):
        if invariants.REGISTRY.get(cls.type) is cls:
            del invariants.REGISTRY[cls.type]
    for factory in _seq(plugin, "exporters"):
        if factory in hub.EXTRA_EXPORTERS:
            hub.EXTRA_EXPORTERS.remove(factory)
    for fmt in _seq(plugin, "wire_formats"):
        wire.unregister_format(fmt)
