"""The guard keeps the types of what it wraps: the type checker matches the arguments of every
`guard.call` / `guard.acall` against the wrapped callable, and the result is that callable's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = """
from brownout.core.guard import Guard

def f(a: int, b: str) -> bool:
    return bool(a) and bool(b)

async def af(a: int) -> str:
    return str(a)

async def use(g: Guard) -> None:
    ok: bool | None = g.call("c", f, 1, "s", context="fine", default=False)
    g.call("c", f, "1", "s")  # line 12: a str where f takes an int
    g.call("c", f, 1)  # line 13: an argument missing
    wrong: str | None = g.call("c", f, 1, "s")  # line 14: the result is f's
    fine: str | None = await g.acall("c", af, 1, context="fine")
    await g.acall("c", af, "1")  # line 16: a str where af takes an int
"""


@pytest.mark.slow
def test_mypy_checks_the_arguments_and_result_of_guarded_calls(tmp_path: Path) -> None:
    # mypy reads the brownout.* namespace through links to the layer folders (as `make lint` does).
    (tmp_path / "brownout").mkdir()
    os.symlink(ROOT / "core", tmp_path / "brownout" / "core")
    (tmp_path / "snippet.py").write_text(SNIPPET, encoding="utf-8")
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        out, err, status = mypy_api.run(
            ["snippet.py", "--no-incremental", "--config-file", str(ROOT / "pyproject.toml")]
        )
    finally:
        os.chdir(cwd)
    errors = sorted(int(line.split(":")[1]) for line in out.splitlines() if line.startswith("snippet.py:"))
    assert errors == [12, 13, 14, 16], out + err
    assert status == 1
