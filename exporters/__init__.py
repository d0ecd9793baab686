"""Exporters: Prometheus metrics, OTLP traces and JSONL logs, behind one hub (`exporters.hub.Exporters`).

Submodules are imported on use: the gRPC OTLP exporter is heavy and most runs never need it.
"""

from __future__ import annotations

__all__ = ["EXPORTERS"]

# The `exporter` label values of brownout_export_dropped_total and the "exporter:<name>"
# Guard components; the hub reports failures under exactly these names.
EXPORTERS: tuple[str, ...] = ("prometheus", "otlp", "jsonl")
