"""report.json: the whole experiment in one stable, versioned document (schema_version 1)."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from brownout.proxy.experiment.model import ExperimentResult

__all__ = ["SCHEMA_VERSION", "build_report", "load_report", "report_header", "write_json"]

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1


def build_report(
    result: ExperimentResult,
    analysis: dict[str, Any],
    hypotheses: list[dict[str, Any]],
    gate: dict[str, Any],
    status: str,
    exit_code: int,
) -> dict[str, Any]:
    """The report document; every other report format is rendered from it."""
    manifest = {k: v for k, v in result.manifest.items() if k not in ("experiment", "phases")}
    if "experiment" in result.manifest:
        manifest["experiment"] = {k: v for k, v in result.manifest["experiment"].items() if k != "text"}
        manifest["phases"] = [{k: v for k, v in p.items() if k != "text"} for p in result.manifest.get("phases", [])]
    return {
        **report_header(result, status, exit_code),
        **analysis,
        "hypotheses": hypotheses,
        "gate": gate,
        "services": result.services,
        "runs": [r.to_dict() for r in result.runs],
        "manifest": manifest,
    }


def report_header(result: ExperimentResult, status: str, exit_code: int) -> dict[str, Any]:
    """The keys every report.json starts with: what ran, how it ended, when."""
    return {
        "schema_version": SCHEMA_VERSION,
        "brownout_version": result.manifest.get("brownout_version"),
        "experiment": result.name,
        "seed": result.seed,
        "status": status,
        "exit_code": exit_code,
        "abort_reason": result.abort_reason,
        "interrupted": result.interrupted,
        "error": result.error,
        "started_at": result.started_at,
        "finished_at": result.finished_at,
        "duration_s": max(0.0, result.finished_at - result.started_at),
    }


def _clean(value: Any) -> Any:
    # JSON has no NaN/Infinity: a non-finite number becomes null rather than invalid JSON.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def write_json(path: Path, report: dict[str, Any]) -> None:
    path.write_text(json.dumps(_clean(report), indent=2, sort_keys=False, allow_nan=False) + "\n", encoding="utf-8")


def load_report(path: str | Path) -> dict[str, Any]:
    """Read a report.json (or the directory holding one); raises ValueError for an unknown schema."""
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    data = json.loads(p.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{p}: not a brownout report (schema_version {SCHEMA_VERSION} expected)")
    return data
