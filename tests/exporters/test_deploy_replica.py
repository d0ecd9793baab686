"""The replicated manifests' own commands, run as kubelet would run them: Redis with its args and its
readiness probe, then one brownout replica (init container, container args, ConfigMap config, probes,
the CA from its Secret) serving an OpenAI SDK client, before and after its Redis dies."""

from __future__ import annotations

import shutil
import signal
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import openai
import yaml

from tests.cli.helpers import REPO, brownout_cmd, clean_env, free_port, wait_for_port
from tests.exporters.k8ssupport import REPLICATED, container, named_port, objects, one
from tests.redisserver import REDIS_SERVER, RedisServer, redis_server

__all__ = ["redis_server"]

COMPOSE = REPO / "deploy" / "compose" / "docker-compose.yml"
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"


def _probe(command: list[str], port: int) -> int:
    """The readiness probe's command against a Redis on `port` (in the pod, redis-cli's default 6379)."""
    script = command[-1].replace("redis-cli", f"{REDIS_CLI} -p {port}")
    return subprocess.run([*command[:-1], script], capture_output=True, timeout=30).returncode


def test_redis_runs_with_the_manifest_args_and_its_probe_tells_up_from_down(tmp_path: Path) -> None:
    server = container(one(objects(REPLICATED), "Deployment", "brownout-redis"), "redis")
    compose = yaml.safe_load(COMPOSE.read_text())["services"]["redis"]
    assert compose["image"] == server["image"] and compose["command"] == server["args"], "one Redis setup"
    port = free_port()
    args = [REDIS_SERVER, *server["args"][1:], "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    redis = RedisServer(tmp_path, port)
    redis.proc = proc
    probe = server["readinessProbe"]["exec"]["command"]
    try:
        wait_until_pings(redis, proc)
        settings = {key: redis.command("CONFIG", "GET", key) for key in ("save", "appendonly", "maxmemory-policy")}
        assert b"noeviction" in settings["maxmemory-policy"] and b"\r\nno\r\n" in settings["appendonly"]
        assert settings["save"].endswith(b"$0\r\n\r\n")  # no snapshots
        assert _probe(probe, port) == 0
    finally:
        redis.stop()
    assert _probe(probe, port) != 0


def wait_until_pings(redis: RedisServer, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(500):
        if redis.ping():
            return
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else proc.returncode
        time.sleep(0.02)
    raise AssertionError("redis-server did not answer")


def ready_within(url: str, timeout_s: float) -> None:
    """As kubelet does: probe until the first success (the control API binds just after the proxy)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(url, trust_env=False).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{url} not ready after {timeout_s} s"
        time.sleep(0.1)


class Pod:
    """The brownout pod of the replicated Deployment on this machine: each volume a directory, each port free."""

    def __init__(self, root: Path, redis_url: str) -> None:
        self.objs = objects(REPLICATED)
        self.deployment = one(self.objs, "Deployment", "brownout")
        self.spec = self.deployment["spec"]["template"]["spec"]
        self.brownout = container(self.deployment, "brownout")
        self.ports = {p["containerPort"]: free_port() for p in self.brownout["ports"]}
        self.volumes = {v["name"]: root / "volumes" / v["name"] for v in self.spec["volumes"]}
        for path in self.volumes.values():
            path.mkdir(parents=True)
        self.redis_url = redis_url

    def local(self, c: dict[str, Any], text: str) -> str:
        """`text` with the container's mount paths and listen addresses as they are here."""
        for m in sorted(c.get("volumeMounts", []), key=lambda m: -len(m["mountPath"])):
            text = text.replace(m["mountPath"], str(self.volumes[m["name"]]))
        for port, here in self.ports.items():
            text = text.replace(f"0.0.0.0:{port}", f"127.0.0.1:{here}")
        return text

    def fill(self, secrets: dict[str, dict[str, bytes]]) -> None:
        """What kubelet puts in the volumes: the ConfigMap's files, the Secrets' keys."""
        for v in self.spec["volumes"]:
            if "configMap" in v:
                for key, text in one(self.objs, "ConfigMap", v["configMap"]["name"])["data"].items():
                    (self.volumes[v["name"]] / key).write_text(self.config_here(text))
            elif "secret" in v:
                for key, data in secrets[v["secret"]["secretName"]].items():
                    (self.volumes[v["name"]] / key).write_bytes(data)

    def config_here(self, text: str) -> str:
        url = urlsplit(yaml.safe_load(text)["state"]["url"])
        here = urlsplit(self.redis_url)
        return self.local(self.brownout, text.replace(f"{url.hostname}:{url.port}", f"{here.hostname}:{here.port}"))

    def port(self, name: int | str) -> int:
        return self.ports[named_port(self.brownout, name)]


def _secrets(tmp_path: Path) -> dict[str, dict[str, bytes]]:
    """The Secrets as the kustomization's comment says to create them (`brownout env --confdir ./ca`)."""
    result = subprocess.run(
        [*brownout_cmd(), "env", "--confdir", "./ca"], cwd=tmp_path, env=clean_env(), capture_output=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    ca = tmp_path / "ca"
    return {
        "brownout-ca": {name: (ca / name).read_bytes() for name in ("mitmproxy-ca.pem", "mitmproxy-ca-cert.pem")},
        "brownout-token": {"token": b"test-token"},
    }


def test_a_replica_starts_from_the_manifests_and_serves_through_a_redis_outage(
    tmp_path: Path, redis_server: RedisServer, upstream_tls: Any
) -> None:
    pod = Pod(tmp_path, redis_server.url)
    secrets = _secrets(tmp_path)
    pod.fill(secrets)
    for init in pod.spec["initContainers"]:
        command = [pod.local(init, part) for part in init["command"]]
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr

    args = [pod.local(pod.brownout, a) for a in pod.brownout["args"]]
    # The one addition: this test's upstream has its own CA, which the replica must trust.
    args += ["--set", f"ssl_verify_upstream_trusted_ca={upstream_tls.ca_pem_path}"]
    env = {e["name"]: e["value"] for e in pod.brownout["env"] if "value" in e} | {"BROWNOUT_TOKEN": "test-token"}
    proc = subprocess.Popen(
        [*brownout_cmd(), *args], env=clean_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for_port(pod.port("proxy"), proc)
        probes = [pod.brownout[p]["httpGet"] for p in ("readinessProbe", "livenessProbe")]

        def probes_pass() -> None:
            for get in probes:  # kubelet sends no token
                url = f"http://127.0.0.1:{pod.port(get['port'])}{get['path']}"
                assert httpx.get(url, trust_env=False).status_code == 200

        ready_within(f"http://127.0.0.1:{pod.port(probes[0]['port'])}{probes[0]['path']}", 30.0)
        probes_pass()
        annotations = pod.deployment["spec"]["template"]["metadata"]["annotations"]
        scrape = (
            f"http://127.0.0.1:{pod.port(int(annotations['prometheus.io/port']))}{annotations['prometheus.io/path']}"
        )
        assert "brownout_build_info" in httpx.get(scrape, trust_env=False).text

        # The agent trusts the CA of the brownout-ca Secret alone: the replica presents that CA.
        verify = ssl.create_default_context(cadata=secrets["brownout-ca"]["mitmproxy-ca-cert.pem"].decode())
        client = openai.OpenAI(
            base_url=f"{upstream_tls.url}/v1",
            api_key="sk-test",
            max_retries=0,
            http_client=openai.DefaultHttpxClient(proxy=f"http://127.0.0.1:{pod.port('proxy')}", verify=verify),
        )

        def chat() -> str | None:
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
            return reply.choices[0].message.content

        assert all(chat() for _ in range(3))
        redis_server.stop()  # the store goes away: readiness stays, traffic flows
        assert all(chat() for _ in range(3))
        probes_pass()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    confdir = Path(args[args.index("--confdir") + 1])
    # brownout used the Secret's CA rather than making its own
    assert (confdir / "mitmproxy-ca.pem").read_bytes() == secrets["brownout-ca"]["mitmproxy-ca.pem"]
