"""bench/icount.py: what it runs under valgrind. The counting itself takes valgrind and minutes
(docs/performance.md); here, the configurations it compares and the child run it counts."""

from __future__ import annotations

from pathlib import Path

import yaml

from bench import icount
from bench.hooks import ALL_ON, Shape


def test_ablation_removes_one_part_at_a_time_and_exports_spans_only_at_shutdown() -> None:
    base = yaml.safe_load(Path(ALL_ON).read_text())
    found = icount.variants(ablate=True)
    assert found["no rules"] is None
    parts = [i["type"] for i in base["invariants"]] + list(base["exporters"])
    assert list(found) == ["no rules", "all-on", *(f"all-on without {p}" for p in parts)]
    for name, cfg in found.items():
        if cfg is None:
            continue
        assert cfg["exporters"].get("otlp", {"schedule_delay_ms": 3_600_000})["schedule_delay_ms"] == 3_600_000
        left = [i["type"] for i in cfg["invariants"]] + list(cfg["exporters"])
        removed = [p for p in parts if p not in left]
        assert removed == ([] if name == "all-on" else [name.removeprefix("all-on without ")])
    assert list(icount.variants(ablate=False)) == ["no rules", "all-on"]


def test_the_child_run_repeats_the_exchange_it_is_given(tmp_path: Path, capsys: object) -> None:
    shape = Shape(
        "POST", "/v1/chat/completions", (("content-type", "application/json"),), b'{"a": "\xc3\xa9"}',
        "text/event-stream", (b"data: {}\n\n", b"data: \xff\n\n"), True,
    )  # fmt: skip
    path = tmp_path / "shape.json"
    icount.write_shape(shape, path)
    assert icount.read_shape(path) == shape  # bytes that are not UTF-8 come back as they were
    assert icount.main(["--child", ALL_ON, "5", str(path)]) == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "us CPU per exchange" in out
