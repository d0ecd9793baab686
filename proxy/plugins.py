"""Plugins and the catalogue: the fault types, invariant types, exporters and wire formats one config knows.

A config names plugins by import path; its catalogue (the built-ins plus those plugins) is built
before the rest of the config is validated, so rules and invariants may use the types they add::

    plugins:
      - acme.brownout_ext:plugin          # "package.module:object"
    rules:
      - {name: flaky-gateway, fault: {type: acme_gateway_error, rate: 0.5}}
    invariants:
      - {type: acme_cost_cap, max_usd: 2}

The object (a module, class or instance) may carry any of these attributes, each a sequence:

- `faults`: `brownout.faults.base.Fault` subclasses. Their `type` becomes a valid
  `rules[].fault.type`, validated by their `Params` model (`type: Literal["<type>"]`), exactly
  like built-in faults.
- `invariants`: `brownout.invariants.base.Invariant` subclasses; their `type` becomes a valid
  `invariants[].type`, validated by their `Config` model.
- `exporters`: zero-argument factories (a class will do). Each exporter hub calls every factory
  once and the object it returns may define any of `on_exchange(exchange, violations)`,
  `on_violation(violation)`, `on_decision(decision)` and `shutdown()`. An object that is also an
  OpenTelemetry `SpanProcessor` is attached to brownout's TracerProvider and sees every span.
- `wire_formats`: `brownout.core.wire.base.WireFormat` instances (subclass
  `brownout.core.wire.ProviderFormat` to give faults the provider's error bytes), tried after the
  built-in formats and before the generic fallback. Their `provider` must be unique, and rules
  may name it in `match.provider`.

Nothing is registered process-wide: each config carries its own `Catalogue`, so two proxies in
one process (or two tests, an experiment's phases, a config and its hot reload) with different
plugins never see each other's types, and a hot reload may add or drop plugins. Names may not collide with built-ins or other plugins (a config
error naming `plugins[i]`). Plugin code on the traffic path is contained like brownout's own: a
failure is logged once, counted in `brownout_internal_errors_total{component}` (`fault:<type>`,
`invariant:<name>`, `exporter:<name>`, `wire`, `spans`) and never reaches the agent.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

from brownout import faults, invariants
from brownout.core import wire
from brownout.core.registry import build_registry
from brownout.faults.base import Fault
from brownout.invariants.base import Invariant

__all__ = ["BUILTIN", "SPEC", "Catalogue", "catalogue_for", "load_plugin"]

log = logging.getLogger(__name__)

SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_ATTRS = ("faults", "invariants", "exporters", "wire_formats")


@dataclass(frozen=True)
class Catalogue:
    """What one config can name and run: built-in and plugin types, exporter factories, wire formats."""

    faults: Mapping[str, type[Fault]] = field(default_factory=lambda: faults.REGISTRY)
    invariants: Mapping[str, type[Invariant]] = field(default_factory=lambda: invariants.REGISTRY)
    exporters: tuple[Callable[[], Any], ...] = ()
    wire: wire.WireFormats = wire.BUILTIN
    plugins: tuple[str, ...] = ()

    def validation_context(self) -> dict[str, Any]:
        """The pydantic validation context the config sections read (see brownout.core.config)."""
        return {
            "catalogue": self,
            "fault_types": self.faults,
            "invariant_types": self.invariants,
            "providers": self.wire.providers,
            "llm_providers": self.wire.llm_providers,
            "signed_providers": self.wire.signed_providers,
        }

    def with_plugin(self, spec: str, plugin: Any) -> Catalogue:
        """This catalogue plus what `plugin` adds; ValueError saying what is wrong (nothing changes then)."""
        if not any(hasattr(plugin, attr) for attr in _ATTRS):
            # Most likely the path points at the wrong object: say what was expected.
            raise ValueError(f"defines none of {', '.join(_ATTRS)}")
        new_faults = _classes("faults", _seq(plugin, "faults"), Fault)
        new_invariants = _classes("invariants", _seq(plugin, "invariants"), Invariant)
        exporters = _seq(plugin, "exporters")
        if not all(callable(f) for f in exporters):
            raise ValueError("`exporters` entries must be zero-argument factories (callables)")
        return Catalogue(
            faults=build_registry("fault", [*self.faults.values(), *new_faults], "Params"),
            invariants=build_registry("invariant", [*self.invariants.values(), *new_invariants], "Config"),
            exporters=(*self.exporters, *exporters),
            wire=self.wire.with_extra(_seq(plugin, "wire_formats")),
            plugins=(*self.plugins, spec),
        )


BUILTIN = Catalogue()


def _seq(plugin: Any, attr: str) -> tuple[Any, ...]:
    value = getattr(plugin, attr, None) or ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"`{attr}` must be a list or tuple, not {type(value).__name__}")
    return tuple(value)


def _classes(kind: str, classes: tuple[Any, ...], base: type) -> tuple[Any, ...]:
    for cls in classes:
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise ValueError(f"{kind} entry {cls!r} is not a {base.__module__}.{base.__name__} subclass")
    return classes


def load_plugin(spec: str) -> Any:
    """Import the object at "package.module:object" (Python caches the import); ValueError saying why not."""
    if not SPEC.match(spec):
        raise ValueError(f"{spec!r} is not a 'package.module:object' path")
    module_name, _, attr = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as e:
        raise ValueError(f"cannot import plugin {spec!r}: {type(e).__name__}: {e}") from e
    return obj


def catalogue_for(specs: object) -> Catalogue:
    """The catalogue of a raw `plugins:` value, before the rest of the config is validated.

    Raises a pydantic ValidationError located at `plugins[i]`, so config errors name the entry
    (and configload its line). A value that is not a list of strings is left to the field's own
    validation (the built-in catalogue is returned for it).
    """
    catalogue = BUILTIN
    if not isinstance(specs, list):
        return catalogue
    errors: list[InitErrorDetails] = []
    for i, spec in enumerate(specs):
        if not isinstance(spec, str) or spec in catalogue.plugins:
            continue  # the field validator reports the type; a repeated entry adds nothing
        try:
            catalogue = catalogue.with_plugin(spec, load_plugin(spec))
        except ValueError as e:
            message = str(e) if str(e).startswith("cannot import") else f"plugin {spec!r}: {e}"
            err = PydanticCustomError("plugin", "{reason}", {"reason": message})
            errors.append(InitErrorDetails(type=err, loc=("plugins", i), input=spec))
    if errors:
        raise ValidationError.from_exception_data("BrownoutConfig", errors)
    if catalogue.plugins:
        log.info("brownout: plugins %s", ", ".join(catalogue.plugins))
    return catalogue
