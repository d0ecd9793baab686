"""Exchange spans: the SDK's live `Span` against ending the span in one step, CPU per exchange span.

    .venv/bin/python bench/spans.py        # 2,000 spans of one LLM exchange, three interleaved rounds

Both build the same span for the same exchange (GenAI attributes, two fault events, one
violation) and hand it to a processor that keeps nothing: what is left is the span's own cost
on the event loop. The live path is what brownout takes for a provider with a processor that
acts on start; one step is what it takes otherwise (core/span_emit.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cpu import interleaved
from brownout.core.exchange import FaultRecord
from brownout.core.spans import SpanBuilder
from brownout.invariants.records import Violation
from tests.exporters.expsamples import exchange


class Discards(SpanProcessor):
    """Keeps nothing: a span's cost without an exporter's."""


class DiscardsActsOnStart(Discards):
    def on_start(self, span, parent_context=None) -> None:  # acting on start forces the SDK's live span
        return None


def _builder(processor: SpanProcessor) -> SpanBuilder:
    provider = TracerProvider(resource=Resource({"service.name": "brownout"}))
    provider.add_span_processor(processor)
    return SpanBuilder(provider)


def main(spans: int = 2000) -> None:
    ex = exchange()
    ex.faults = [FaultRecord("slow", "latency", {"ms": 250}, ex.timings.start), FaultRecord("cut", "truncate", {})]
    found = [Violation("no_pii", "error", "email in request body", ex.session, 0.0, span_id=None)]
    builders = {"live": _builder(DiscardsActsOnStart()), "one step": _builder(Discards())}
    print(f"{spans} exchange spans, CPU us per span:")
    paths = {name: (lambda b=b: [b.build(ex, found) for _ in range(spans)]) for name, b in builders.items()}
    for cost in interleaved(paths, spans):
        print(
            f"  live {cost['live']:5.1f}   one step {cost['one step']:5.1f}   ratio {cost['live'] / cost['one step']:3.1f}x"
        )


if __name__ == "__main__":
    main()
