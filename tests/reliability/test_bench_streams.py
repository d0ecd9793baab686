"""The streams case's instruments: the SSE client's parsing, lateness and RSS arithmetic, /proc and machine parsing.

No timing is asserted: the 1,000-stream case itself is `python bench/streams.py` (docs/benchmark.md).
"""

from __future__ import annotations

import mmap
import os
import socket
import socketserver
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.machine import cpu_model, describe, git_state, mem_total_kb
from bench.procstat import ProcWatch, cpu_seconds, cpu_ticks, open_fds, peak_rss_kb, rss_mb, status_kb
from bench.sseclient import StreamOutcome, collect, lateness_summary, percentile, summarise

LINUX = Path("/proc/self/status").exists()


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_lateness_summary_in_ms_counts_events_past_the_bound() -> None:
    lateness_s = [0.001] * 97 + [0.250, 0.2501, 1.5]
    s = lateness_summary(lateness_s, late_ms=250.0)
    assert s["p50_ms"] == 1.0
    assert s["p99_ms"] == 250.1
    assert s["max_ms"] == 1500.0
    assert s["late_events"] == 2  # exactly 250 ms is on time
    assert lateness_summary([], 250.0)["max_ms"] is None


def test_summarise_counts_delivery_completion_and_errors() -> None:
    def outcome(seen: range, status: int | None = 200, ended: bool = True, error: str | None = None) -> StreamOutcome:
        return StreamOutcome(3, set(seen), [0.01] * len(seen), status, ended, error, started=100.0, first_event=100.5)

    outcomes = [
        outcome(range(3)),
        outcome(range(2), ended=False, error="closed before the end"),
        outcome(range(3), status=503),  # every event yet not a success
        outcome(range(0), status=None, ended=False, error="connect: ConnectionRefusedError"),
    ]
    s = summarise(outcomes, events=3)
    assert (s["streams"], s["streams_complete"], s["events_expected"], s["events_delivered"]) == (4, 1, 12, 8)
    assert s["errors"] == {"closed before the end": 1, "connect: ConnectionRefusedError": 1}
    assert s["statuses"] == [200, 503]
    assert s["lateness"]["max_ms"] == 10.0
    assert s["first_event"]["p50_ms"] == 500.0


def _event(i: int) -> bytes:
    return b'id: %d\nevent: tick\ndata: {"i":%d,"t":%.6f}\n\n' % (i, i, time.time())


@pytest.fixture
def raw_server() -> Iterator[Callable[[Callable[[socket.socket], None]], int]]:
    """Starts a one-handler TCP server on loopback; returns its port."""
    servers: list[socketserver.ThreadingTCPServer] = []

    def start(answer: Callable[[socket.socket], None]) -> int:
        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                head = b""
                while b"\r\n\r\n" not in head:
                    head += self.request.recv(4096)
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                answer(self.request)

        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return int(server.server_address[1])

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_events_split_across_chunks_and_reads_are_all_counted(raw_server: Callable[..., int]) -> None:
    # A proxy may re-chunk a stream anywhere: chunk framing lands inside events, reads split both.
    def answer(sock: socket.socket) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        body = b"".join(_event(i) for i in range(5))
        framed = b"".join(b"%x\r\n%s\r\n" % (len(body[i : i + 7]), body[i : i + 7]) for i in range(0, len(body), 7))
        for i in range(0, len(framed), 5):
            sock.sendall(framed[i : i + 5])
        sock.sendall(b"0\r\n\r\n")

    outcomes, cpu = collect(raw_server(answer), streams=3, events=5, interval_ms=0, ramp_s=0.0)
    assert [o.complete for o in outcomes] == [True] * 3
    assert all(o.seen == set(range(5)) and len(o.lateness_s) == 5 for o in outcomes)
    assert len(cpu) == 1


def test_a_stream_cut_short_is_delivered_in_part_and_not_complete(raw_server: Callable[..., int]) -> None:
    def answer(sock: socket.socket) -> None:
        body = _event(0) + _event(1)
        sock.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (len(body), body))
        sock.close()

    [outcome], _ = collect(raw_server(answer), streams=1, events=3, interval_ms=0, ramp_s=0.0)
    assert outcome.seen == {0, 1}
    assert not outcome.complete
    assert outcome.error == "closed before the end"


def test_stamped_streams_through_brownout_arrive_whole(upstream: Any, brownout_proxy: Callable[..., Any]) -> None:
    proxy = brownout_proxy(mode="reverse", upstream=upstream)
    outcomes, _ = collect(proxy.port, streams=20, events=4, interval_ms=20, processes=2, ramp_s=0.2)
    s = summarise(outcomes, events=4)
    assert (s["streams_complete"], s["events_delivered"], s["errors"]) == (20, 80, {})
    assert len([x for o in outcomes for x in o.lateness_s]) == 80


