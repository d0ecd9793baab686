"""deploy/kubernetes: valid for the Kubernetes API, kustomizations that build, and a replicated fleet
whose parts reach each other (config -> Redis Service -> Redis pod, Prometheus -> every replica)."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version

from brownout.proxy.config import BrownoutConfig
from brownout.proxy.configload import load_config
from tests.exporters.k8ssupport import (
    KUBERNETES,
    REPLICATED,
    container,
    documents,
    kustomizations,
    manifest_files,
    named_port,
    objects,
    one,
    pod_labels,
    pods,
    selects,
)
from tests.exporters.promsupport import DEPLOY, PROMTOOL, needs_promtool

# The oldest Kubernetes minor still in the big providers' support windows, and the newest the schemas know.
KUBE_VERSIONS = ("1.29", latest_version())
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl absent: the structure checks above still run")


def _rel(path: Path) -> str:
    return str(path.relative_to(KUBERNETES))


def config_of(objs: list[dict[str, Any]], tmp_path: Path) -> BrownoutConfig:
    """The brownout config in the ConfigMap, loaded as `brownout validate` loads a file (errors name the line)."""
    data = one(objs, "ConfigMap", "brownout-config")["data"]
    path = tmp_path / "brownout.yaml"
    path.write_text(data["brownout.yaml"])
    return load_config(path)


def _listen_port(listen: str) -> int:
    return int(listen.rsplit(":", 1)[1])


@pytest.mark.parametrize("path", manifest_files(), ids=_rel)
def test_manifests_validate_against_the_kubernetes_api_schemas(path: Path) -> None:
    docs = documents(path)
    assert docs
    for doc in docs:
        for version in KUBE_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)


def test_the_schema_check_is_strict() -> None:
    """A misspelled field is an error, not an ignored extra: what catches a probe that kubelet never runs."""
    deployment = copy.deepcopy(one(objects(REPLICATED), "Deployment", "brownout"))
    c = deployment["spec"]["template"]["spec"]["containers"][0]
    c["readinesProbe"] = c.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError, match="readinesProbe"):
        kubernetes_validate.validate(deployment, KUBE_VERSIONS[0], strict=True)


@pytest.mark.parametrize("kustomization", kustomizations(), ids=_rel)
def test_kustomizations_list_every_manifest_of_their_directory(kustomization: Path) -> None:
    directory = kustomization.parent
    listed = [directory / r for r in yaml.safe_load(kustomization.read_text())["resources"]]
    assert all(p.is_file() for p in listed), listed
    # Examples (a pod with an agent in it) are to copy from, not to apply.
    assert sorted(listed) == [f for f in manifest_files(directory) if "example" not in f.name]
    names = [(o["kind"], o["metadata"]["name"]) for f in listed for o in documents(f)]
    assert len(names) == len(set(names)), names


@needs_kubectl
@pytest.mark.parametrize("kustomization", kustomizations(), ids=_rel)
def test_kustomize_builds_and_what_it_builds_validates(kustomization: Path) -> None:
    assert KUBECTL is not None
    result = subprocess.run(
        [KUBECTL, "kustomize", str(kustomization.parent)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    built = [d for d in yaml.safe_load_all(result.stdout) if d]
    listed = yaml.safe_load(kustomization.read_text())["resources"]
    expected = {(o["kind"], o["metadata"]["name"]) for r in listed for o in documents(kustomization.parent / r)}
    assert {(o["kind"], o["metadata"]["name"]) for o in built} == expected
    for doc in built:
        kubernetes_validate.validate(doc, KUBE_VERSIONS[0], strict=True)


def test_the_replicated_fleet_is_three_brownouts_on_one_redis(tmp_path: Path) -> None:
    objs = objects(REPLICATED)
    brownout, redis = one(objs, "Deployment", "brownout"), one(objs, "Deployment", "brownout-redis")
    assert brownout["spec"]["replicas"] == 3
    # Two Redis behind one Service, even for the moment of a rollout, would split every counter.
    assert redis["spec"]["replicas"] == 1 and redis["spec"]["strategy"] == {"type": "Recreate"}
    server = container(redis, "redis")
    assert server["image"].split(":")[0] == "redis" and server["image"].split(":")[1].startswith("7")
    assert "redis-cli ping" in " ".join(server["readinessProbe"]["exec"]["command"])
    for workload in (brownout, redis):
        for c in workload["spec"]["template"]["spec"]["containers"]:
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]) and "memory" in c["resources"]["limits"]
    pdb = one(objs, "PodDisruptionBudget", "brownout")
    assert selects(pdb["spec"]["selector"]["matchLabels"], pod_labels(brownout)) and pdb["spec"]["maxUnavailable"] == 1

    config = config_of(objs, tmp_path)
    assert config.state.backend == "redis"
    url = urlsplit(config.state.resolve_url({}))
    # A short name: the Service of that name in the same namespace, on one of its ports.
    service = one(objs, "Service", url.hostname or "")
    port = next(p for p in service["spec"]["ports"] if p["port"] == (url.port or 6379))
    assert [w["metadata"]["name"] for w in pods(objs) if selects(service["spec"]["selector"], pod_labels(w))] == [
        "brownout-redis"
    ]
    # redis-server listens on 6379 unless told otherwise
    assert named_port(server, port["targetPort"]) == 6379 and "--port" not in server["args"]


def test_each_service_and_policy_selects_the_pods_it_means() -> None:
    for directory in (KUBERNETES, REPLICATED):
        objs = objects(directory)
        workloads = list(pods(objs))
        for w in workloads:
            if w["kind"] == "Deployment":
                assert selects(w["spec"]["selector"]["matchLabels"], pod_labels(w)), w["metadata"]["name"]
        for svc in (o for o in objs if o["kind"] == "Service"):
            selected = [w for w in workloads if selects(svc["spec"]["selector"], pod_labels(w))]
            assert len(selected) == 1, (svc["metadata"]["name"], [w["metadata"]["name"] for w in selected])
            for port in svc["spec"]["ports"]:
                assert any(
                    port["targetPort"] in {p.get("name") for p in c["ports"]}
                    for c in selected[0]["spec"]["template"]["spec"]["containers"]
                ), (svc["metadata"]["name"], port)
    objs = objects(REPLICATED)
    policy = one(objs, "NetworkPolicy", "brownout-redis")
    redis, brownout = one(objs, "Deployment", "brownout-redis"), one(objs, "Deployment", "brownout")
    assert selects(policy["spec"]["podSelector"]["matchLabels"], pod_labels(redis))
    (rule,) = policy["spec"]["ingress"]
    allowed = rule["from"][0]["podSelector"]["matchLabels"]
    assert selects(allowed, pod_labels(brownout)), "the fleet's replicas must reach their Redis"
    assert named_port(container(redis, "redis"), rule["ports"][0]["port"]) == 6379


@pytest.mark.parametrize("directory", [KUBERNETES, REPLICATED], ids=_rel)
def test_ports_probes_and_annotations_agree_with_the_brownout_config(directory: Path, tmp_path: Path) -> None:
    objs = objects(directory)
    config = config_of(objs, tmp_path)
    deployment = one(objs, "Deployment", "brownout")
    c = container(deployment, "brownout")
    args = c["args"]
    assert named_port(c, "proxy") == _listen_port(args[args.index("--listen") + 1])
    assert named_port(c, "control") == _listen_port(config.control.listen)
    assert config.exporters.prometheus is not None
    metrics = _listen_port(config.exporters.prometheus.listen)
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert named_port(c, "metrics") == metrics == int(annotations["prometheus.io/port"])
    config_file = Path(args[args.index("-c") + 1])
    mount = next(m for m in c["volumeMounts"] if m["name"] == "config")
    assert (
        config_file.parent == Path(mount["mountPath"])
        and config_file.name in one(objs, "ConfigMap", "brownout-config")["data"]
    )
    for probe in ("readinessProbe", "livenessProbe"):
        get = c[probe]["httpGet"]  # tests/exporters/test_deploy_replica.py runs them against brownout
        assert named_port(c, get["port"]) == named_port(c, "control") and get["path"] == "/healthz"


def _documented_secrets(text: str) -> dict[str, set[str]]:
    """`kubectl create secret generic NAME --from-...` commands in the comments: NAME -> its keys."""
    joined = " ".join(line.lstrip("#").strip().rstrip("\\") for line in text.splitlines())
    out: dict[str, set[str]] = {}
    for name, sources in re.findall(
        r"kubectl create secret generic (\S+)((?:\s+--from-(?:literal|file)=\S+)+)", joined
    ):
        literals = re.findall(r"--from-literal=([^=\s]+)=", sources)
        files = [Path(f.split("=")[0] if "=" in f else f).name for f in re.findall(r"--from-file=(\S+)", sources)]
        out[name] = {*literals, *files}
    return out


def test_the_secrets_the_fleet_needs_are_created_by_the_commands_it_documents() -> None:
    """No placeholder Secret is applied over a real one: the operator creates them, with these commands."""
    objs = objects(REPLICATED)
    assert not [o for o in objs if o["kind"] == "Secret"]
    needed: dict[str, set[str]] = {}
    for workload in pods(objs):
        spec = workload["spec"]["template"]["spec"]
        for c in spec["containers"] + spec.get("initContainers", []):
            for e in c.get("env", []):
                if ref := e.get("valueFrom", {}).get("secretKeyRef"):
                    needed.setdefault(ref["name"], set()).add(ref["key"])
            mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
            for v in spec["volumes"]:
                if "secret" in v and v["name"] in mounts:
                    read = re.findall(rf"{re.escape(mounts[v['name']])}/([\w.-]+)", " ".join(c.get("command", [])))
                    needed.setdefault(v["secret"]["secretName"], set()).update(read)
    assert needed == {"brownout-token": {"token"}, "brownout-ca": {"mitmproxy-ca.pem", "mitmproxy-ca-cert.pem"}}
    documented = _documented_secrets((REPLICATED / "kustomization.yaml").read_text())
    assert documented == needed


@needs_promtool
def test_prometheus_in_the_cluster_scrapes_every_replica(tmp_path: Path) -> None:
    objs = objects(REPLICATED)
    prom_file = DEPLOY / "prometheus" / "prometheus-kubernetes.yml"
    (job,) = yaml.safe_load(prom_file.read_text())["scrape_configs"]
    assert job["job_name"] == "brownout"  # BrownoutDown's up{job="brownout"}
    (sd,) = job["dns_sd_configs"]
    service = one(objs, "Service", sd["names"][0].split(".")[0])
    # Headless: one A record per replica; not-ready ones too, so a failing replica is up == 0, not gone.
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    brownout = one(objs, "Deployment", "brownout")
    assert selects(service["spec"]["selector"], pod_labels(brownout))
    (port,) = service["spec"]["ports"]
    metrics = config_of(objs, tmp_path).exporters.prometheus
    assert metrics is not None
    assert sd["port"] == named_port(container(brownout, "brownout"), port["targetPort"]) == _listen_port(metrics.listen)
    # A Service-level scrape would read one replica at a time, and double what the pods already report.
    assert not [
        o for o in objs if o["kind"] == "Service" and "prometheus.io/scrape" in o["metadata"].get("annotations", {})
    ]
    result = subprocess.run([PROMTOOL, "check", "config", str(prom_file)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
