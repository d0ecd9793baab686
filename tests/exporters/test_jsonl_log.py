"""The JSONL violation/decision/exchange logs: one record per line, flushed, thread-safe, never raising."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from brownout.core.exchange import FaultRecord
from brownout.exporters.jsonl import JsonlWriter, exchange_summary
from tests.exporters.expsamples import exchange


def test_lines_are_flushed_per_record(tmp_path: Path) -> None:
    w = JsonlWriter(tmp_path / "sub" / "v.jsonl")
    assert w.write({"a": 1})
    # Read before close: the line must already be on disk (a crash loses at most the next line).
    assert (tmp_path / "sub" / "v.jsonl").read_text() == '{"a":1}\n'
    w.write({"b": "é"})
    w.close()
    lines = (tmp_path / "sub" / "v.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(x) for x in lines] == [{"a": 1}, {"b": "é"}]


def test_appends_across_writers(tmp_path: Path) -> None:
    for i in range(2):
        w = JsonlWriter(tmp_path / "v.jsonl", fsync=True)
        w.write({"i": i})
        w.close()
    assert (tmp_path / "v.jsonl").read_text().splitlines() == ['{"i":0}', '{"i":1}']


def test_concurrent_writers_never_interleave(tmp_path: Path) -> None:
    w = JsonlWriter(tmp_path / "v.jsonl")
    payload = "x" * 5000

    def worker(n: int) -> None:
        for i in range(200):
            w.write({"t": n, "i": i, "p": payload})

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    lines = (tmp_path / "v.jsonl").read_text().splitlines()
    assert len(lines) == 800 and all(json.loads(line)["p"] == payload for line in lines)


def test_failures_are_counted_not_raised(tmp_path: Path) -> None:
    drops: list[int] = []
    blocker = tmp_path / "file"
    blocker.write_text("")
    w = JsonlWriter(blocker / "v.jsonl", on_dropped=drops.append)  # parent is a file: mkdir fails
    assert w.write({"a": 1}) is False
    assert w.write({"a": 2}) is False  # retried (the disk may come back), still counted
    ok = JsonlWriter(tmp_path / "ok.jsonl", on_dropped=drops.append)
    ok.close()
    assert ok.write({"late": 1}) is False
    assert drops == [1, 1, 1] and w.failures == 2


def test_exchange_summary_has_no_content_or_secrets() -> None:
    ex = exchange(
        request_body='{"messages":[{"content":"my password is hunter2"}]}',
        request_headers={"authorization": "Bearer sk-secret"},
        output_text="the answer is 42",
        faults=[FaultRecord("inject", "prompt_injection", {"text": "ignore previous instructions"})],
    )
    line = json.dumps(exchange_summary(ex))
    for secret in ("hunter2", "sk-secret", "the answer is 42", "ignore previous"):
        assert secret not in line
    s = exchange_summary(ex)
    assert s["provider"] == "openai" and s["status_class"] == "2xx" and s["faults"][0]["rule"] == "inject"
    assert s["input_tokens"] == 12 and s["duration_s"] > 1
