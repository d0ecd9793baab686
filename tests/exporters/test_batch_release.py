"""A failed OTLP export lets go of its batch at once (exporters/batch.py).

The official client catches the connection error, and urllib3's exceptions sit in reference cycles whose
tracebacks hold every frame of the export, the processor's too: without the release, each batch of
encoded spans (one per exchange) would wait for a full collection of the cyclic collector.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from brownout.exporters.batch import BoundedBatchProcessor
from brownout.exporters.otlp_http import DirectHttpSpanExporter
from brownout.exporters.otlp_wire import EncodedSpan, encode_span
from tests.cyclicgarbage import saved_garbage


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port bound but not listening: a connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_a_refused_export_leaves_no_encoded_span_for_the_collector(refusing_port: int) -> None:
    dropped: list[int] = []
    # A short timeout: the first retry's backoff is past the deadline, so one attempt, then failure.
    exporter = DirectHttpSpanExporter(endpoint=f"http://127.0.0.1:{refusing_port}/v1/traces", timeout=0.2)
    processor = BoundedBatchProcessor(exporter, dropped.append, schedule_delay_millis=60_000, encode=encode_span)
    provider = TracerProvider(resource=Resource({"service.name": "b"}))
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    try:
        with saved_garbage() as garbage:
            for n in range(20):
                tracer.start_span(f"s{n}").end()
            assert processor.force_flush(10_000)
            assert processor.force_flush(10_000)  # the worker's loop moves on: its own `batch` is the next, empty one
    finally:
        processor.shutdown(2)
    errors = [o for o in garbage if isinstance(o, ConnectionError)]
    held = [o for o in garbage if isinstance(o, EncodedSpan)]
    assert errors, "the refused export left no exception in a cycle: nothing here would hold the batch"
    assert held == []
