"""Run a docs page's walkthrough as written: its ```sh blocks, in order, in a fresh directory.

The first block starts the demo upstream, which the reader leaves running in a terminal of its own;
here it runs in the background on a free port, and that port replaces 8000 in the later blocks. The
rest run as one bash script (`set -euo pipefail`) with the virtualenv's `brownout` and `python` first
on PATH and no proxy variables inherited.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.docs.mdpages import page

__all__ = ["UPSTREAM", "run_walkthrough", "sh_blocks"]

UPSTREAM = "python -m brownout.proxy.demo.upstream --port 8000"


def sh_blocks(path: Path) -> list[str]:
    return [text for _, language, text in page(path).code if language == "sh"]


def run_walkthrough(path: Path, workdir: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Every sh block of the page at `path`, the first (the upstream) in the background."""
    venv = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("BROWNOUT_")}
    env.update(PATH=f"{venv}{os.pathsep}{env.get('PATH', '')}", BROWNOUT_CONFDIR=str(workdir / "conf"))
    first, *rest = sh_blocks(path)
    assert first.strip() == UPSTREAM, "a walkthrough starts the demo upstream first"
    upstream = subprocess.Popen(
        first.replace("--port 8000", "--port 0").split(), cwd=workdir, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert upstream.stdout is not None
        port = upstream.stdout.readline().split()[-1]  # "LISTENING <port>"
        script = "set -euo pipefail\n" + "\n".join(rest).replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        return subprocess.run(
            ["bash", "-c", script], cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout_s
        )
    finally:
        upstream.terminate()
        upstream.wait(10)
