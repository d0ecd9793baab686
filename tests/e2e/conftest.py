"""End-to-end helpers: one brownout per module (startup and shutdown cost about a second each),
sessions separated by proxy-URL usernames, and collectors for the violations and spans brownout made.

The OTLP receivers are the exporter tests' own (real protobuf decoding), imported, not copied.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import threading
import time
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from brownout.invariants.records import Violation
from brownout.proxy.embed import ProxyHandle, running_proxy
from tests.exporters.test_otlp import Received, grpc_receiver, http_receiver  # noqa: F401 - fixtures

_counter = itertools.count()


class Violations:
    """Every violation the pipeline announced (span-level, session-level and session-end), thread-safe."""

    def __init__(self) -> None:
        self._items: list[Violation] = []
        self._lock = threading.Lock()

    def __call__(self, violation: Violation) -> None:
        with self._lock:
            self._items.append(violation)

    def all(self) -> list[Violation]:
        with self._lock:
            return list(self._items)

    def of(self, session: str, invariant: str | None = None) -> list[Violation]:
        return [v for v in self.all() if v.session_id == session and (invariant is None or v.invariant == invariant)]

    def wait(self, session: str, invariant: str, n: int = 1, timeout_s: float = 5.0) -> list[Violation]:
        deadline = time.monotonic() + timeout_s
        while len(self.of(session, invariant)) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        found = self.of(session, invariant)
        assert len(found) >= n, f"expected {n} {invariant} violation(s) in session {session!r}, got {self.of(session)}"
        return found


class Spans:
    """The spans brownout built and ended, read from its own TracerProvider through an extra processor."""

    def __init__(self, handle: ProxyHandle) -> None:
        self.exporter = InMemorySpanExporter()
        handle.addon.pipeline.exporters.add_span_processor(SimpleSpanProcessor(self.exporter))

    def all(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    def of(self, session: str) -> list[ReadableSpan]:
        return [s for s in self.all() if (s.attributes or {}).get("brownout.session.id") == session]

    def wait(self, session: str, n: int, timeout_s: float = 5.0) -> list[ReadableSpan]:
        deadline = time.monotonic() + timeout_s
        while len(self.of(session)) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        found = self.of(session)
        assert len(found) >= n, f"expected {n} spans in session {session!r}, got {len(found)}"
        return found

    def by_span_id(self, span_id_hex: str, timeout_s: float = 5.0) -> ReadableSpan:
        deadline = time.monotonic() + timeout_s
        while True:
            for s in self.all():
                if s.context is not None and f"{s.context.span_id:016x}" == span_id_hex:
                    return s
            assert time.monotonic() < deadline, f"no span {span_id_hex}"
            time.sleep(0.01)


@contextlib.contextmanager
def start_brownout(
    config_text: str,
    workdir: Path,
    ca_template: Path,
    *,
    upstream: Any = None,
    extra_options: dict[str, Any] | None = None,
    on_exchange: Callable[[Any], None] | None = None,
    contained: Collection[str] = (),
) -> Iterator[ProxyHandle]:
    """A brownout proxy for a whole module (the conftest's brownout_proxy fixture is per test).

    Like that fixture, it fails when the proxy's guard contained a component failure, except for
    the components in `contained`, which the module makes fail on purpose."""
    n = next(_counter)
    confdir = workdir / f"confdir-{n}"
    shutil.copytree(ca_template, confdir)
    path = workdir / f"chaos-{n}.yaml"
    path.write_text(config_text, encoding="utf-8")
    options: dict[str, Any] = {"brownout_metrics_listen": "127.0.0.1:0", "brownout_control_listen": "127.0.0.1:0"}
    options.update(extra_options or {})
    if upstream is not None and getattr(upstream, "ca_pem_path", None):
        options.setdefault("ssl_verify_upstream_trusted_ca", upstream.ca_pem_path)
    with running_proxy(path, confdir=confdir, extra_options=options, on_exchange=on_exchange) as handle:
        yield handle
        unexpected = {c: n for c, n in handle.addon.guard.snapshot().items() if c not in contained}
    assert not unexpected, f"brownout contained component failures: {unexpected}"


@pytest.fixture(scope="module")
def module_upstream() -> Iterator[Any]:
    """One plain-HTTP mock upstream for the whole module."""
    from brownout.proxy.demo.upstream import MockUpstream

    with MockUpstream.run_in_thread(tls=False) as up:
        yield up


@pytest.fixture(scope="module")
def module_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e")


__all__ = ["Received", "Spans", "Violations", "start_brownout"]
