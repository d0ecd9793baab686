"""deploy/: compose, Kubernetes, Grafana and collector files parse and reference only files that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from brownout.proxy.config import BrownoutConfig
from brownout.proxy.configload import load_config

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose" / "docker-compose.yml"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_compose_parses_and_references_existing_files() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert {"brownout", "otel-collector", "jaeger", "prometheus", "grafana", "mock-upstream", "demo-agent"} <= set(
        services
    )
    assert services["demo-agent"]["profiles"] == ["demo"] and services["mock-upstream"]["profiles"] == ["demo"]
    base = COMPOSE.parent
    build = services["brownout"]["build"]
    assert (base / build["context"] / build["dockerfile"]).is_file()
    checked = 0
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith((".", "/")):
                assert (base / source).exists(), f"{name}: {source} does not exist"
                checked += 1
            else:
                assert source in compose.get("volumes", {}), f"{name}: undeclared named volume {source}"
        for dep in service.get("depends_on", []):
            assert dep in services, f"{name} depends on unknown service {dep}"
    assert checked >= 6


def test_in_container_paths_match_the_configs() -> None:
    """The files each container is told to read are the ones compose mounts."""
    compose = yaml.safe_load(COMPOSE.read_text())
    s = compose["services"]
    mounts = {name: {v.split(":")[1] for v in svc.get("volumes", [])} for name, svc in s.items()}
    assert (
        "/etc/brownout/brownout.yaml" in mounts["brownout"]
        and "/etc/brownout/brownout.yaml" in s["brownout"]["command"]
    )
    assert (
        "--config=/etc/otelcol/config.yaml" in s["otel-collector"]["command"]
        and "/etc/otelcol/config.yaml" in mounts["otel-collector"]
    )
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    assert all(f"/etc/prometheus/{f}" in mounts["prometheus"] for f in prom["rule_files"])
    provider = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "dashboards" / "dashboards.yml").read_text())
    assert provider["providers"][0]["options"]["path"] in mounts["grafana"]
    targets = {t for job in prom["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]}
    assert "brownout:9464" in targets and "otel-collector:8889" in targets


def test_brownout_configs_in_deploy_validate() -> None:
    cfg = load_config(DEPLOY / "compose" / "brownout.yaml")
    assert cfg.exporters.prometheus.listen == "0.0.0.0:9464"
    assert cfg.exporters.otlp.endpoint == "http://otel-collector:4318"
    cm = next(d for d in _docs(DEPLOY / "kubernetes" / "configmap.yaml") if d["kind"] == "ConfigMap")
    BrownoutConfig.model_validate(yaml.safe_load(cm["data"]["brownout.yaml"]))


def test_collector_pipelines_use_defined_components() -> None:
    col = yaml.safe_load((DEPLOY / "compose" / "otel-collector.yaml").read_text())
    for pipeline in col["service"]["pipelines"].values():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in col.get(kind, {}) or component in col.get("connectors", {}), component


def test_dockerfile_copies_existing_paths() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    for line in text.splitlines():
        if line.startswith("COPY") and "--from" not in line:
            for src in line.split()[1:-1]:
                assert (ROOT / src).exists(), src


def test_the_image_installs_runtime_dependencies_only() -> None:
    # The lock also pins the test tools: in the image it may constrain versions, never be installed.
    installs = [line for line in (DEPLOY / "Dockerfile").read_text().splitlines() if "pip install" in line]
    assert installs
    for line in installs:
        assert not re.search(r"(^|\s)(-r|--requirement)[\s=]", line) and "[test]" not in line, line


def test_kubernetes_manifests_parse_and_reference_what_exists() -> None:
    k8s = DEPLOY / "kubernetes"
    kustom = yaml.safe_load((k8s / "kustomization.yaml").read_text())
    assert all((k8s / r).is_file() for r in kustom["resources"])
    objects = [d for f in sorted(k8s.glob("*.yaml")) if f.name != "kustomization.yaml" for d in _docs(f)]
    names = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert {("Deployment", "brownout"), ("Service", "brownout"), ("ConfigMap", "brownout-config")} <= names
    pods = []
    for o in objects:
        spec = o["spec"]["template"]["spec"] if o["kind"] == "Deployment" else o["spec"] if o["kind"] == "Pod" else None
        if spec is None:
            continue
        pods.append(o)
        annotations = (o["spec"]["template"]["metadata"] if o["kind"] == "Deployment" else o["metadata"])["annotations"]
        assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == "9464"
        volumes = {v["name"]: v for v in spec["volumes"]}
        for c in spec["containers"]:
            for m in c.get("volumeMounts", []):
                assert m["name"] in volumes
                assert "subPath" not in m, "subPath mounts never see ConfigMap updates (hot reload)"
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ("Secret", ref["name"]) in names
        for v in volumes.values():
            if "configMap" in v:
                assert ("ConfigMap", v["configMap"]["name"]) in names
    assert any(o["kind"] == "Pod" and len(o["spec"]["containers"]) == 2 for o in pods), "sidecar example"


def test_grafana_dashboard_and_datasources() -> None:
    dash = json.loads((DEPLOY / "grafana" / "dashboards" / "brownout.json").read_text())
    ds = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "datasources" / "datasources.yml").read_text())
    uids = {d["uid"] for d in ds["datasources"]}
    assert {"prometheus", "jaeger"} <= uids
    violations = next(p for p in dash["panels"] if p["title"].startswith("Violations"))
    links = violations["fieldConfig"]["defaults"]["links"]
    assert any("/search?service=brownout" in link["url"] and "jaeger_url" in link["url"] for link in links)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    assert re.search(
        r"exemplarTraceIdDestinations",
        (DEPLOY / "grafana" / "provisioning" / "datasources" / "datasources.yml").read_text(),
    )
