"""A staging environment for tests: three brownout replicas on a real Redis in front of a mock LLM, a small
agent service that calls the LLM through them, a load generator, and a real Prometheus scraping it all.

The agent service answers `GET /ask` by calling the mock LLM with the official openai SDK through the
replicas in turn (as a Kubernetes Service spreads connections), 200 when the call succeeded and 502 when
it did not, and exports `agent_requests_total{outcome="ok"|"error"}`: its SLO is the share of ok
answers. Prometheus scrapes the replicas (`job="brownout"`) and the agent (`job="agent"`) every second.
"""

from __future__ import annotations

import contextlib
import itertools
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import openai
from prometheus_client import CollectorRegistry, Counter, start_http_server
from prometheus_client.parser import text_string_to_metric_families

from tests.exporters.promsupport import PROMETHEUS
from tests.fleet.replicas import ReplicaSet
from tests.redisserver import RedisServer

__all__ = ["SLO", "AgentService", "Stage", "agent_service", "load", "prometheus"]

# The agent's SLO: the share of /ask answers that succeeded, over the check's window.
SLO = 'sum(rate(agent_requests_total{outcome="ok"}[$window])) / sum(rate(agent_requests_total[$window]))'


class AgentService:
    """A tiny HTTP service whose every answer needs one LLM call through brownout."""

    def __init__(self, base_urls: list[str]) -> None:
        http = httpx.Client(trust_env=False, timeout=5)
        self.clients = [
            openai.OpenAI(base_url=u, api_key="sk-test", max_retries=0, http_client=http) for u in base_urls
        ]
        self.turn = itertools.cycle(range(len(self.clients)))
        self.lock = threading.Lock()
        self.registry = CollectorRegistry()
        self.requests = Counter("agent_requests", "Answers of /ask.", ["outcome"], registry=self.registry)
        for outcome in ("ok", "error"):
            self.requests.labels(outcome)
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                with service.lock:
                    client = service.clients[next(service.turn)]
                try:
                    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
                except openai.OpenAIError:
                    service.requests.labels("error").inc()
                    self.send_response(502)
                else:
                    service.requests.labels("ok").inc()
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/ask"
        self.metrics, _ = start_http_server(0, addr="127.0.0.1", registry=self.registry)
        self.metrics_port = self.metrics.server_port
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.metrics.shutdown()
        self.metrics.server_close()


@contextlib.contextmanager
def agent_service(base_urls: list[str]) -> Iterator[AgentService]:
    service = AgentService(base_urls)
    try:
        yield service
    finally:
        service.close()


@contextlib.contextmanager
def load(url: str, pause_s: float = 0.03) -> Iterator[None]:
    """A load generator thread asking the agent service, until the block ends."""
    stop = threading.Event()

    def run() -> None:
        with httpx.Client(trust_env=False, timeout=10) as http:
            while not stop.is_set():
                with contextlib.suppress(httpx.HTTPError):
                    http.get(url)
                stop.wait(pause_s)

    thread = threading.Thread(target=run, name="load-generator", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(15)


class Prom:
    """A running Prometheus' HTTP API."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(base_url=url, trust_env=False, timeout=10)

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        body = self.http.get("/api/v1/query", params=params).json()
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        body = self.http.get("/api/v1/query_range", params=params).json()
        assert body["status"] == "success", body
        return list(body["data"]["result"])


@contextlib.contextmanager
def prometheus(workdir: Path, brownout: list[int], agent: int, port: int) -> Iterator[Prom]:
    """Prometheus scraping the replicas' /metrics ports and the agent's every second."""
    workdir.mkdir(parents=True, exist_ok=True)
    targets = ", ".join(f"'127.0.0.1:{p}'" for p in brownout)
    (workdir / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - {{job_name: brownout, static_configs: [{{targets: [{targets}]}}]}}\n"
        f"  - {{job_name: agent, static_configs: [{{targets: ['127.0.0.1:{agent}']}}]}}\n"
    )
    log = (workdir / "prometheus.log").open("w")
    args = [
        PROMETHEUS,
        f"--config.file={workdir / 'prometheus.yml'}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
    prom = Prom(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 30
        while True:  # every target scraped, and the agent's rate computable (two scrapes)
            assert proc.poll() is None, (workdir / "prometheus.log").read_text()
            with contextlib.suppress(httpx.HTTPError, AssertionError, KeyError, ValueError):
                up = prom.query("sum(up)")
                rate = prom.query('sum(rate(agent_requests_total{outcome="ok"}[3s]))')
                if up and float(up[0]["value"][1]) == len(brownout) + 1 and rate and float(rate[0]["value"][1]) > 0:
                    break
            assert time.monotonic() < deadline, "Prometheus did not scrape every target in 30 s"
            time.sleep(0.25)
        yield prom
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@dataclass
class Stage:
    """The whole staging environment of a test module."""

    fleet: ReplicaSet
    redis: RedisServer
    agent: AgentService
    prom: Prom

    @property
    def redis_url(self) -> str:
        return self.redis.url

    def redis_command(self, *args: str) -> int:
        """A Redis command with an integer reply (EXISTS, HLEN ...)."""
        return int(self.redis.command(*args).strip().lstrip(b":"))

    def faults_per_replica(self) -> list[float]:
        """Each replica's faults injected so far, from its own /metrics."""
        out = []
        for r in self.fleet.replicas:
            families = {f.name: f for f in text_string_to_metric_families(r.metrics())}
            family = families.get("brownout_faults_injected")
            out.append(sum(s.value for s in family.samples if s.name.endswith("_total")) if family else 0.0)
        return out

    def phase_gauges(self) -> list[dict[tuple[str, str], float]]:
        """Each replica's brownout_experiment_phase series."""
        out = []
        for r in self.fleet.replicas:
            families = {f.name: f for f in text_string_to_metric_families(r.metrics())}
            family = families.get("brownout_experiment_phase")
            samples = family.samples if family else []
            out.append({(s.labels["experiment"], s.labels["phase"]): s.value for s in samples})
        return out
