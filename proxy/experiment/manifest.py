"""Run manifest: seed, config texts and hashes, brownout version, decision log; and decision-log comparison."""

from __future__ import annotations

import hashlib
import json
import logging
import platform
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from brownout.core.config import BASE_DIR
from brownout.invariants.custom import callable_beside
from brownout.proxy.config import BrownoutConfig
from brownout.proxy.configload import ConfigError, parse_config, yaml_data
from brownout.proxy.experiment.config import ExperimentConfig, ExperimentError, PhaseConfig

__all__ = [
    "DECISIONS_FILE",
    "MANIFEST_FILE",
    "ResolvedPhase",
    "brownout_version",
    "build_manifest",
    "compare_decisions",
    "read_decisions",
    "resolve_phases",
    "sha256",
    "write_decisions",
]

logger = logging.getLogger(__name__)

MANIFEST_FILE = "manifest.json"
DECISIONS_FILE = "decisions.jsonl"
MANIFEST_VERSION = 1


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def brownout_version() -> str:
    try:
        return metadata.version("brownout")
    except metadata.PackageNotFoundError:
        return "0+unknown"


@dataclass(frozen=True)
class ResolvedPhase:
    """A phase with its validated chaos config and the exact text it came from."""

    phase: PhaseConfig
    config: BrownoutConfig
    source: str  # the config path, "inline" or "baseline"
    text: str

    @property
    def digest(self) -> str:
        return sha256(self.text)


def _parse(text: str, source: str, seed: int, invariants: list[dict[str, Any]], base_dir: Path) -> BrownoutConfig:
    """The phase's config; its relative paths resolve against `base_dir` (its file's directory)."""
    try:
        parse_config(text, source)  # errors with the phase file's own line numbers
        data = yaml_data(text) or {}
        # One seed for the whole experiment (the phase file's own is overridden); shared invariants first.
        data["seed"] = seed
        data["invariants"] = [*invariants, *(data.get("invariants") or [])]
        return BrownoutConfig.model_validate(data, context={BASE_DIR: str(base_dir)})
    except ConfigError as e:
        raise ExperimentError(str(e)) from e
    except ValueError as e:  # pydantic.ValidationError: a shared invariant is invalid
        raise ExperimentError(f"{source}: invariants: {e}") from e


def resolve_phases(
    config: ExperimentConfig, base_dir: Path, seed: int, texts: dict[str, dict[str, str]] | None = None
) -> list[ResolvedPhase]:
    """Load every phase's chaos config; `texts` (name -> {source, text}) replays stored configs instead of files."""
    out = []
    shared = [_beside(inv, base_dir) for inv in config.invariants]  # the experiment file's paths
    for phase in config.phases:
        if texts is not None and phase.name in texts:
            source, text = texts[phase.name]["source"], texts[phase.name]["text"]
        elif phase.config is not None:
            path = (base_dir / phase.config).resolve()
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as e:
                raise ExperimentError(f"phase {phase.name!r}: cannot read config {path}: {e.strerror or e}") from e
            source = str(path)
        elif phase.rules:
            source, text = "inline", yaml.safe_dump({"rules": phase.rules}, sort_keys=False)
        else:
            source, text = "baseline", ""
        here = Path(source).parent if source not in ("inline", "baseline") else base_dir
        cfg = _parse(text, f"phase {phase.name} ({source})", seed, shared, here)
        out.append(ResolvedPhase(phase, cfg, source, text))
    return out


def _beside(invariant: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """A shared invariant with its custom file resolved against the experiment file's directory."""
    spec = invariant.get("callable")
    if invariant.get("type") != "custom" or not isinstance(spec, str):
        return invariant
    return {**invariant, "callable": callable_beside(spec, str(base_dir))}


def build_manifest(
    *,
    experiment_text: str,
    experiment_path: str,
    base_dir: Path,
    seed: int,
    phases: list[ResolvedPhase],
    decisions: list[dict[str, Any]],
    argv: list[str] | None = None,
) -> dict[str, Any]:
    """Everything `brownout experiment replay` needs to run the same experiment with the same decisions."""
    return {
        "manifest_version": MANIFEST_VERSION,
        "created_at": time.time(),
        "brownout_version": brownout_version(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "argv": list(argv if argv is not None else sys.argv),
        "seed": seed,
        "experiment": {
            "path": experiment_path,
            "base_dir": str(base_dir),
            "sha256": sha256(experiment_text),
            "text": experiment_text,
        },
        "phases": [{"name": p.phase.name, "source": p.source, "sha256": p.digest, "text": p.text} for p in phases],
        "decision_log": {
            "file": DECISIONS_FILE,
            "count": len(decisions),
            "sha256": sha256("".join(_line(d) for d in decisions)),
        },
    }


def _line(d: dict[str, Any]) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":")) + "\n"


def write_decisions(path: Path, decisions: list[dict[str, Any]]) -> None:
    path.write_text("".join(_line(d) for d in decisions), encoding="utf-8")


def read_decisions(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _sequences(decisions: list[dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    # Per session, in order: decisions are seeded per (rule, session, match index), so a session's
    # sequence is reproducible however runs interleave; exchange ids and times are not.
    seqs: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for d in decisions:
        seqs[str(d.get("session"))].append((str(d.get("rule")), str(d.get("outcome"))))
    return seqs


def compare_decisions(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """Compare two decision logs session by session: {identical, sessions, mismatches: [...]}."""
    sa, sb = _sequences(a), _sequences(b)
    mismatches = []
    for session in sorted(set(sa) | set(sb)):
        x, y = sa.get(session, []), sb.get(session, [])
        if x != y:
            at = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y)))
            mismatches.append(
                {
                    "session": session,
                    "index": at,
                    "original": x[at : at + 1],
                    "replay": y[at : at + 1],
                    "original_len": len(x),
                    "replay_len": len(y),
                }
            )
    return {
        "identical": not mismatches,
        "sessions": len(set(sa) | set(sb)),
        "fired_original": sum(1 for d in a if d.get("outcome") == "fired"),
        "fired_replay": sum(1 for d in b if d.get("outcome") == "fired"),
        "mismatches": mismatches,
    }
