"""The fault engine's overlay: rules laid over the config's for a while (a staging experiment's phase).

An overlay's rules run after the config's own, under their own names, and start with fresh counters
each time an overlay is set (in a shared store too: `counters_tag` keys them apart from an earlier run
of the same phase). Their time windows (`start_s`, periods, ramps) count from the overlay's `origin`,
the phase's start, the same instant on every replica. A hot reload of the config keeps the overlay;
clearing it leaves the config's rules exactly as they were, counters included. The kill switch and
rule toggles apply to overlay rules as to any other.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from brownout.faults.config import RuleConfig

if TYPE_CHECKING:
    from brownout.faults.engine import CompiledRule, RuleSet

__all__ = ["OverlayRules"]

log = logging.getLogger(__name__)


class OverlayRules:
    """Mixed into FaultEngine: `set_overlay` / `clear_overlay`."""

    rules: list[CompiledRule]
    ruleset: RuleSet
    origin: float
    overlay: tuple[CompiledRule, ...]
    _compile: Callable[[RuleSet, dict[str, CompiledRule]], list[CompiledRule]]
    _refresh_active: Callable[[], None]

    def set_overlay(self, rules: Sequence[RuleConfig], *, origin: float, counters_tag: str = "") -> None:
        """Run `rules` after the config's from the next exchange on, in place of any earlier overlay.

        Raises ValueError for a rule the engine cannot run, or a name one of the config's rules has."""
        base = self.base_rules
        clash = sorted({r.name for r in base} & {r.name for r in rules})
        if clash:
            raise ValueError(f"overlay rule names clash with the config's rules: {', '.join(clash)}")
        saved, self.origin = self.origin, origin  # _compile bases the windows on the engine's origin
        try:
            compiled = self._compile(dataclasses.replace(self.ruleset, rules=tuple(rules)), {})
        finally:
            self.origin = saved
        if counters_tag:
            for rule in compiled:
                rule.key = f"{counters_tag}/{rule.key}"
        self.overlay = tuple(compiled)
        self.rules = [*base, *compiled]
        self._refresh_active()
        log.warning("fault engine: overlay of %d rules applied: %s", len(compiled), ", ".join(r.name for r in compiled))

    def clear_overlay(self) -> None:
        """Back to the config's rules alone."""
        if not self.overlay:
            return
        names = ", ".join(r.name for r in self.overlay)
        self.rules = self.base_rules
        self.overlay = ()
        self._refresh_active()
        log.warning("fault engine: overlay removed: %s", names)

    @property
    def base_rules(self) -> list[CompiledRule]:
        """The config's own rules (without the overlay's)."""
        mine = {id(r) for r in self.overlay}
        return [r for r in self.rules if id(r) not in mine]

    def _with_overlay(self, rules: list[CompiledRule]) -> list[CompiledRule]:
        """A reload's rules with the overlay after them; a config that now names an overlay rule wins."""
        if not self.overlay:
            return rules
        if {r.name for r in rules} & {r.name for r in self.overlay}:
            log.warning("fault engine: the reloaded config names an overlay rule; the overlay is removed")
            self.overlay = ()
            return rules
        return [*rules, *self.overlay]
