"""Load brownout into mitmproxy's own tools: `mitmdump -s proxy/mitm_script.py --set brownout_config=chaos.yaml`.

mitmproxy imports this file by path, as a top-level module, with this directory put first on
sys.path (and, in mitmproxy 12.2, left there). brownout must be installed (`pip install .`):
the addon is imported from the `brownout` package, never from sibling files.
"""

from __future__ import annotations

import os
import sys

__all__ = ["addons"]

_here = os.path.dirname(os.path.abspath(__file__))
# don't let proxy/config.py, proxy/certs.py... shadow top-level modules for every later import
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

from brownout.proxy.addon import Brownout  # noqa: E402

addons = [Brownout()]
