"""pytest plugin: a `brownout` fixture that runs a brownout proxy for one test and points the environment at it.

    @pytest.mark.brownout(config="chaos.yaml")        # a path (relative to the test file), dict or BrownoutConfig
    def test_agent(brownout):
        run_my_agent()                                 # HTTP(S)_PROXY, SSL_CERT_FILE, ... are set
        assert not brownout.violations(severity="error")
        assert brownout.faults(fault="http_error")

brownout never lets its own failures break traffic, so a fault, invariant or exporter that raised
would otherwise go unnoticed: a test whose proxy contained one gets a BrownoutInternalErrorWarning
naming the components, and fails at teardown with `@pytest.mark.brownout(strict=True)`.

Registered through the `pytest11` entry point, so installing brownout enables it.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["BrownoutFixture", "BrownoutInternalErrorWarning", "brownout"]

logger = logging.getLogger(__name__)

SEVERITY_ORDER = ("info", "warning", "error", "critical")


class BrownoutInternalErrorWarning(UserWarning):
    """The test's proxy contained failures of its own components: faults, spans or violations may be missing."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "brownout(config=None, session=None, strict=False): run the `brownout` fixture's proxy with this chaos "
        "config (path relative to the test file, dict, or BrownoutConfig) and proxy username (session); strict: "
        "fail the test when a brownout component failed (contained) during it, not only warn.",
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "brownout_confdir", "Directory for brownout's CA (default $BROWNOUT_CONFDIR or ~/.brownout).", default=""
    )


class BrownoutFixture:
    """A running proxy for one test, with what it saw."""

    def __init__(self, handle: Any, session: str) -> None:
        self.handle = handle
        self.session = session
        self._lock = threading.Lock()
        self._exchanges: list[Any] = []
        self._violations: list[Any] = []

    # --- callbacks from the proxy thread ---
    def _on_exchange(self, exchange: Any) -> None:
        with self._lock:
            self._exchanges.append(exchange)

    def _on_violation(self, violation: Any) -> None:
        with self._lock:
            self._violations.append(violation)

    # --- what tests use ---
    @property
    def url(self) -> str:
        return str(self.handle.url)

    @property
    def env(self) -> dict[str, str]:
        """The variables the fixture set (HTTP(S)_PROXY with the session username, SSL_CERT_FILE, ...)."""
        return {**self.handle.env_for(self.session), "BROWNOUT_SESSION": self.session}

    @property
    def addon(self) -> Any:
        return self.handle.addon

    def exchanges(self) -> list[Any]:
        """Finished exchanges (`brownout.core.exchange.Exchange`) in completion order. It first waits (up to
        10 s) for those whose answers were sent and whose bookkeeping waits for an idle moment of the proxy."""
        pipeline = getattr(self.handle.addon, "pipeline", None)
        if pipeline is not None:
            pipeline.wait_completed()
        with self._lock:
            return list(self._exchanges)

    def faults(self, *, rule: str | None = None, fault: str | None = None) -> list[Any]:
        """Injected faults (`FaultRecord`), optionally only one rule or fault type."""
        return [
            f
            for ex in self.exchanges()
            for f in ex.faults
            if (rule is None or f.rule == rule) and (fault is None or f.fault == fault)
        ]

    def violations(
        self, *, severity: str | None = None, min_severity: str | None = None, invariant: str | None = None
    ) -> list[Any]:
        """Invariant violations: exactly `severity`, or at least `min_severity`, optionally one invariant.
        With `proxy.analysis: process` it first waits (up to 10 s) for the exchanges still being judged."""
        pipeline = getattr(self.handle.addon, "pipeline", None)
        if pipeline is not None:
            pipeline.wait_judged()
        floor = SEVERITY_ORDER.index(min_severity) if min_severity else 0
        with self._lock:
            found = list(self._violations)
        return [
            v
            for v in found
            if (severity is None or v.severity == severity)
            and (min_severity is None or SEVERITY_ORDER.index(v.severity) >= floor)
            and (invariant is None or v.invariant == invariant)
        ]

    def internal_errors(self) -> dict[str, int]:
        """Contained failures of brownout's own components so far, by component (`fault:<type>`, ...)."""
        guard = getattr(self.handle.addon, "guard", None)
        return {k: v for k, v in dict(getattr(guard, "errors", {})).items() if v}

    def apply(self, config: Any) -> None:
        """Switch the chaos config for the rest of the test."""
        self.handle.call(self.handle.addon.apply_config, _as_config(config, Path.cwd()))

    def pause(self) -> None:
        self.handle.call(self.handle.addon.engine.pause)

    def resume(self) -> None:
        self.handle.call(self.handle.addon.engine.resume)


def _as_config(value: Any, base: Path) -> Any:
    from brownout.proxy.config import BrownoutConfig
    from brownout.proxy.configload import load_config

    if value is None or isinstance(value, BrownoutConfig):
        return value
    if isinstance(value, dict):
        return BrownoutConfig.model_validate(value)
    path = Path(value)
    if not path.is_absolute() and not path.exists():
        path = base / path
    return load_config(path)


@pytest.fixture
def brownout(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[BrownoutFixture]:
    """A brownout proxy for this test; the environment points HTTP clients at it."""
    from brownout.proxy.embed import running_proxy

    marker = request.node.get_closest_marker("brownout")
    kwargs = dict(marker.kwargs) if marker else {}
    if marker and marker.args:
        kwargs.setdefault("config", marker.args[0])
    config = _as_config(kwargs.get("config"), Path(str(request.path)).parent)
    session = str(kwargs.get("session") or f"test-{request.node.name}")[:128]
    confdir = request.config.getini("brownout_confdir") or os.environ.get("BROWNOUT_CONFDIR") or None
    holder: list[BrownoutFixture] = []
    # One proxy per test: /metrics and the control API on free ports, so parallel runs never clash.
    ports = {"brownout_metrics_listen": "127.0.0.1:0", "brownout_control_listen": "127.0.0.1:0"}
    with running_proxy(
        config=config,
        confdir=confdir,
        extra_options=ports,
        on_exchange=lambda ex: holder[0]._on_exchange(ex) if holder else None,
    ) as handle:
        fx = BrownoutFixture(handle, session)
        holder.append(fx)
        listeners = getattr(getattr(handle.addon, "pipeline", None), "violation_listeners", None)
        if isinstance(listeners, list):
            listeners.append(fx._on_violation)
        for key, value in fx.env.items():
            monkeypatch.setenv(key, value)
        yield fx
    _report_internal_errors(fx, strict=bool(kwargs.get("strict")))


def _report_internal_errors(fx: BrownoutFixture, *, strict: bool) -> None:
    errors = fx.internal_errors()
    if not errors:
        return
    message = (
        "brownout contained failures of its own components during this test ("
        + ", ".join(f"{k}: {v}" for k, v in sorted(errors.items()))
        + "): the traffic went on, but faults, spans or violations may be missing; the log has the tracebacks"
    )
    if strict:
        pytest.fail(message)
    warnings.warn(BrownoutInternalErrorWarning(message), stacklevel=2)
