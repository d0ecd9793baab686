"""docs/telemetry.md's "Convention versions" tables, read back: the names each version emits, as documented."""

from __future__ import annotations

from dataclasses import dataclass

from brownout.core.semconv import SemconvKey
from tests.docs.mdpages import DOCS, Table, page

__all__ = ["SECTION", "DocumentedVersion", "documented"]

SECTION = "Convention versions"


@dataclass(frozen=True)
class DocumentedVersion:
    """One version's column: span names and metrics (OpenTelemetry name, /metrics name) by key."""

    title: str
    spans: dict[str, str]
    metrics: dict[str, tuple[str, str] | None]

    @property
    def span_names(self) -> set[str]:
        return set(self.spans.values())

    @property
    def prometheus_names(self) -> set[str]:
        return {m[1] for m in self.metrics.values() if m is not None}


def _table(heading: str) -> Table:
    tables = [t for t in page(DOCS / "telemetry.md").tables_under(heading) if SECTION in t.headings]
    assert len(tables) == 1, f"one table under {SECTION} / {heading}, found {len(tables)}"
    return tables[0]


def _column(table: Table, key: SemconvKey) -> str:
    (column,) = [c for c in table.columns if c.startswith(f"{key}:")]
    return column


def documented(key: SemconvKey) -> DocumentedVersion:
    spans_table, metrics_table = _table("Span attributes and events"), _table("GenAI metrics")
    column = _column(spans_table, key)
    spans = {}
    for row in spans_table.rows:
        (name,) = row[column].code
        spans[row["key"].code[0]] = name
    metrics: dict[str, tuple[str, str] | None] = {}
    mcolumn = _column(metrics_table, key)
    for row in metrics_table.rows:
        code = row[mcolumn].code
        assert len(code) in (0, 2), f"{row['key'].source}: a metric cell is its two names or empty"
        metrics[row["key"].code[0]] = (code[0], code[1]) if code else None
    return DocumentedVersion(column, spans, metrics)
