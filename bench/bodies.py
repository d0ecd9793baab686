"""brownout body benchmark: big, compressed and hostile bodies, beside a direct run.

    .venv/bin/python bench/bodies.py            # every case, once through brownout and once direct
    .venv/bin/python bench/bodies.py --strict   # exit 1 when a target is missed
    .venv/bin/python bench/bodies.py --only json  # the cases whose name contains "json"

Cases: a 12 MB OpenAI stream (80,000 events) plain, gzip-compressed, and gzip-compressed under
`truncate` (which edits it: decoded, cut, re-compressed); a 16 MB event stream with no event
boundary; a 1 MB gzip response inflating to 1 GB, with no fault and under `malformed_json`; the
same bomb as a client's request body; and a 24 MB JSON answer that `malformed_json` edits whole. For each case it prints the time until the client has
read the whole body, brownout's RSS growth during the case, and the worst latency another client
on the same path saw meanwhile (it sends small requests back to back); both keep being measured for
1.5 s after the body arrived, while brownout may still be parsing its copy. Targets: streams under 4 s
and 150 MB of RSS growth; bombs and the edited JSON under 300 MB, the other client answered within 1 s.

The upstream (bench/bodyserver.py) and brownout each run in their own process; the clients run
here. Results go to bench/results/bodies.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

import httpx

from bench.procs import ROOT, Proc, start_brownout, start_module
from bench.procstat import rss_mb

__all__ = ["CASES", "main"]

RESULTS = ROOT / "bench" / "results" / "bodies.json"
MB = 1 << 20
SETTLE_S = 1.5
CONFIG = """\
version: 1
seed: 1
rules:
  - {name: cut, match: {header: {x-bench-case: cut}}, fault: {type: truncate, after_events: 60000}}
  - {name: bad-json, match: {header: {x-bench-case: fault}}, fault: {type: malformed_json}}
"""


@dataclass(frozen=True)
class Case:
    """One request, and the targets it must meet through brownout."""

    name: str
    body: str = ""  # ?body= kind for the upstream
    header: str = ""  # x-bench-case: which brownout rule applies
    request_bomb: bool = False
    max_s: float | None = None
    max_rss_mb: float = 150.0
    max_other_s: float | None = None


CASES = [
    Case("12 MB stream", "plain", max_s=4.0),
    Case("12 MB stream, gzip", "gzip", max_s=4.0),
    Case("12 MB stream, gzip + truncate", "gzip", "cut", max_s=4.0),
    Case("16 MB stream, no event boundary", "noboundary", max_s=4.0),
    Case("1 GB response bomb", "bomb", max_rss_mb=300.0, max_other_s=1.0),
    Case("1 GB response bomb + malformed_json", "bomb", "fault", max_rss_mb=300.0, max_other_s=1.0),
    Case("1 GB request bomb", request_bomb=True, max_rss_mb=300.0, max_other_s=1.0),
    Case("24 MB JSON + malformed_json", "json", "fault", max_rss_mb=300.0, max_other_s=1.0),
]


@dataclass
class Result:
    """What one case measured on one path."""

    path: str
    seconds: float
    body_bytes: int
    rss_growth_mb: float | None
    other_worst_s: float
    other_answered: int
    error: str | None = None


@dataclass
class Row:
    """One case: both paths and the targets brownout missed."""

    case: str
    brownout: Result
    direct: Result
    missed: list[str] = field(default_factory=list)


class Probe:
    """Samples a process's RSS and runs another client against `ping_url` while a case runs."""

    def __init__(self, ping_url: str, pid: int | None) -> None:
        self.ping_url, self.pid = ping_url, pid
        self.start = (rss_mb(pid) or 0.0) if pid else 0.0
        self.peak = self.start
        self.worst_s = 0.0
        self.answered = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._other, daemon=True)]
        if pid:
            self._threads.append(threading.Thread(target=self._rss, daemon=True))

    def _rss(self) -> None:
        assert self.pid
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_mb(self.pid) or 0.0)

    def _other(self) -> None:
        with httpx.Client(trust_env=False, timeout=60) as client:
            client.get(self.ping_url)
            while not self._stop.is_set():
                t0 = time.monotonic()
                try:
                    client.get(self.ping_url)
                    self.answered += 1
                except httpx.HTTPError:
                    pass
                self.worst_s = max(self.worst_s, time.monotonic() - t0)
                self._stop.wait(0.01)

    def __enter__(self) -> Probe:
        for t in self._threads:
            t.start()
        time.sleep(0.1)  # the other client is connected and warm before the case starts
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()


