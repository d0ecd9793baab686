"""What the control API drives (`ControlTarget`), and the addon's one over its fault engine (`EngineControl`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

__all__ = ["ControlTarget", "EngineControl"]


class ControlTarget(Protocol):
    """What the control API drives; the addon provides it (see EngineControl).

    Methods are called from the control server's threads, not from mitmproxy's event loop:
    implementations either flip plain attributes (atomic in CPython) or hop onto the loop.
    `pause`, `resume` and `set_rule_enabled` may return fields to add to the answer (with a fleet:
    whether the fleet's shared store was reached); `set_rule_enabled` returns False for no such rule.
    """

    def status(self) -> dict[str, Any]: ...
    def pause(self) -> Mapping[str, Any] | None: ...
    def resume(self) -> Mapping[str, Any] | None: ...
    def reload(self) -> tuple[bool, str]: ...
    def set_rule_enabled(self, name: str, enabled: bool) -> bool | Mapping[str, Any]: ...
    def violations(self, since: float | None) -> list[dict[str, Any]]: ...
    def exchanges(self, since: float | None, limit: int | None) -> list[dict[str, Any]]: ...


def _here[T](fn: Callable[..., T], *args: Any) -> T:
    return fn(*args)


class EngineControl:
    """A ControlTarget over a FaultEngine-like object, a violations source and a reload callable.

    `run_on_loop` (the proxy's LoopRunner.call) runs engine mutations (rule toggles) on the
    proxy's event loop, so they never interleave with an exchange being planned there;
    pause/resume only flip a flag; `reload` hops onto the loop itself after parsing.
    `publish` writes switches to the fleet (proxy/fleet.py) once they apply here, and returns what
    the answer says about it; without a fleet it returns nothing.
    """

    def __init__(
        self,
        engine: Any,
        *,
        reload: Callable[[], tuple[bool, str]],
        violations: Callable[[float | None], list[dict[str, Any]]] = lambda since: [],
        exchanges: Callable[[float | None, int | None], list[dict[str, Any]]] = lambda since, limit: [],
        extra_status: Callable[[], Mapping[str, Any]] | None = None,
        run_on_loop: Callable[..., Any] = _here,
        publish: Callable[[dict[str, str]], Mapping[str, Any]] = lambda switches: {},
    ) -> None:
        self.engine = engine
        self._publish = publish
        self._reload = reload
        self._violations = violations
        self._exchanges = exchanges
        self._extra = extra_status
        self._on_loop = run_on_loop

    def status(self) -> dict[str, Any]:
        out = dict(self.engine.status())
        if self._extra is not None:
            out.update(self._extra())
        return out

    def pause(self) -> Mapping[str, Any]:
        self.engine.pause()  # a bool flip: visible to the next exchange without a loop hop
        return self._publish({"paused": "1"})

    def resume(self) -> Mapping[str, Any]:
        self.engine.resume()
        return self._publish({"paused": "0"})

    def reload(self) -> tuple[bool, str]:
        return self._reload()

    def set_rule_enabled(self, name: str, enabled: bool) -> bool | Mapping[str, Any]:
        def flip() -> bool:
            try:
                self.engine.set_rule_enabled(name, enabled)
            except KeyError:
                return False
            return True

        if not self._on_loop(flip):
            return False
        return self._publish({f"rule:{name}": "1" if enabled else "0"}) or True

    def violations(self, since: float | None) -> list[dict[str, Any]]:
        return self._violations(since)

    def exchanges(self, since: float | None, limit: int | None) -> list[dict[str, Any]]:
        return self._exchanges(since, limit)