STATUS = "Name:\tpython\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t4\n"


def test_status_fields_in_kb() -> None:
    assert status_kb(STATUS, "VmRSS") == 102400
    assert status_kb(STATUS, "VmHWM") == 204800
    assert status_kb(STATUS, "VmSwap") is None


def test_cpu_ticks_survive_a_command_name_with_spaces_and_parentheses() -> None:
    rest = "S 1 2 3 4 5 6 7 8 9 10 1500 250 0 0 20 0 1 0"  # utime 1500, stime 250 (fields 14, 15)
    assert cpu_ticks(f"4242 (odd) name) {rest}") == 1750
    assert cpu_ticks(f"4242 (python) {rest}") == 1750


def test_peak_rss_trusts_the_high_water_mark_only_after_a_reset() -> None:
    assert peak_rss_kb([100, 300, 200], 900, hwm_reset=True) == 900  # a spike between samples
    assert peak_rss_kb([100, 300, 200], 900, hwm_reset=False) == 300  # 900 may predate the window
    assert peak_rss_kb([], None, hwm_reset=True) is None


@pytest.mark.skipif(not LINUX, reason="reads /proc")
def test_procwatch_catches_a_spike_between_samples_and_counts_cpu() -> None:
    with ProcWatch(os.getpid(), interval_s=60) as watch:  # no sample lands inside the window
        # Fresh pages from the kernel: a bytes object could reuse memory this (long-lived, test-worker)
        # process already has resident from earlier tests, and then RSS would not grow at all.
        size = 96 << 20
        with mmap.mmap(-1, size) as pages:
            for offset in range(0, size, mmap.PAGESIZE):
                pages[offset] = 1
        t0 = time.process_time()
        while time.process_time() - t0 < 0.3:
            pass
    usage = watch.usage
    if not usage.hwm_reset:
        pytest.skip("this kernel or user cannot reset VmHWM (clear_refs)")
    assert usage.rss_start_mb is not None and usage.peak_rss_mb is not None
    assert usage.peak_rss_mb >= usage.rss_start_mb + 80
    assert usage.cpu_s is not None and usage.cpu_s >= 0.15


def test_one_look_at_a_process_sees_its_memory_cpu_and_descriptors(tmp_path: Path) -> None:
    pid = os.getpid()
    before = open_fds(pid)
    with open(tmp_path / "held", "w"):
        assert before is not None and open_fds(pid) == before + 1
    assert (rss_mb(pid) or 0) > 5 and (cpu_seconds(pid) or 0) > 0
    assert rss_mb(2**22 + 1) is None and cpu_seconds(2**22 + 1) is None and open_fds(2**22 + 1) is None


def test_procwatch_without_a_process_knows_nothing() -> None:
    with ProcWatch(None) as watch:
        pass
    assert watch.usage.peak_rss_mb is None and watch.usage.cpu_s is None


def test_cpu_model_and_memory_from_proc_text() -> None:
    x86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n"
    arm = "processor\t: 0\nBogoMIPS\t: 108.00\n\nHardware\t: BCM2835\n"
    assert cpu_model(x86) == "AMD EPYC 7B13"
    assert cpu_model(arm) == "BCM2835"
    assert cpu_model("") is None
    assert mem_total_kb("MemTotal:       24684140 kB\nMemFree:  1 kB\n") == 24684140
    assert mem_total_kb("MemFree:  1 kB\n") is None


def test_git_state_sees_the_commit_and_a_dirty_tree(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    (tmp_path / "f").write_text("a")
    git("add", "f")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = git("rev-parse", "HEAD").strip()
    assert git_state(tmp_path) == (head, False)
    (tmp_path / "untracked").write_text("b")
    assert git_state(tmp_path) == (head, False)  # untracked files do not change what was measured
    (tmp_path / "f").write_text("changed")
    assert git_state(tmp_path) == (head, True)
    assert git_state(tmp_path / "nowhere") == (None, None)


def test_describe_names_the_machine_and_software() -> None:
    d = describe("wrk 4.1.0")
    assert d["load_tool"] == "wrk 4.1.0"
    assert d["cores"] == os.cpu_count()
    assert d["python"].count(".") == 2
    assert d["mitmproxy"] and d["mitmproxy"][0].isdigit()
    assert d["brownout_commit"] is None or len(d["brownout_commit"]) == 40
    assert d["date"][:2] == "20"
    if LINUX:
        assert d["cpu_model"] and d["memory_gib"] and d["memory_gib"] > 0
