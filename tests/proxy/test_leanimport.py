"""proxy/leanimport.py: brownout's own process imports only the mitmproxy addons its master runs, and
mitmproxy.addons still answers every name as before."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

REPORT = """
import asyncio, sys
from brownout.proxy.leanimport import PACKAGE, defer_mitmproxy_addons

assert defer_mitmproxy_addons() is True
assert defer_mitmproxy_addons() is False  # registered already: nothing to do

from brownout.proxy.master import PROXY_CORE, BrownoutMaster
from mitmproxy import options


async def build():
    return BrownoutMaster(options.Options())


master = asyncio.run(build())
package = sys.modules[PACKAGE]
loaded = sorted(m.rsplit(".", 1)[1] for m in sys.modules if m.startswith(PACKAGE + "."))
print("init ran:", "default_addons" in vars(package))
print("loaded:", " ".join(loaded))
print("core loaded:", all(type(a) in {type(b) for b in master.addons.chain} for a in [c() for c in PROXY_CORE]))
from mitmproxy import addons
print("attribute:", addons.anticache is sys.modules[PACKAGE + ".anticache"])
print("default addons:", len(addons.default_addons()), "init ran:", "default_addons" in vars(package))
"""


def test_the_master_loads_its_addon_modules_alone_and_the_package_still_answers_every_name() -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(REPORT)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in done.stdout.strip().splitlines())
    assert lines["init ran"] == "False"
    loaded = set(lines["loaded"].split())
    assert {"proxyserver", "tlsconfig", "core"} <= loaded
    assert not loaded & {"onboarding", "onboardingapp", "blocklist", "clientplayback", "maplocal", "save"}
    assert lines["core loaded"] == "True"
    # A later use of the package is what it always was: an addon module by name, and default_addons().
    assert lines["attribute"] == "True"
    assert lines["default addons"] == "31 init ran: True"


def test_mitmproxy_addons_init_only_imports_its_modules_and_defines_default_addons() -> None:
    """The layout the deferral relies on (mitmproxy 12.2): a change here must be looked at."""
    spec = importlib.util.find_spec("mitmproxy.addons")
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text())
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            assert node.module == "mitmproxy.addons", ast.dump(node)
        else:
            assert isinstance(node, ast.FunctionDef) and node.name == "default_addons", ast.dump(node)
