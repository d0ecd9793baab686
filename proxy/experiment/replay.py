"""Re-run a recorded experiment with the same seed and the same config texts, then compare decision logs."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from brownout.proxy.experiment.api import Outcome, run_experiment
from brownout.proxy.experiment.config import ExperimentError
from brownout.proxy.experiment.manifest import (
    DECISIONS_FILE,
    MANIFEST_FILE,
    brownout_version,
    compare_decisions,
    read_decisions,
)
from brownout.proxy.experiment.progress import RunProgress

__all__ = ["REPLAY_FILE", "replay_experiment"]

logger = logging.getLogger(__name__)

REPLAY_FILE = "replay.json"


def replay_experiment(
    run_dir: Path, *, out_dir: Path | None = None, progress: RunProgress | None = None, confdir: str | None = None
) -> tuple[Outcome, dict[str, Any]]:
    """Replay the experiment recorded in `run_dir`; returns the new outcome and the decision-log comparison.

    Decisions are seeded per (seed, rule, session, match index) and sessions are named by phase
    and run, so the same agent behaviour yields the same decisions. Counters with `scope: global`
    (first/after/every across sessions) also depend on arrival order: replay with concurrency 1
    for those to match exactly.
    """
    try:
        manifest = json.loads((run_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ExperimentError(f"{run_dir}: no readable {MANIFEST_FILE}: {e}") from e
    if manifest.get("brownout_version") != brownout_version():
        logger.warning(
            "recorded with brownout %s, replaying with %s", manifest.get("brownout_version"), brownout_version()
        )
    exp = manifest["experiment"]
    texts = {p["name"]: {"source": p["source"], "text": p["text"]} for p in manifest["phases"]}
    target = out_dir or (run_dir / "replay")
    outcome = run_experiment(
        exp["text"],
        source=exp["path"],
        base_dir=Path(exp["base_dir"]),
        out_dir=target,
        seed=int(manifest["seed"]),
        phase_texts=texts,
        progress=progress,
        confdir=confdir,
    )
    original = read_decisions(run_dir / DECISIONS_FILE)
    comparison = compare_decisions(original, outcome.decisions)
    (target / REPLAY_FILE).write_text(json.dumps(comparison, indent=2) + "\n", encoding="utf-8")
    return outcome, comparison
