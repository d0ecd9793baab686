"""Opening handshakes that never get their response: the openai SDK's sync realtime client through brownout with
TLS 1.3 session tickets held back to the first response (proxy/tlstickets.py) and sent at once, side by side.

    .venv/bin/python bench/tlstickets.py                 # 3 interleaved rounds of 200 connections per path
    .venv/bin/python bench/tlstickets.py --rounds 1 --connections 50    # a smoke check

The race is the client's (its receiving thread handles the tickets while its main thread writes the upgrade
request, on one OpenSSL object), so it shows on a loaded machine: run it beside other work, or with
`--hogs 2` (busy-looping processes for the duration). Each connection waits at most `--timeout` seconds for the
101; one that does not get it counts as a hang. Results go to bench/results/tlstickets.json.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

import openai

from bench.machine import run_meta
from bench.report import save_results
from brownout.proxy.demo.upstream import MockUpstream
from brownout.proxy.embed import ProxyHandle, running_proxy
from brownout.proxy.tlstickets import TicketHold

RESULTS = Path(__file__).resolve().parent / "results" / "tlstickets.json"
PATHS = ("held", "at-once")


def _hog() -> None:
    while True:
        pass


def _connect_all(proxy: ProxyHandle, upstream: Any, n: int, timeout_s: float) -> tuple[int, int]:
    """`n` sync realtime connections through `proxy`: (hangs, other errors)."""
    os.environ.update(proxy.env)
    client = openai.OpenAI(base_url=f"{upstream.url}/v1", api_key="sk-bench", max_retries=0)
    hangs = errors = 0
    for _ in range(n):
        try:
            with client.realtime.connect(
                model="gpt-realtime", websocket_connection_options={"open_timeout": timeout_s}
            ):
                pass
        except TimeoutError:
            hangs += 1
        except Exception:  # noqa: BLE001 - counted, the run goes on
            errors += 1
    return hangs, errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=200, help="per path and round")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for the 101")
    parser.add_argument("--hogs", type=int, default=0, help="busy-looping processes beside the run")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    hogs = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(args.hogs)]
    for hog in hogs:
        hog.start()
    totals = {path: {"connections": 0, "hangs": 0, "errors": 0, "rounds": []} for path in PATHS}
    started = time.monotonic()
    try:
        with MockUpstream.run_in_thread(tls=True) as upstream:
            options = {
                "brownout_metrics_listen": "127.0.0.1:0",
                "brownout_control_listen": "127.0.0.1:0",
                "ssl_verify_upstream_trusted_ca": upstream.ca_pem_path,
            }
            confdir = Path(tempfile.mkdtemp(prefix="brownout-tlstickets-"))
            with (
                running_proxy(confdir=confdir / "held", extra_options=options) as held,
                running_proxy(confdir=confdir / "at-once", extra_options=options) as at_once,
            ):
                hold = next(a for a in at_once.addon.addons if isinstance(a, TicketHold))
                hold.tls_start_client = lambda data: None  # type: ignore[method-assign]  # the tickets go at once
                for _ in range(args.rounds):
                    for path, proxy in zip(PATHS, (held, at_once), strict=True):
                        hangs, errors = _connect_all(proxy, upstream, args.connections, args.timeout)
                        totals[path]["rounds"].append(hangs)
                        totals[path]["connections"] += args.connections
                        totals[path]["hangs"] += hangs
                        totals[path]["errors"] += errors
    finally:
        for hog in hogs:
            hog.terminate()
    for path in PATHS:
        t = totals[path]
        print(
            f"{path:8} {t['hangs']:3d} hangs in {t['connections']} connections (per round: {t['rounds']}), {t['errors']} other errors"
        )
    data = {
        "meta": run_meta(
            "bench/tlstickets.py", argv, "openai sync realtime client", seconds=round(time.monotonic() - started)
        ),
        "paths": totals,
        "targets": {
            "held: hangs": {
                "kind": "target",
                "met": totals["held"]["hangs"] == 0,
                "value": totals["held"]["hangs"],
                "target": 0,
            }
        },
    }
    return save_results(data, args.output, check=False)


if __name__ == "__main__":
    raise SystemExit(main())
