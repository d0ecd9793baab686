"""deploy/: compose, Kubernetes, Grafana and collector files parse and reference only files that exist."""

from __future__ import annotations

import json
import re
import tomllib
from collections import defaultdict
from importlib.metadata import requires
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from prometheus_client import CollectorRegistry

from brownout.core.semconv import VERSIONS
from brownout.exporters.metrics import Metrics
from brownout.proxy.config import BrownoutConfig
from brownout.proxy.configload import load_config
from tests.exporters.promsupport import dashboard_exprs, feed

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose" / "docker-compose.yml"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_compose_parses_and_references_existing_files() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert {
        "brownout",
        "redis",
        "otel-collector",
        "jaeger",
        "prometheus",
        "grafana",
        "mock-upstream",
        "demo-agent",
    } <= set(services)
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


def test_the_compose_brownout_keeps_its_state_in_the_compose_redis() -> None:
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    config = load_config(DEPLOY / "compose" / "brownout.yaml")
    assert config.state.backend == "redis"
    url = urlsplit(config.state.resolve_url({}))
    redis = services[url.hostname or ""]
    assert redis["image"].split(":")[0] == "redis" and "--port" not in redis["command"] and url.port == 6379
    assert "redis-cli ping" in " ".join(redis["healthcheck"]["test"])
    assert "ports" not in redis, "the stack's Redis is not published on the host"
    # Started before brownout, not awaited (a plain list, no condition): brownout serves without its store.
    assert url.hostname in services["brownout"]["depends_on"] and isinstance(services["brownout"]["depends_on"], list)


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


def test_the_image_installs_what_the_redis_backend_needs() -> None:
    """The image pip-installs the project from the copied code, so its runtime dependencies come with it."""
    text = (DEPLOY / "Dockerfile").read_text()
    copied = {
        src
        for line in text.splitlines()
        if line.startswith("COPY") and "--from" not in line
        for src in line.split()[1:-1]
    }
    # Every folder of the brownout package, the state backend's (core/state, on the redis client) among them.
    package_dirs = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values()
    )
    assert package_dirs <= copied, package_dirs - copied
    assert re.search(r"^import redis|^from redis[. ]", (ROOT / "core" / "state" / "link.py").read_text(), re.M)
    runtime = {re.split(r"[\s<>=!~;\[]", r)[0].lower() for r in requires("brownout") or [] if "extra ==" not in r}
    assert "redis" in runtime
    assert re.search(r"^redis==", (ROOT / "requirements.lock").read_text(), re.M)
    installs = [line for line in text.splitlines() if "pip install" in line]
    assert any(re.search(r"-c requirements\.lock \.$", line.strip()) for line in installs), installs


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


TARGET_LABELS = {"instance", "job"}  # Prometheus adds them to every series it scrapes


def _exported() -> dict[str, set[str]]:
    """Sample name -> its label names, as brownout exports them after one slice of a chaos run, under either
    version of the GenAI conventions (a panel may read both names of a metric)."""
    out: dict[str, set[str]] = defaultdict(set)
    for semconv in VERSIONS.values():
        metrics = Metrics(registry=CollectorRegistry(), semconv=semconv)
        feed(metrics)
        for family in metrics.registry.collect():
            for sample in family.samples:
                out[sample.name] |= set(sample.labels)
    return out


def test_dashboard_queries_use_exported_metrics_and_their_labels() -> None:
    """Every metric a panel queries is exported, and every label it filters or groups by is one of its labels."""
    exported = _exported()
    for title, expr in dashboard_exprs():
        # Metric names: what is left once label lists (by (...) and {...}) are taken out.
        bare = re.sub(r"\bby\s*\([^)]*\)|\{[^}]*\}", " ", expr)
        used = re.findall(r"\b((?:brownout|gen_ai)_\w+)\b", bare)
        if not used:  # Prometheus' own `up`
            continue
        assert set(used) <= set(exported), f"{title}: {set(used) - set(exported)} not exported"
        for name, selector in re.findall(r"\b((?:brownout|gen_ai)_\w+)\{([^}]*)\}", expr):
            matched = set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", selector))
            assert matched <= exported[name], f"{title}: {name} has no label {matched - exported[name]}"
        labels = set().union(*(exported[n] for n in used)) | TARGET_LABELS
        for grouping in re.findall(r"\bby\s*\(([^)]*)\)", expr):
            by = {g.strip() for g in grouping.split(",")}
            assert by <= labels, f"{title}: grouped by {by - labels}, which {used} do not have"


def test_grafana_dashboard_shows_the_cost() -> None:
    exprs = [(title, expr) for title, expr in dashboard_exprs() if "brownout_cost_usd_total" in expr]
    assert any("sum by (provider, model)" in expr and "USD/hour" in title for title, expr in exprs), exprs
    assert any(expr.startswith("sum(increase(brownout_cost_usd_total") for _, expr in exprs), exprs
    dash = json.loads((DEPLOY / "grafana" / "dashboards" / "brownout.json").read_text())
    units = {p["fieldConfig"]["defaults"].get("unit") for p in dash["panels"] if "cost" in p["title"].lower()}
    assert units == {"currencyUSD"}


def test_the_dashboard_shows_when_an_experiments_phase_was_on() -> None:
    """A panel of the phases over time, and an annotation marking them on every panel."""
    dash = json.loads((DEPLOY / "grafana" / "dashboards" / "brownout.json").read_text())
    panel = next(p for p in dash["panels"] if p["title"].startswith("Experiment phases"))
    assert panel["type"] == "state-timeline"
    assert panel["targets"][0]["expr"] == "max by (experiment, phase) (brownout_experiment_phase)"
    [annotation] = [a for a in dash["annotations"]["list"] if "brownout_experiment_phase" in a.get("expr", "")]
    assert annotation["enable"] and "{{phase}}" in annotation["titleFormat"]
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dash["panels"] if p is not panel)
    assert panel["gridPos"]["y"] == bottom  # its own row, below the rest


def test_the_dashboard_shows_the_shared_state_store() -> None:
    """A fleet on Redis: whether every replica reaches the store, and which calls fail, by operation."""
    exprs = [expr for title, expr in dashboard_exprs() if title.startswith("Shared state store")]
    assert "min(brownout_state_store_up)" in exprs  # the lowest replica's view: 0 when any one is cut off
    assert any(e.startswith("sum by (op) (rate(brownout_state_errors_total") for e in exprs), exprs


def test_the_dashboard_reads_a_fleet_as_one_and_replica_by_replica() -> None:
    """Several replicas: each figure aggregates over them, and two panels draw one line per replica."""
    exprs = dashboard_exprs()
    aggregation = re.compile(r"\b(?:sum|max|min|count)\s*(?:by\s*\([^)]*\)\s*)?\(")
    for title, expr in exprs:
        metrics = re.findall(r"\b(?:brownout|gen_ai)_\w+", re.sub(r"\bby\s*\([^)]*\)|\{[^}]*\}", " ", expr))
        assert len(aggregation.findall(expr)) >= len(metrics), f"{title}: a series per replica in {expr}"
    per_replica = {m for _, e in exprs if re.search(r"\bby\s*\(instance\)", e) for m in re.findall(r"brownout_\w+", e)}
    assert {"brownout_requests_total", "brownout_faults_injected_total"} <= per_replica
