"""The JSONL violation/decision/exchange logs: one record per line, written off the caller's thread,
surviving rotation and deletion, never raising, every lost line counted."""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from brownout.core.exchange import FaultRecord, Usage
from brownout.core.guard import Guard
from brownout.exporters.jsonl import JsonlWriter, exchange_summary
from tests.exporters.expsamples import exchange


def lines(path: Path) -> list[Any]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def wait_until(cond: Any, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.005)
    return bool(cond())


def test_a_line_is_on_disk_once_flushed(tmp_path: Path) -> None:
    w = JsonlWriter(tmp_path / "sub" / "v.jsonl")
    assert w.write({"a": 1})
    assert w.flush()
    # Read before close: the line must already be on disk (a crash loses at most the queue).
    assert (tmp_path / "sub" / "v.jsonl").read_text() == '{"a":1}\n'
    w.write({"b": "é"})
    w.close()
    assert lines(tmp_path / "sub" / "v.jsonl") == [{"a": 1}, {"b": "é"}]


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
    got = lines(tmp_path / "v.jsonl")
    assert len(got) == 800 and all(line["p"] == payload for line in got)


def test_close_writes_everything_queued(tmp_path: Path) -> None:
    w = JsonlWriter(tmp_path / "v.jsonl")
    for i in range(3000):
        assert w.write({"i": i})
    w.close()  # at once: nothing handed over may be lost
    assert [x["i"] for x in lines(tmp_path / "v.jsonl")] == list(range(3000))
    assert w.dropped == 0 and w.written == 3000


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_stalled_file_never_blocks_the_caller_and_a_full_queue_is_counted(tmp_path: Path) -> None:
    # Opening a named pipe for writing blocks until a reader comes: a disk that does not answer.
    fifo = tmp_path / "stalled.jsonl"
    os.mkfifo(fifo)
    drops: list[int] = []
    w = JsonlWriter(fifo, on_dropped=drops.append, max_queue_size=5)
    caller = threading.Thread(target=lambda: [w.write({"i": i}) for i in range(1)], daemon=True)
    caller.start()
    caller.join(2)
    assert not caller.is_alive(), "write() blocked on the file"
    assert wait_until(lambda: w.queued == 0)  # the writer thread holds it, stuck in open()
    accepted = [w.write({"i": i}) for i in range(1, 9)]
    assert accepted == [True] * 5 + [False] * 3 and drops == [1, 1, 1]
    got: list[str] = []

    def read() -> None:
        with open(fifo, encoding="utf-8") as f:
            got.extend(f.read().splitlines())

    reader = threading.Thread(target=read)
    reader.start()
    w.close()
    reader.join(5)
    assert [json.loads(x)["i"] for x in got] == list(range(6))
    assert w.dropped == 3


def test_a_moved_log_is_reopened_at_its_path(tmp_path: Path) -> None:
    path = tmp_path / "v.jsonl"
    w = JsonlWriter(path)
    w.write({"n": 1})
    w.flush()
    path.rename(tmp_path / "v.jsonl.1")  # what logrotate does before it signals nobody
    w.write({"n": 2})
    w.close()
    assert lines(tmp_path / "v.jsonl.1") == [{"n": 1}]
    assert lines(path) == [{"n": 2}]


def test_a_deleted_log_and_directory_are_recreated(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "v.jsonl"
    w = JsonlWriter(path)
    w.write({"n": 1})
    w.flush()
    path.unlink()
    w.write({"n": 2})
    w.flush()
    assert lines(path) == [{"n": 2}]
    shutil.rmtree(tmp_path / "logs")
    w.write({"n": 3})
    w.close()
    assert lines(path) == [{"n": 3}]
    assert w.dropped == 0


def test_an_unwritable_path_counts_every_line_and_logs_once(tmp_path: Path, caplog: Any) -> None:
    guard, drops = Guard(strict=True), []  # strict: an outside failure is still no bug
    (tmp_path / "logs").write_text("")  # the directory's place is taken by a file: mkdir fails
    w = JsonlWriter(tmp_path / "logs" / "v.jsonl", guard=guard, on_dropped=drops.append)
    with caplog.at_level(logging.DEBUG):
        assert w.write({"a": 1})  # queued: the caller never waits for the disk
        w.flush()
        w.write({"a": 2})
        w.flush()
        (tmp_path / "logs").unlink()  # the disk comes back: the next line is written
        w.write({"a": 3})
        w.close()
        assert w.write({"late": 1}) is False
    assert sum(drops) == 3 and w.dropped == 3 and w.written == 1
    assert lines(tmp_path / "logs" / "v.jsonl") == [{"a": 3}]
    assert guard.snapshot() == {}  # lost to the outside world, not an internal error
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]  # once per file, however often it fails
    assert "v.jsonl" in errors[0].getMessage() and "lost data" in errors[0].getMessage()


def test_a_record_that_is_no_json_is_a_counted_bug_and_the_rest_is_written(tmp_path: Path) -> None:
    guard, drops = Guard(), []
    w = JsonlWriter(tmp_path / "v.jsonl", guard=guard, on_dropped=drops.append)
    loop: dict[str, Any] = {}
    loop["self"] = loop
    w.write({"n": 1})
    w.write(loop)
    w.write({"n": 2})
    w.close()
    assert lines(tmp_path / "v.jsonl") == [{"n": 1}, {"n": 2}]
    assert drops == [1] and guard.snapshot() == {"exporter:jsonl": 1}


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
    assert s["cache_read_tokens"] is None and s["cache_write_tokens"] is None  # the provider reported none


def test_exchange_summary_has_the_prompt_cache_tokens() -> None:
    s = exchange_summary(exchange(usage=Usage(100, 5, cache_read_tokens=80, cache_write_tokens=15)))
    assert (s["input_tokens"], s["cache_read_tokens"], s["cache_write_tokens"]) == (100, 80, 15)
