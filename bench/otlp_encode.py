"""OTLP span encoding: the official encoder against brownout's direct one, CPU per span.

    .venv/bin/python bench/otlp_encode.py        # 512 of brownout's exchange spans, a batch's worth

The spans are what brownout's span builder makes of an exchange (GenAI attributes, content
capture on), encoded as one ExportTraceServiceRequest the way the exporter thread does.
"""

from __future__ import annotations

import sys
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cpu import interleaved
from brownout.core.spans import SpanBuilder
from brownout.exporters.otlp_wire import encode_request
from tests.exporters.expsamples import exchange


def main(batch: int = 512, repeats: int = 10) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "brownout"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    builder = SpanBuilder(provider, capture_content=True)
    for _ in range(batch):
        builder.build(exchange(), check=lambda span, ex: [])
    spans = list(memory.get_finished_spans())
    encoders = {
        "official": lambda: [encode_spans(spans).SerializeToString() for _ in range(repeats)],
        "direct": lambda: [encode_request(spans) for _ in range(repeats)],
    }
    print(f"{len(spans)} spans of {len(spans[0].attributes)} attributes, CPU us per span:")
    for cost in interleaved(encoders, repeats * len(spans)):
        print(f"  official {cost['official']:5.1f}   direct {cost['direct']:5.1f}   "
              f"ratio {cost['official'] / cost['direct']:3.1f}x")  # fmt: skip


if __name__ == "__main__":
    main()
