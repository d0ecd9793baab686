"""The convention tables in docs/telemetry.md are the ones in brownout.core.semconv, name for name."""

from __future__ import annotations

import dataclasses

import pytest

from brownout.core.semconv import SEMCONV_KEYS, VERSIONS, SemconvKey
from tests.docs.mdpages import DOCS, page
from tests.docs.semconv_doc import SECTION, documented


@pytest.mark.parametrize("key", SEMCONV_KEYS)
def test_documented_names_are_the_emitters_names(key: SemconvKey) -> None:
    semconv = VERSIONS[key]
    doc = documented(key)
    assert doc.title.endswith(semconv.release.rsplit(" ", 1)[1]), (doc.title, semconv.release)
    assert doc.spans == dataclasses.asdict(semconv.spans)
    expected = {
        f.name: (None if (m := getattr(semconv.metrics, f.name)) is None else (m.name, m.prometheus))
        for f in dataclasses.fields(semconv.metrics)
    }
    assert doc.metrics == expected


def test_the_versions_table_names_each_release_and_schema_url() -> None:
    (table,) = [t for t in page(DOCS / "telemetry.md").tables_under(SECTION) if "version" in t.columns]
    rows = {row["version"].source.split(":", 1)[0]: row for row in table.rows}
    assert set(rows) == set(SEMCONV_KEYS)
    for key, row in rows.items():
        semconv = VERSIONS[key]  # type: ignore[index]
        assert semconv.release.rsplit(" ", 1)[1] in row["version"].source
        assert row["instrumentation scope schema_url"].code == (semconv.schema_url,)
