"""Large cassettes and logs are read an exchange at a time: memory stays a small fraction of the file.

A 1 GB cassette must not take gigabytes to replay, list, show, redact, export or discover from. Each
path is measured (tracemalloc's peak, after a warm-up run on a tiny file has done the one-off imports
and table loads) on a 32 MB cassette of 256 KB answers, and on a 32 MB exchanges log: the peak must
stay under an eighth of the file, where reading it whole costs at least the file's size.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from brownout.core.wire import BUILTIN
from brownout.proxy.cli import main
from brownout.proxy.record.matcher import ReplayIndex
from tests.record.support import chat, write_cassette

MB = 1 << 20


def big_cassette(directory: Path, exchanges: int, answer_bytes: int) -> Path:
    directory.mkdir()
    lines = (chat("big", i + 1, content="y" * answer_bytes).to_dict() for i in range(exchanges))
    return write_cassette(directory / "big.jsonl", lines)


def write_log(path: Path, lines: int) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for i in range(lines):
            record = {
                "provider": "openai",
                "session": f"s{i % 10}",
                "model": "gpt-4o",
                "host": "api.openai.com",
                "port": 443,
                "status": 200,
                "error_message": "x" * 4000,  # a field the inventory does not keep
            }
            f.write(json.dumps(record) + "\n")
    return path


def peak_bytes(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def cli(*args: str) -> Callable[[], object]:
    def run() -> None:
        result = CliRunner().invoke(main, list(args))
        assert result.exit_code == 0, result.output

    return run


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("large")
    return {
        "tiny": big_cassette(root / "tiny", 2, 1000).parent,
        "big": big_cassette(root / "big", 128, 256 << 10).parent,
        "tiny_log": write_log(root / "tiny.jsonl", 10),
        "big_log": write_log(root / "big.jsonl", 8000),
        "out": root,
    }


def replay_index(directory: Path) -> Callable[[], object]:
    from brownout.proxy.record import cassette

    return lambda: ReplayIndex(cassette.scan_dir(directory), BUILTIN)  # what replay builds at start


CASES: dict[str, Callable[[Path, Path], Callable[[], object]]] = {
    "replay": lambda d, out: replay_index(d),
    "ls": lambda d, out: cli("cassette", "ls", str(d), "--json"),
    "show": lambda d, out: cli("cassette", "show", str(d), "--json"),
    "har": lambda d, out: cli("cassette", "har", str(d), "-o", str(out / f"{d.name}.har")),
    "redact": lambda d, out: cli("cassette", "redact", str(d)),
    "discover": lambda d, out: cli("discover", str(d), "--json"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(CASES))
def test_a_large_cassette_costs_a_small_fraction_of_its_size(files: dict[str, Path], case: str) -> None:
    size = sum(p.stat().st_size for p in files["big"].iterdir())
    assert size > 32 * MB
    CASES[case](files["tiny"], files["out"])()  # imports, price table: paid once, not per byte
    peak = peak_bytes(CASES[case](files["big"], files["out"]))
    assert peak < size / 8, f"{case}: peak {peak / MB:.1f} MB for a {size / MB:.0f} MB cassette"


@pytest.mark.timeout(120)
def test_discover_reads_a_large_log_in_bounded_memory(files: dict[str, Path]) -> None:
    size = files["big_log"].stat().st_size
    assert size > 30 * MB
    cli("discover", str(files["tiny_log"]), "--json")()
    peak = peak_bytes(cli("discover", str(files["big_log"]), "--json"))
    assert peak < size / 8, f"peak {peak / MB:.1f} MB for a {size / MB:.0f} MB log"