def run_case(case: Case, base: str, pid: int | None, bomb: bytes, path: str) -> Result:
    headers = {"x-bench-case": case.header} if case.header else {}
    if case.request_bomb:
        headers.update({"content-type": "application/json", "content-encoding": "gzip"})
        request: dict[str, Any] = {"content": bomb}
    else:
        request = {"json": {"model": "gpt-4o-mini", "messages": [], "stream": case.body not in ("bomb", "json")}}
    url = f"{base}/v1/chat/completions" + (f"?body={case.body}" if case.body else "")
    got, error = 0, None
    with Probe(f"{base}/ping", pid) as probe, httpx.Client(trust_env=False, timeout=120) as client:
        t0 = time.monotonic()
        try:
            with client.stream("POST", url, headers=headers, **request) as r:
                for chunk in r.iter_raw():  # raw: the client never inflates a bomb itself
                    got += len(chunk)
        except httpx.HTTPError as e:
            error = f"{type(e).__name__}: {e}"
        took = time.monotonic() - t0
        time.sleep(SETTLE_S)  # brownout may still be parsing its copy: keep measuring meanwhile
    growth = round(probe.peak - probe.start, 1) if pid else None
    return Result(path, round(took, 3), got, growth, round(probe.worst_s, 3), probe.answered, error)


def judge(case: Case, res: Result) -> list[str]:
    missed = []
    if res.error:
        missed.append(f"failed: {res.error}")
    if case.max_s is not None and res.seconds > case.max_s:
        missed.append(f"took {res.seconds:.1f} s > {case.max_s:.0f} s")
    if res.rss_growth_mb is not None and res.rss_growth_mb > case.max_rss_mb:
        missed.append(f"RSS +{res.rss_growth_mb:.0f} MB > {case.max_rss_mb:.0f} MB")
    if case.max_other_s is not None and res.other_worst_s > case.max_other_s:
        missed.append(f"another client waited {res.other_worst_s:.2f} s > {case.max_other_s:.0f} s")
    return missed


def make_bomb(path: Path, size: int = 1 << 30) -> bytes:
    """One gzip member of `size` zero bytes (about 1 MB for 1 GB), built once and kept in `path`."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\0" * (4 * MB)
    data = b"".join(c.compress(block) for _ in range(size // len(block))) + c.flush()
    path.write_bytes(data)
    return data


def print_table(rows: list[Row]) -> None:
    print(
        f"\n{'case':38} {'brownout s':>10} {'direct s':>9} {'RSS +MB':>8} {'other worst s':>14} {'direct':>7}  verdict"
    )
    for row in rows:
        b, d = row.brownout, row.direct
        rss = f"{b.rss_growth_mb:.0f}" if b.rss_growth_mb is not None else "-"
        verdict = "met" if not row.missed else "MISSED: " + "; ".join(row.missed)
        print(
            f"{row.case:38} {b.seconds:10.2f} {d.seconds:9.2f} {rss:>8} {b.other_worst_s:14.3f} "
            f"{d.other_worst_s:7.3f}  {verdict}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--only", metavar="TEXT", default="", help="run only the cases whose name contains TEXT")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if args.only.lower() in c.name.lower()]
    workdir = Path(tempfile.mkdtemp(prefix="brownout-bodies-"))
    print("building the 1 GB gzip bomb ...", flush=True)
    bomb = make_bomb(workdir / "bomb.gz")
    config = workdir / "bodies.yaml"
    config.write_text(CONFIG)
    procs: list[Proc] = []
    rows: list[Row] = []
    try:
        upstream = start_module("bodyserver", "bench.bodyserver", ["--bomb", str(workdir / "bomb.gz")], workdir)
        procs.append(upstream)
        brownout = start_brownout(upstream.port, workdir / "brownout", str(config))
        if isinstance(brownout, str):
            raise RuntimeError(brownout)
        procs.append(brownout)
        for case in cases:
            print(f"  {case.name}", flush=True)
            via = run_case(case, brownout.url, brownout.popen.pid, bomb, "brownout")
            direct = run_case(case, upstream.url, None, bomb, "direct")
            rows.append(Row(case.name, via, direct, judge(case, via)))
    finally:
        for proc in reversed(procs):
            proc.stop()
    print_table(rows)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    machine = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}
    RESULTS.write_text(json.dumps({"machine": machine, "rows": [asdict(r) for r in rows]}, indent=2))
    print(f"\nresults: {RESULTS}")
    return 1 if args.strict and any(r.missed for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
