"""brownout's own cost per exchange as a count of instructions: the same on a busy machine as on a quiet one.

    .venv/bin/python bench/icount.py                          # no rules vs bench/all-on.yaml, openai-tools-stream
    .venv/bin/python bench/icount.py --case openai-tools      # another LLM-shaped case (bench/llm.py)
    .venv/bin/python bench/icount.py --ablate                 # and all-on without each invariant and exporter

CPU time on a shared VM swings by 30% from one second to the next, which hides a change worth 5%.
This runs `bench/hooks.py`'s exchanges (the addon's hooks and the pipeline, in process, no proxy I/O)
under valgrind's cachegrind, which counts the instructions the process executes (every thread; not
the kernel's). Each configuration runs twice, with `-n` and `5 * -n` exchanges after the same warm-up,
and the difference is divided by the extra exchanges, so start-up and shutdown cancel out. With a fixed
hash seed runs agree within about 0.5% (six runs of no rules: 2,901k to 2,919k per exchange).

An instruction count is not time: a scan that the C library does with wide instructions (`in`)
counts fewer instructions per byte than it takes time, and cache misses are not counted. Use it to
see what a change saves, and the throughput bench (`bench/run.py`) for what the proxy serves.
Needs valgrind (`apt-get install valgrind`); about a minute per configuration on two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.hooks import ALL_ON, Shape, case_shape, measure
from bench.llm import CASES

_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def variants(ablate: bool) -> dict[str, dict[str, Any] | None]:
    """Configurations by name: no rules, all-on, and with `ablate` all-on without each part.

    Spans are exported once, at shutdown: a batch sent every second (to nobody, in all-on) is work
    by the clock, and a run under valgrind is slow enough to make it look like work per exchange.
    Encoding each span, when it ends, still counts."""
    base = yaml.safe_load(Path(ALL_ON).read_text())
    base["exporters"]["otlp"]["schedule_delay_ms"] = 3_600_000
    out: dict[str, dict[str, Any] | None] = {"no rules": None, "all-on": base}
    if ablate:
        for inv in base["invariants"]:
            cfg = copy.deepcopy(base)
            cfg["invariants"] = [i for i in cfg["invariants"] if i["type"] != inv["type"]]
            out[f"all-on without {inv['type']}"] = cfg
        for exporter in base["exporters"]:
            cfg = copy.deepcopy(base)
            del cfg["exporters"][exporter]
            out[f"all-on without {exporter}"] = cfg
    return out


def _instructions(config: str, n: int, shape_file: Path) -> int:
    """Instructions of one child run of `n` exchanges (after the warm-up), as cachegrind counts them."""
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    cmd += [sys.executable, __file__, "--child", config, str(n), str(shape_file)]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    found = _REFS.findall(done.stderr)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"run under valgrind failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return int(found[-1].replace(",", ""))


def per_exchange(config: str, n: int, shape_file: Path, pool: ThreadPoolExecutor) -> float:
    """Instructions per exchange: (count at 5n - count at n) / 4n."""
    short, long = pool.map(lambda k: _instructions(config, k, shape_file), (n, 5 * n))
    return (long - short) / (4 * n)


def write_shape(shape: Shape, path: Path) -> None:
    """The exchange to repeat, for the child runs (JSON: bytes as latin-1, which maps each byte to a char)."""
    raw = asdict(shape)
    raw["body"] = shape.body.decode("latin-1")
    raw["chunks"] = [c.decode("latin-1") for c in shape.chunks]
    path.write_text(json.dumps(raw))


def read_shape(path: Path) -> Shape:
    raw = json.loads(path.read_text())
    raw["body"] = raw["body"].encode("latin-1")
    raw["chunks"] = tuple(c.encode("latin-1") for c in raw["chunks"])
    raw["headers"] = tuple(tuple(h) for h in raw["headers"])
    return Shape(**raw)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=[c.name for c in CASES], default="openai-tools-stream")
    parser.add_argument("-n", type=int, default=100, help="exchanges of the shorter run (the longer runs 5x)")
    parser.add_argument("--ablate", action="store_true", help="also all-on without each invariant and exporter")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(asyncio.run(measure(args.child[0] or None, int(args.child[1]), None, read_shape(Path(args.child[2])))))
        return 0
    if shutil.which("valgrind") is None:
        print("bench/icount.py needs valgrind: apt-get install valgrind (Debian/Ubuntu)", file=sys.stderr)
        return 2
    shape = case_shape(next(c for c in CASES if c.name == args.case))
    with tempfile.TemporaryDirectory(prefix="brownout-icount-") as tmp:
        shape_file = Path(tmp) / "shape.json"
        write_shape(shape, shape_file)
        print(f"{args.case}: instructions per exchange, runs of {args.n} and {5 * args.n} exchanges under cachegrind")
        base: float | None = None
        with ThreadPoolExecutor(2) as pool:
            for i, (name, cfg) in enumerate(variants(args.ablate).items()):
                config = ""
                if cfg is not None:
                    config = str(Path(tmp) / f"config-{i}.yaml")
                    Path(config).write_text(yaml.safe_dump(cfg))
                count = per_exchange(config, args.n, shape_file, pool)
                base = count if base is None else base
                print(f"  {name:36} {count / 1000:8,.0f} k   {count - base:+10,.0f} over no rules", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
