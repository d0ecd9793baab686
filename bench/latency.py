"""How exactly a latency fault delays: 500 ms asked for, measured side by side with no fault.

    .venv/bin/python bench/latency.py            # 40 interleaved pairs through one brownout
    .venv/bin/python bench/latency.py --check    # exit 1 when the target (2% + 3 ms) is missed

One brownout (reverse mode, its own process) in front of the mock upstream; a rule delays
/tools/weather by 500 ms and /ping passes untouched. Requests alternate on one kept-alive
connection, so machine drift hits both alike; scheduling noise only ever adds time, so the
added delay is estimated from the fastest of each kind and from the medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from bench.procs import start_brownout, start_upstream

DELAY_MS = 500.0
CONFIG = f"""\
version: 1
rules:
  - name: slow-tool
    match: {{path: /tools/weather}}
    fault: {{type: latency, delay_ms: {DELAY_MS}}}
"""


def measure(pairs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="brownout-latency-") as tmp:
        work = Path(tmp)
        (work / "latency.yaml").write_text(CONFIG)
        upstream = start_upstream(work)
        proxy = start_brownout(upstream.port, work, str(work / "latency.yaml"))
        if isinstance(proxy, str):
            upstream.stop()
            raise SystemExit(proxy)
        base: list[float] = []
        slow: list[float] = []
        try:
            with httpx.Client(base_url=proxy.url, trust_env=False, timeout=10) as client:
                client.get("/ping")
                for _ in range(pairs):
                    for path, into in (("/ping", base), ("/tools/weather?city=Oslo", slow)):
                        start = time.perf_counter()
                        client.get(path).raise_for_status()
                        into.append(time.perf_counter() - start)
        finally:
            proxy.stop()
            upstream.stop()
    return {
        "added_min_ms": (min(slow) - min(base)) * 1000,
        "added_median_ms": (statistics.median(slow) - statistics.median(base)) * 1000,
        "base_median_ms": statistics.median(base) * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--check", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args(argv)
    result = measure(args.pairs)
    allowed = DELAY_MS * 0.02 + 3
    error = result["added_min_ms"] - DELAY_MS
    ok = abs(error) <= allowed
    print(
        f"latency fault of {DELAY_MS:.0f} ms: added {result['added_min_ms']:.1f} ms (fastest), "
        f"{result['added_median_ms']:.1f} ms (median); pass-through median {result['base_median_ms']:.2f} ms"
    )
    print(f"error {error:+.1f} ms, target within ±{allowed:.0f} ms (2% + 3 ms): {'met' if ok else 'MISSED'}")
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
