"""docs/discovery.md's walkthrough runs as written: every ```sh block, in order, in a fresh directory.

The first block starts the demo upstream, which the reader leaves running in a terminal of its own;
here it runs in the background on a free port, and that port replaces 8000 in the later blocks. The
rest run as one bash script (`set -euo pipefail`) with the virtualenv's `brownout` and `python` first
on PATH and no proxy variables inherited, so the experiment's exit code (its gate) decides.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.docs.mdpages import DOCS, page

PAGE = DOCS / "discovery.md"
UPSTREAM = "python -m brownout.proxy.demo.upstream --port 8000"


def _blocks() -> list[str]:
    return [text for _, language, text in page(PAGE).code if language == "sh"]


def test_the_walkthrough_starts_the_upstream_first() -> None:
    blocks = _blocks()
    assert blocks[0].strip() == UPSTREAM
    assert all("127.0.0.1:8000" in b for b in blocks if "demo.agent" in b)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_walkthrough_runs(tmp_path: Path) -> None:
    venv = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("BROWNOUT_")}
    env.update(PATH=f"{venv}{os.pathsep}{env.get('PATH', '')}", BROWNOUT_CONFDIR=str(tmp_path / "conf"))
    first, *rest = _blocks()
    upstream = subprocess.Popen(
        first.replace("--port 8000", "--port 0").split(), cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert upstream.stdout is not None
        port = upstream.stdout.readline().split()[-1]  # "LISTENING <port>"
        script = "set -euo pipefail\n" + "\n".join(rest).replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        run = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=560)
    finally:
        upstream.terminate()
        upstream.wait(10)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    # The same inventory from the log, the cassettes, the control API, and once more with --out.
    assert run.stdout.count("get_weather: 2 calls via openai") == 4
    assert "exp.yaml: ok (experiment, 10 phases" in run.stdout
    report = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    assert report["gate"]["passed"] and report["experiment"] == "discovered"
    # Priced in dollars phase by phase, with the cost of chaos per fault type (the page's last bullet).
    assert report["cost_usd"]["baseline_per_run"] > 0
    assert all(p["cost_usd_per_run"] > 0 for p in report["phases"])
    assert any(c["extra_cost_usd_per_run"] is not None for c in report["cost_of_chaos"].values())
    assert "### Cost of chaos" in (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    # The generated phases ran as generated: a clean baseline, and each chaos phase fires only its own family.
    generated = yaml.safe_load((tmp_path / "exp.yaml").read_text(encoding="utf-8"))
    rules = {p["name"]: {r["name"] for r in p.get("rules", [])} for p in generated["phases"]}
    phases = {p["name"]: p for p in report["phases"]}
    assert list(phases) == list(rules)
    assert phases["baseline"]["faults"] == 0 and phases["baseline"]["success_rate"] == 1.0
    assert sum(p["faults"] for p in phases.values()) > 0
    for name, phase in phases.items():
        assert set(phase["faults_per_rule"]) <= rules[name], name
