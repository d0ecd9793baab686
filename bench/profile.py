"""Where brownout's time goes under load: py-spy records brownout while wrk drives it.

    .venv/bin/pip install py-spy      # a profiler, not a dependency of brownout
    .venv/bin/python bench/profile.py --out docs/profiles/all-on-after.svg
    .venv/bin/python bench/profile.py --config none --out /tmp/no-rules.svg
    .venv/bin/python bench/profile.py --case anthropic-tools-stream --raw --out /tmp/anthropic.svg

Starts the mock upstream and brownout in reverse mode (bench/all-on.yaml by default), then
runs wrk at `--connections` for `--duration` seconds while `py-spy record` samples the brownout
process (all threads, idle frames left out) into an SVG flame graph. The load is `GET /ping`, or
with `--case` one of bench/llm.py's LLM-shaped cases. Add `--raw` to also write
py-spy's collapsed stacks next to the SVG, which `bench/profile.py --top FILE` summarises.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.llm import CASES, LlmCase
from bench.load import run_load
from bench.procs import ROOT, start_brownout, start_upstream


def _py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise SystemExit("py-spy is not installed: .venv/bin/pip install py-spy")
    return found


def _load(port: int, case: LlmCase | None, connections: int, duration_s: float) -> None:
    if case is None:
        run_load(port, "/ping", connections, duration_s)
    else:
        run_load(port, case.path, connections, duration_s, request=case.request)


def _sample(
    pid: int, port: int, target: Path, fmt: list[str], duration_s: float, connections: int, case: LlmCase | None
) -> None:
    spy = subprocess.Popen(
        [_py_spy(), "record", "--pid", str(pid), "--duration", str(int(duration_s)), "--rate", "250",
         "--output", str(target), "--nonblocking", *fmt],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    time.sleep(0.5)  # py-spy attached before the load starts
    loader = threading.Thread(target=_load, args=(port, case, connections, duration_s - 1))
    loader.start()
    loader.join()
    _, err = spy.communicate(timeout=duration_s + 30)
    if spy.returncode != 0:
        raise SystemExit(f"py-spy failed: {err.decode(errors='replace')}")
    print(f"wrote {target}")


def record(
    config: str | None, out: Path, duration_s: float, connections: int, raw: bool, case: LlmCase | None = None
) -> None:
    with tempfile.TemporaryDirectory(prefix="brownout-profile-") as tmp:
        work = Path(tmp)
        upstream = start_upstream(work)
        proxy = start_brownout(upstream.port, work, config)
        if isinstance(proxy, str):
            upstream.stop()
            raise SystemExit(proxy)
        try:
            _load(proxy.port, case, connections, 2.0)  # warm-up: imports, first flows, caches
            for target, fmt in [(out, [])] + ([(out.with_suffix(".txt"), ["--format", "raw"])] if raw else []):
                _sample(proxy.popen.pid, proxy.port, target, fmt, duration_s, connections, case)
        finally:
            proxy.stop()
            upstream.stop()


def top(collapsed: Path, n: int) -> None:
    """Self and inclusive sample shares per function from py-spy's collapsed (raw) stacks."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        samples = int(count)
        frames = [f.split(" (")[0] + " " + f.split(" (")[-1].split(":")[0] for f in stack.split(";")]
        total += samples
        own[frames[-1]] += samples
        for frame in set(frames):
            inclusive[frame] += samples
    print(f"{total} samples")
    for title, counter in (("inclusive", inclusive), ("self", own)):
        print(f"\n{title}:")
        for frame, samples in counter.most_common(n):
            print(f"  {100 * samples / total:5.1f}%  {frame}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "bench" / "all-on.yaml"), help="chaos config, or 'none'")
    parser.add_argument("--out", type=Path, default=Path("/tmp/brownout-profile.svg"))
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--raw", action="store_true", help="record collapsed stacks (OUT with .txt)")
    parser.add_argument("--top", type=Path, help="summarise a collapsed-stacks file and exit")
    parser.add_argument(
        "--case", choices=[c.name for c in CASES], help="load with this LLM-shaped case (bench/llm.py), not GET /ping"
    )
    args = parser.parse_args(argv)
    if args.top:
        top(args.top, 30)
        return 0
    case = next((c for c in CASES if c.name == args.case), None)
    config = None if args.config == "none" else args.config
    record(config, args.out, args.duration, args.connections, args.raw, case)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
