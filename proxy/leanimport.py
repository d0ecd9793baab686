"""brownout's own process loads only the mitmproxy addons it runs.

Importing any one of mitmproxy's addon modules first runs the package's `__init__`, which imports all
35 of them (the onboarding web app with Flask, LDAP authentication, the block list's filter grammar,
...): about 0.2 s of every start, for modules brownout's master never loads (proxy/master.py). In a
process that is brownout's own (`brownout run`, a worker), `defer_mitmproxy_addons` registers the
package without running its `__init__`; each addon module still imports as itself, and the first use
of a name the `__init__` defines (`default_addons`) runs it then, so nothing behaves differently.

Never at import: a program that embeds brownout keeps its own imports as they were. Pinned to the
layout of mitmproxy 12.2 (a package whose `__init__` only imports its submodules and defines
`default_addons`); tests/proxy/test_leanimport.py fails if that changes.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any

__all__ = ["defer_mitmproxy_addons"]

PACKAGE = "mitmproxy.addons"


def defer_mitmproxy_addons() -> bool:
    """Register mitmproxy.addons without running its __init__ yet; False when it is imported already."""
    if PACKAGE in sys.modules:
        return False
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    package = importlib.util.module_from_spec(spec)

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}")
        if importlib.util.find_spec(f"{PACKAGE}.{name}") is not None:  # an addon module: that one alone
            return importlib.import_module(f"{PACKAGE}.{name}")
        del package.__getattr__  # a name the __init__ defines (default_addons): run it now, once
        assert spec.loader is not None
        spec.loader.exec_module(package)
        return getattr(package, name)

    package.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[PACKAGE] = package
    parent: ModuleType = importlib.import_module("mitmproxy")
    parent.addons = package  # type: ignore[attr-defined]
    return True
