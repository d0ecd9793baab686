"""A real Prometheus scrapes brownout's /metrics during a chaos run; every dashboard and alert query runs on it."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from brownout.core.semconv import LATEST
from brownout.exporters.metrics import Metrics
from brownout.proxy.freeport import free_port as _free_port  # outside the kernel's ephemeral range
from tests.exporters.expsamples import traffic
from tests.exporters.promsupport import PROMETHEUS, alert_exprs, dashboard_exprs, feed, needs_prometheus


class Live:
    """Prometheus plus the metrics server it scrapes, fed by a background chaos run."""

    def __init__(self, api: str, metrics: Metrics) -> None:
        self.api, self.metrics = api, metrics
        self.http = httpx.Client(base_url=api, trust_env=False, timeout=10)

    def query(self, expr: str) -> dict[str, Any]:
        body = self.http.get("/api/v1/query", params={"query": expr}).json()
        assert body["status"] == "success", f"{expr}: {body.get('errorType')}: {body.get('error')}"
        return body["data"]

    def query_data(self, expr: str, within_s: float = 5.0) -> dict[str, Any]:
        """`query`, asked again until it returns data: a scrape that timed out on a busy machine leaves
        the series stale (absent) until the next one succeeds."""
        deadline = time.monotonic() + within_s
        while not (data := self.query(expr))["result"] and time.monotonic() < deadline:
            time.sleep(0.25)
        return data


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    if not Path(PROMETHEUS).exists():
        pytest.skip("prometheus absent: `make test` installs the Debian package prometheus")
    tmp = tmp_path_factory.mktemp("prometheus")
    metrics = Metrics(registry=CollectorRegistry())
    server = metrics.serve("127.0.0.1:0")
    # A second brownout on the latest GenAI conventions (job brownout-latest): its traffic only.
    latest = Metrics(registry=CollectorRegistry(), semconv=LATEST)
    latest_server = latest.serve("127.0.0.1:0")
    stop = threading.Event()

    def chaos_run() -> None:  # keep counters moving so rate() and histogram_quantile() have data
        while not stop.is_set():
            feed(metrics)
            for ex in traffic():
                latest.observe_exchange(ex)
            stop.wait(0.2)

    feeder = threading.Thread(target=chaos_run, daemon=True)
    feeder.start()
    port = _free_port()
    (tmp / "prometheus.yml").write_text(
        "global: {scrape_interval: 250ms, evaluation_interval: 250ms}\n"
        "scrape_configs:\n"
        "  - job_name: brownout\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{server.server_port}']}}]\n"
        "  - job_name: brownout-latest\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{latest_server.server_port}']}}]\n"
    )
    log = (tmp / "prometheus.log").open("w")  # closed in the finally below, after the process
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={tmp / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    live = Live(f"http://127.0.0.1:{port}", metrics)
    try:
        deadline = time.time() + 15
        # Ready, then at least 4 scrapes: rate() over 1m needs two samples with traffic between them.
        while time.time() < deadline:
            try:
                got = live.query('count_over_time(brownout_build_info{job="brownout"}[1m])')["result"]
                if got and float(got[0]["value"][1]) >= 4:
                    break
            except (httpx.HTTPError, AssertionError, ValueError):
                pass
            assert proc.poll() is None, (tmp / "prometheus.log").read_text()
            time.sleep(0.25)
        else:
            pytest.fail("Prometheus did not scrape brownout in 15 s:\n" + (tmp / "prometheus.log").read_text())
        yield live
    finally:
        stop.set()
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        for srv in (server, latest_server):
            srv.shutdown()
            srv.server_close()


def _has_data(data: dict[str, Any]) -> bool:
    return bool(data["result"])


@needs_prometheus
def test_scrape_is_up_with_build_info(live: Live) -> None:
    assert live.query_data('up{job="brownout"} == 1')["result"][0]["value"][1] == "1"
    assert live.query_data("brownout_build_info")["result"][0]["metric"]["version"]


@needs_prometheus
@pytest.mark.parametrize("title,expr", dashboard_exprs(), ids=lambda v: v if len(v) < 60 else v[:57] + "...")
def test_dashboard_query_returns_data(live: Live, title: str, expr: str) -> None:
    assert _has_data(live.query_data(expr)), f"panel {title!r}: no data for {expr}"


@needs_prometheus
def test_the_genai_latency_panel_has_data_under_either_version_of_the_conventions(live: Live) -> None:
    """The latest conventions name the inference duration otherwise: the panel reads both names."""
    (expr,) = [e for title, e in dashboard_exprs() if title.startswith("GenAI operation duration")]
    for job in ("brownout", "brownout-latest"):
        got = live.query_data(expr.replace("_bucket[", f'_bucket{{job="{job}"}}['))["result"]
        assert {r["metric"].get("gen_ai_request_model") for r in got} >= {"gpt-4o-mini"}, (job, got)


@needs_prometheus
@pytest.mark.parametrize(
    "alert,expr,unthresholded", alert_exprs(), ids=lambda v: v if isinstance(v, str) and len(v) < 40 else None
)
def test_alert_expression_is_valid_and_has_data(live: Live, alert: str, expr: str, unthresholded: str | None) -> None:
    data = live.query(expr)  # well-formed: status success
    assert data["resultType"] == "vector"
    if unthresholded is not None:
        assert _has_data(live.query_data(unthresholded)), f"{alert}: no data for {unthresholded}"
    else:
        assert _has_data(live.query_data(expr))


@needs_prometheus
def test_critical_violation_alert_fires_on_this_run(live: Live) -> None:
    """The run violates a critical invariant, so this alert's full expression (threshold included) returns data."""
    expr = next(e for name, e, _ in alert_exprs() if name == "BrownoutCriticalViolation")
    result = live.query_data(expr)["result"]
    assert result and result[0]["metric"]["invariant"] == "latency_budget"


@needs_prometheus
def test_bounded_model_label_reaches_prometheus(live: Live) -> None:
    models = {r["metric"]["model"] for r in live.query_data("sum by (model) (brownout_tokens_total)")["result"]}
    assert "my-secret-finetune-xyz" not in models
    assert {"gpt-4o-mini", "claude-sonnet-4-5", "gemini-2.0-flash", "llama3.2"} <= models
