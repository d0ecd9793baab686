"""Slow clients and the connection cap: what a slowloris attack and a connection burst cost, side by side.

    .venv/bin/python bench/slowclients.py            # 200 slow clients for 12 s; a burst of 200 over a cap of 50
    .venv/bin/python bench/slowclients.py --quick    # smaller and shorter: a smoke check

Paths: `direct` (the mock upstream), plain `mitmdump`, and `brownout`, whose bounds are set small
(`--header-timeout`, `--cap`) so a run takes seconds; each server runs in its own process.

Slowloris: N connections each send a request line and then one header byte per second, never
finishing their headers. Per path: when the server closed them (median and last, or how many were
still open at the end), the server's open file descriptors at the peak, and the latency of a
well-behaved client doing back-to-back `GET /ping` on its own keep-alive connection, without and
during the attack.

Burst (mitmdump and brownout): `cap` connections busy (the well-behaved client plus streams of
`GET /sse`), then B new clients at once each send `GET /ping`: how many were served, answered 503 or
failed, how long their answer took, and the worst latency of the client already inside the cap.
Results go to bench/results/slowclients.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from bench.procs import ROOT, Proc, start_brownout, start_mitmdump, start_upstream
from bench.procstat import open_fds
from bench.rawhttp import RawConnection

__all__ = ["main"]

HOST = "127.0.0.1"
SLOW_HEAD = b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def _ms(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50_ms": None, "max_ms": None}
    return {"p50_ms": round(statistics.median(values) * 1000, 2), "max_ms": round(max(values) * 1000, 2)}


async def _probe(port: int, stop: asyncio.Event) -> list[float]:
    """Back-to-back GET /ping on one keep-alive connection until `stop`; the latencies."""
    conn, lats = RawConnection(HOST, port, timeout_s=30), []
    try:
        while not stop.is_set():
            t0 = time.perf_counter()
            await conn.get("/ping")
            lats.append(time.perf_counter() - t0)
    finally:
        conn.close()
    return lats


async def _slow(port: int, duration_s: float) -> float | None:
    """A slowloris client; seconds until the server closed (or answered) it, None when it never did."""
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection(HOST, port)
    t0 = loop.time()
    writer.write(SLOW_HEAD)
    reading = asyncio.ensure_future(reader.read(1))
    try:
        while loop.time() - t0 < duration_s:
            done, _ = await asyncio.wait({reading}, timeout=1.0)
            if done:
                return loop.time() - t0
            try:
                writer.write(b"a")
                await writer.drain()
            except ConnectionError:
                return loop.time() - t0
        return None
    finally:
        reading.cancel()
        writer.close()


async def _sample_fds(pid: int, stop: asyncio.Event) -> int:
    peak = 0
    while not stop.is_set():
        peak = max(peak, open_fds(pid) or 0)
        await asyncio.sleep(0.2)
    return peak


async def slowloris(proc: Proc, clients: int, duration_s: float, baseline_s: float) -> dict[str, Any]:
    stop = asyncio.Event()
    probe = asyncio.create_task(_probe(proc.port, stop))
    await asyncio.sleep(baseline_s)
    stop.set()
    quiet = await probe
    fds_before = open_fds(proc.popen.pid)
    stop = asyncio.Event()
    probe = asyncio.create_task(_probe(proc.port, stop))
    fds = asyncio.create_task(_sample_fds(proc.popen.pid, stop))
    cut = await asyncio.gather(*(_slow(proc.port, duration_s) for _ in range(clients)))
    stop.set()
    attacked, peak = await probe, await fds
    closed = [c for c in cut if c is not None]
    return {
        "slow_clients": clients,
        "closed": len(closed),
        "still_open_after_s": duration_s if len(closed) < clients else None,
        "closed_after_s": {
            "median": round(statistics.median(closed), 2) if closed else None,
            "last": round(max(closed), 2) if closed else None,
        },
        "fds_before": fds_before,
        "fds_peak": peak,
        "probe_quiet": _ms(quiet),
        "probe_attacked": _ms(attacked),
    }


async def _held(port: int) -> bool:
    conn = RawConnection(HOST, port, timeout_s=30)
    try:
        return (await conn.get("/sse?events=30&delay_ms=100")).status == 200
    except (TimeoutError, OSError, ValueError, asyncio.IncompleteReadError):
        return False
    finally:
        conn.close()


async def _knock(port: int) -> tuple[str, float]:
    conn, t0 = RawConnection(HOST, port, timeout_s=30), time.perf_counter()
    try:
        status = str((await conn.get("/ping")).status)
    except (TimeoutError, OSError, ValueError, asyncio.IncompleteReadError) as e:
        status = type(e).__name__
    finally:
        conn.close()
    return status, time.perf_counter() - t0


async def burst(proc: Proc, cap: int, clients: int) -> dict[str, Any]:
    stop = asyncio.Event()
    probe = asyncio.create_task(_probe(proc.port, stop))  # inside the cap, opened first
    await asyncio.sleep(0.3)
    held = [asyncio.create_task(_held(proc.port)) for _ in range(cap - 1)]
    await asyncio.sleep(0.5)  # the streams are flowing: the cap is full
    answers = await asyncio.gather(*(_knock(proc.port) for _ in range(clients)))
    stop.set()
    lats, streams = await probe, await asyncio.gather(*held)
    statuses: dict[str, int] = {}
    for status, _ in answers:
        statuses[status] = statuses.get(status, 0) + 1
    return {
        "cap": cap,
        "burst": clients,
        "answers": statuses,
        "answer_time": _ms([t for _, t in answers]),
        "held_streams_complete": sum(streams),
        "probe_during_burst": _ms(lats),
    }


def _config(workdir: Path, header_timeout_s: float, cap: int | None) -> str:
    path = workdir / f"brownout-{cap or 'nocap'}.yaml"
    lines = [f"request_header_timeout_s: {header_timeout_s}"] + ([f"max_client_connections: {cap}"] if cap else [])
    path.write_text("version: 1\nproxy: {" + ", ".join(lines) + "}\ncontrol: {enabled: false}\n")
    return str(path)


def _brownout(upstream: Proc, workdir: Path, config: str) -> Proc:
    proc = start_brownout(upstream.port, workdir / Path(config).stem, config)  # its own free side ports
    if isinstance(proc, str):
        raise RuntimeError(proc)
    return proc


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    upstream = start_upstream(workdir)
    procs: list[Proc] = [upstream]
    try:
        mitm = start_mitmdump(upstream.port, workdir, stream_all=True)  # streams SSE, as brownout does
        procs.append(mitm)
        plain = _brownout(upstream, workdir, _config(workdir, args.header_timeout, None))
        procs.append(plain)
        capped = _brownout(upstream, workdir, _config(workdir, args.header_timeout, args.cap))
        procs.append(capped)
        out: dict[str, Any] = {"slowloris": {}, "burst": {}}
        for name, proc in (("direct", upstream), ("mitmdump", mitm), ("brownout", plain)):
            print(f"slowloris: {name} ...", flush=True)
            out["slowloris"][name] = await slowloris(proc, args.slow, args.duration, args.baseline)
        for name, proc in (("mitmdump", mitm), ("brownout", capped)):
            print(f"burst: {name} ...", flush=True)
            out["burst"][name] = await burst(proc, args.cap, args.burst)
        return out
    finally:
        for proc in reversed(procs):
            proc.stop()


def _print(results: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"\nslowloris: {args.slow} clients, a header byte per second for {args.duration:g} s")
    print(f"(brownout: proxy.request_header_timeout_s = {args.header_timeout:g})")
    print(
        f"{'path':10} {'closed':>7} {'median s':>9} {'last s':>7} {'fds':>11} {'probe p50/max ms quiet':>24} {'attacked':>16}"
    )
    for name, r in results["slowloris"].items():
        fds = f"{r['fds_before']}->{r['fds_peak']}"
        quiet = f"{r['probe_quiet']['p50_ms']}/{r['probe_quiet']['max_ms']}"
        hit = f"{r['probe_attacked']['p50_ms']}/{r['probe_attacked']['max_ms']}"
        cut = r["closed_after_s"]
        print(f"{name:10} {r['closed']:>7} {cut['median']!s:>9} {cut['last']!s:>7} {fds:>11} {quiet:>24} {hit:>16}")
    print(
        f"\nburst: {args.burst} new clients while {args.cap} connections are busy (brownout: max_client_connections = {args.cap})"
    )
    print(f"{'path':10} {'answers':>24} {'answer p50/max ms':>18} {'streams ok':>11} {'probe p50/max ms':>17}")
    for name, r in results["burst"].items():
        answers = ", ".join(f"{k}: {v}" for k, v in sorted(r["answers"].items()))
        at = f"{r['answer_time']['p50_ms']}/{r['answer_time']['max_ms']}"
        probe = f"{r['probe_during_burst']['p50_ms']}/{r['probe_during_burst']['max_ms']}"
        print(f"{name:10} {answers:>24} {at:>18} {r['held_streams_complete']:>11} {probe:>17}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slow", type=int, default=200, help="slowloris clients")
    parser.add_argument("--duration", type=float, default=12.0, help="seconds the slow clients keep trying")
    parser.add_argument("--baseline", type=float, default=3.0, help="seconds of the probe without an attack")
    parser.add_argument("--header-timeout", type=float, default=2.0, help="brownout's request_header_timeout_s")
    parser.add_argument("--cap", type=int, default=50, help="brownout's max_client_connections in the burst")
    parser.add_argument("--burst", type=int, default=200, help="new clients at once in the burst")
    parser.add_argument("--quick", action="store_true", help="50 slow clients for 5 s, a burst of 50 over 10")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "slowclients.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.slow, args.duration, args.baseline, args.cap, args.burst = 50, 5.0, 1.0, 10, 50
    with tempfile.TemporaryDirectory(prefix="brownout-slowclients-") as tmp:
        results = asyncio.run(run(args, Path(tmp)))
    _print(results, args)
    meta = {
        "command": " ".join(["bench/slowclients.py", *(argv if argv is not None else sys.argv[1:])]),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"meta": meta, **results}, indent=2) + "\n")
    print(f"\nwritten to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
