"""Importing brownout changes nothing process-wide in the program that imports it.

An application or a test suite embeds brownout (`running_proxy`, the pytest plugin); a module that
switched off prometheus_client's `_created` series, configured logging, set a signal handler or
started a thread at import would change that program behind its back. Each check runs in a fresh
interpreter: the first lists the third-party modules brownout's import brings in; the second
imports those first (what they do at import is theirs: ruamel.yaml adds warning filters for its
own warnings), takes a snapshot of process-wide state, imports every brownout module, and compares.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Every module of the installed package; the two entry points that act when imported (mitmproxy's
# `-s` script builds an addon, `__main__` runs the CLI) are not modules a program imports.
IMPORT_ALL = """
import importlib, pkgutil
SCRIPTS = {"brownout.proxy.__main__", "brownout.proxy.mitm_script"}
def import_brownout():
    for pkg in ("brownout.core", "brownout.faults", "brownout.invariants", "brownout.exporters", "brownout.proxy"):
        importlib.import_module(pkg)
        for info in pkgutil.walk_packages(importlib.import_module(pkg).__path__, pkg + "."):
            if info.name not in SCRIPTS:
                importlib.import_module(info.name)
"""

LIST_DEPENDENCIES = (
    IMPORT_ALL
    + """
import json, sys
before = set(sys.modules)
import_brownout()
print(json.dumps([m for m in sys.modules if m not in before and m.split(".")[0] != "brownout"]))
"""
)

SNAPSHOT = (
    IMPORT_ALL
    + """
import asyncio, atexit, faulthandler, gc, importlib, json, locale, logging, os, signal, socket, sys, threading, warnings

def created_series():
    import prometheus_client
    registry = prometheus_client.CollectorRegistry()
    prometheus_client.Counter("probe", "A counter of the host program.", registry=registry).inc()
    return "probe_created" in prometheus_client.generate_latest(registry).decode()

def state():
    import prometheus_client
    from opentelemetry import metrics, propagate, trace
    umask = os.umask(0o022)
    os.umask(umask)
    loggers = {
        name: [lg.level, [type(h).__name__ for h in lg.handlers], lg.propagate, lg.disabled]
        for name, lg in logging.root.manager.loggerDict.items()
        if isinstance(lg, logging.Logger) and (lg.level or lg.handlers or not lg.propagate or lg.disabled)
    }
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGCHLD, signal.SIGUSR1)
    return {
        "prometheus _created series": created_series(),
        "prometheus default registry": sorted(m.name for m in prometheus_client.REGISTRY.collect()),
        "logging root": [logging.root.level, [type(h).__name__ for h in logging.root.handlers]],
        "logging disabled below": logging.root.manager.disable,
        "loggers configured": loggers,
        "warning filters": [repr(f) for f in warnings.filters],
        "signal handlers": {s.name: repr(signal.getsignal(s)) for s in signals},
        "excepthooks": [repr(sys.excepthook), repr(threading.excepthook)],
        "gc": [gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()],
        "environment": dict(os.environ),
        "interpreter": [sys.getrecursionlimit(), sys.getswitchinterval(), socket.getdefaulttimeout()],
        "sys.path": list(sys.path),
        "import hooks": [repr(type(m)) for m in sys.meta_path] + [repr(h) for h in sys.path_hooks],
        "threads": sorted(t.name for t in threading.enumerate()),
        "atexit callbacks": atexit._ncallbacks(),
        "faulthandler": faulthandler.is_enabled(),
        "locale": locale.setlocale(locale.LC_ALL, None),
        "umask and cwd": [umask, os.getcwd()],
        "stdio": [repr(sys.stdout), repr(sys.stderr)],
        "asyncio policy": type(asyncio.get_event_loop_policy()).__name__,
        "opentelemetry globals": [
            type(trace.get_tracer_provider()).__name__,
            type(metrics.get_meter_provider()).__name__,
            type(propagate.get_global_textmap()).__name__,
        ],
        "mitmproxy.ctx": type(sys.modules["mitmproxy.ctx"]).__name__ if "mitmproxy.ctx" in sys.modules else None,
    }

for name in json.loads(open(sys.argv[1], encoding="utf-8").read()):
    try:
        importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a module that only imports as part of its package: its parent did
        pass
before = state()
import_brownout()
after = state()
print(json.dumps({key: [before[key], after[key]] for key in before if before[key] != after[key]}, default=repr))
"""
)


def _run(code: str, *args: str, cwd: Path) -> str:
    # cwd: a directory with nothing importable, so the installed package is what gets imported.
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.slow
def test_importing_every_brownout_module_changes_nothing_process_wide(tmp_path: Path) -> None:
    dependencies = tmp_path / "dependencies.json"
    dependencies.write_text(_run(LIST_DEPENDENCIES, cwd=tmp_path), encoding="utf-8")
    assert {"prometheus_client", "mitmproxy"} <= set(json.loads(dependencies.read_text(encoding="utf-8")))
    changed = json.loads(_run(SNAPSHOT, str(dependencies), cwd=tmp_path))
    assert changed == {}, json.dumps(changed, indent=1)
