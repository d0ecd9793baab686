"""Load brownout into mitmproxy's own tools: `mitmdump -s proxy/mitm_script.py --set brownout_config=chaos.yaml`.

mitmproxy imports this file by path, as a top-level module, with this directory put first on
sys.path (and, in mitmproxy 12.2, left there). The imports below must therefore resolve the
`proxy` package, not sibling files such as `config.py` taken as top-level modules.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["addons"]

logger = logging.getLogger(__name__)

_here = os.path.dirname(os.path.abspath(__file__))
# don't let proxy/config.py, proxy/certs.py... shadow top-level modules for every later import
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
try:
    import proxy.addon  # noqa: F401  (the installed package)
except ImportError:
    # a plain checkout, not installed: the repository root is the parent of this directory
    sys.path.insert(0, os.path.dirname(_here))

from proxy.addon import Brownout  # noqa: E402

addons = [Brownout()]
