"""A dependency whose internals brownout reads directly has an upper version bound.

docs/reliability.md ("Dependencies' internals") lists each dependency brownout reads private names
of, and how a release that changes them is caught; this checks that list against pyproject.toml.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _internals_table() -> dict[str, str]:
    """dependency -> its "guarded by" cell, from the docs table."""
    page = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    section = page.split("## Dependencies' internals", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \|[^|]*\| ([^|]*) \|$", section, re.M)
    return {name: guard.strip() for name, guard in rows}


def test_each_dependency_read_beyond_its_api_is_bounded_or_behind_a_tested_adapter() -> None:
    table = _internals_table()
    assert {"mitmproxy", "opentelemetry-exporter-otlp-proto-http"} <= set(table)
    requirements = {}
    for req in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]:
        name, specs = re.fullmatch(r"\s*([A-Za-z0-9._-]+)\s*(.*)", req.split(";")[0]).groups()
        requirements[name.lower()] = [spec.strip() for spec in specs.split(",") if spec.strip()]
    for name, guard in table.items():
        if guard.startswith("upper version bound"):
            specs = requirements[name]
            assert any(spec.startswith(("<", "==", "~=")) for spec in specs), f"{name} needs an upper bound: {specs}"
        else:
            assert guard.startswith("adapter:") and "tests/" in guard, f"{name}: no bound and no tested adapter"
            test_file = re.search(r"`(tests/[^`]+\.py)`", guard)
            assert test_file and (ROOT / test_file.group(1)).is_file(), guard
