"""Several real `brownout run` processes with one config in front of one upstream: a fleet for tests.

Each replica runs in reverse mode (the openai SDK takes its address as a base URL) with its own
control API and /metrics port; `Fleet.clients()` gives one openai client per replica, and
`Fleet.round_robin()` spreads calls over them in turn, as a Kubernetes Service would.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import yaml

from tests.cli.helpers import brownout_cmd, clean_env, free_port, wait_for_port

__all__ = ["TOKEN", "Replica", "ReplicaSet", "replica_set"]

TOKEN = "fleet-test-token"


@dataclass
class Replica:
    """One `brownout run` process."""

    proc: subprocess.Popen[str]
    port: int
    control_port: int
    metrics_port: int
    log: Path
    summary: Path  # its --summary-json, written when it stops

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def control_url(self) -> str:
        return f"http://127.0.0.1:{self.control_port}"

    def control(self, method: str, path: str, **kw: Any) -> Any:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        r = httpx.request(method, self.control_url + path, headers=headers, timeout=10, trust_env=False, **kw)
        r.raise_for_status()
        return r.json()

    def metrics(self) -> str:
        return httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10, trust_env=False).text

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`brownout ctl ARGS` against this replica, as an operator would run it."""
        env = clean_env(BROWNOUT_TOKEN=TOKEN, BROWNOUT_CONTROL_URL=self.control_url)
        return subprocess.run([*brownout_cmd(), "ctl", *args], env=env, capture_output=True, text=True, timeout=30)


@dataclass
class ReplicaSet:
    """Replicas started from one config; calls spread round-robin."""

    replicas: list[Replica]
    config_path: Path
    clients: list[openai.OpenAI] = field(default_factory=list)

    def __post_init__(self) -> None:
        http = httpx.Client(trust_env=False, timeout=30)
        self.clients = [
            openai.OpenAI(base_url=r.base_url, api_key="sk-test", max_retries=0, http_client=http)
            for r in self.replicas
        ]
        self._turn = itertools.cycle(range(len(self.replicas)))

    def chat(
        self, replica: int | None = None, *, session: str | None = None, model: str = "gpt-4o-mini"
    ) -> tuple[int, list[str]]:
        """One chat completion through the next replica (or `replica`), with the official SDK: the status
        the agent got and the faults brownout announced (`rule:fault`, from `x-brownout-fault`)."""
        i = next(self._turn) if replica is None else replica
        headers = {"x-brownout-session": session} if session else None
        try:
            raw = self.clients[i].chat.completions.with_raw_response.create(
                model=model, messages=[{"role": "user", "content": "hi"}], extra_headers=headers
            )
        except openai.APIStatusError as e:  # an injected error response, as the agent sees it
            response = e.response
        except openai.APIConnectionError as e:  # the replica is not there: say why, from its own log
            r = self.replicas[i]
            raise AssertionError(f"replica {i} (exit code {r.proc.poll()}): {e}\n{r.log.read_text()[-3000:]}") from e
        else:
            response = raw.http_response
        announced = response.headers.get("x-brownout-fault", "")
        return response.status_code, [f for f in announced.split(", ") if f]

    def spread(self, n: int, **kw: Any) -> list[tuple[int, list[str]]]:
        """`n` calls, round-robin over the replicas."""
        return [self.chat(**kw) for _ in range(n)]


def _launch(i: int, config_path: Path, upstream: str, workdir: Path, env: dict[str, str]) -> Replica:
    port, control_port, metrics_port = free_port(), free_port(), free_port()
    confdir = workdir / f"confdir-{i}"
    log = workdir / f"replica-{i}.log"
    cmd = [
        *brownout_cmd(), "run", "-q", "-c", str(config_path), "--listen", f"127.0.0.1:{port}",
        "--mode", f"reverse:{upstream}", "--confdir", str(confdir),
        "--set", f"brownout_control_listen=127.0.0.1:{control_port}",
        "--set", f"brownout_metrics_listen=127.0.0.1:{metrics_port}",
        "--summary-json", str(workdir / f"summary-{i}.json"),
    ]  # fmt: skip
    out = log.open("w")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
    return Replica(proc, port, control_port, metrics_port, log, workdir / f"summary-{i}.json")


# A port picked free (below the ephemeral range: brownout/proxy/freeport.py) can still, rarely, be taken by
# another picker before the replica binds it: such a replica is started again on other ports (the error is
# the suite's, not brownout's).
PORT_TRIES = 3


def _start(config_path: Path, upstream: str, workdir: Path, n: int, env: dict[str, str]) -> list[Replica]:
    replicas = [_launch(i, config_path, upstream, workdir, env) for i in range(n)]
    for i in range(n):
        for attempt in range(PORT_TRIES):
            r = replicas[i]
            try:
                for p in (r.port, r.control_port):
                    wait_for_port(p, r.proc)
                break
            except AssertionError as e:
                log = r.log.read_text()
                if "Address already in use" not in log or attempt == PORT_TRIES - 1:
                    raise AssertionError(f"{e}\n{log}") from None
                r.proc.wait(10)
                replicas[i] = _launch(i, config_path, upstream, workdir, env)
    return replicas


def _stop(replicas: list[Replica]) -> None:
    for r in replicas:
        if r.proc.poll() is None:
            r.proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 15
    for r in replicas:
        try:
            r.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(r.proc.pid, signal.SIGKILL)
            r.proc.wait(5)


@contextlib.contextmanager
def replica_set(config: dict[str, Any], upstream: str, workdir: Path, n: int = 3) -> Iterator[ReplicaSet]:
    """`n` replicas of `brownout run -c cfg` (one config file) in reverse mode in front of `upstream`."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "chaos.yaml"
    path.write_text(yaml.safe_dump(config))
    env = clean_env(BROWNOUT_TOKEN=TOKEN)
    replicas = _start(path, upstream, workdir, n, env)
    try:
        yield ReplicaSet(replicas, path)
    finally:
        _stop(replicas)
