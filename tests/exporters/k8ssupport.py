"""Shared helpers for the deploy/kubernetes tests: the manifests as objects, and what they point at."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "KUBERNETES",
    "REPLICATED",
    "container",
    "documents",
    "kustomizations",
    "manifest_files",
    "named_port",
    "objects",
    "one",
    "pod_labels",
    "pod_spec",
    "pods",
    "selects",
]

KUBERNETES = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
REPLICATED = KUBERNETES / "replicated"
_WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}


def kustomizations() -> list[Path]:
    return sorted(KUBERNETES.rglob("kustomization.yaml"))


def manifest_files(directory: Path | None = None) -> list[Path]:
    """Every Kubernetes manifest (not kustomization.yaml) under `directory`, default all of deploy/kubernetes."""
    root = directory or KUBERNETES
    files = root.glob("*.yaml") if directory is not None else root.rglob("*.yaml")
    return sorted(f for f in files if f.name != "kustomization.yaml")


def documents(path: Path) -> list[dict[str, Any]]:
    """The objects of one manifest file."""
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def objects(directory: Path) -> list[dict[str, Any]]:
    """The objects of the manifests directly in `directory`."""
    return [d for f in manifest_files(directory) for d in documents(f)]


def one(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    if obj["kind"] in _WORKLOADS:
        spec: dict[str, Any] = obj["spec"]["template"]["spec"]
        return spec
    return obj["spec"] if obj["kind"] == "Pod" else None


def pod_labels(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj["spec"]["template"]["metadata"] if obj["kind"] in _WORKLOADS else obj["metadata"]
    return dict(meta.get("labels", {}))


def container(obj: dict[str, Any], name: str) -> dict[str, Any]:
    spec = pod_spec(obj)
    assert spec is not None, obj["kind"]
    return next(c for c in spec["containers"] if c["name"] == name)


def named_port(c: dict[str, Any], port: int | str) -> int:
    """A container's port number from a probe's or a Service's port (a name or a number)."""
    if isinstance(port, int):
        assert port in {p["containerPort"] for p in c["ports"]}, f"{c['name']} does not expose {port}"
        return port
    matches = [p["containerPort"] for p in c["ports"] if p.get("name") == port]
    assert matches, f"{c['name']} has no port named {port}"
    return int(matches[0])


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def pods(objs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    return (o for o in objs if pod_spec(o) is not None)
