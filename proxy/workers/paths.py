"""Each worker's own JSONL logs: `violations.jsonl` becomes `violations.w0.jsonl`, `violations.w1.jsonl`, ...

Workers never share a log file. Appends from several processes to one file stay whole lines only
while every batch goes out in one write(2) on a local file system; a batch larger than the writer's
buffer is several writes, and NFS promises nothing. A file per worker costs no coordination, keeps
the writer, its rotation handling and its drop counting exactly as they are in one process, and a
shipper reads them all with one glob (`violations.w*.jsonl`).
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

__all__ = ["with_worker_paths", "worker_log_path"]

_JSONL_FIELDS = ("path", "decisions_path", "exchanges_path")


def worker_log_path(path: str, index: int) -> str:
    """`path` with `.w{index}` before its suffix (or at its end when it has none)."""
    p = PurePath(path)
    return str(p.with_name(f"{p.stem}.w{index}{p.suffix}"))


def with_worker_paths(config: Any, worker: str) -> Any:
    """`config` with its JSONL logs moved to worker `worker`'s own files; unchanged for "" (no worker)."""
    if not worker:
        return config
    index = int(worker)
    jsonl = config.exporters.jsonl
    update = {f: worker_log_path(getattr(jsonl, f), index) for f in _JSONL_FIELDS if getattr(jsonl, f)}
    if not update:
        return config
    exporters = config.exporters.model_copy(update={"jsonl": jsonl.model_copy(update=update)})
    return config.model_copy(update={"exporters": exporters})
