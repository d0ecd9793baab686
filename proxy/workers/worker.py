"""One worker of `brownout run --workers N`: `brownout run` on a shared port, reporting to its supervisor.

Started by the supervisor as `python -m brownout.proxy.workers.worker SPEC` (proxy/workers/spec.py).
It serves exactly as `brownout run` does (proxy/serve.py: SIGTERM drains, a second one cuts), on
the fleet's port with SO_REUSEPORT, with its own /metrics and control API on free loopback ports
(the supervisor's endpoints read and drive them) and its own JSONL files. It prints nothing of its
own at start or stop: the supervisor prints the start-up lines and the fleet's summary once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time

from brownout.proxy.embed import ProxyHandle, ProxyStartError
from brownout.proxy.endpoints import endpoint_env
from brownout.proxy.serve import serve_until_signal
from brownout.proxy.summary import summarize
from brownout.proxy.workers.spec import WorkerChannel, WorkerSpec
from brownout.proxy.workers.summaries import summary_counts

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    spec = WorkerSpec.from_json((sys.argv[1:] if argv is None else argv)[0])
    channel = WorkerChannel(spec.channel_fd)
    threading.Thread(target=_stop_with_supervisor, args=(channel,), name="brownout-supervisor", daemon=True).start()
    served: list[ProxyHandle] = []
    started = time.monotonic()

    def ready(handle: ProxyHandle) -> None:
        served.append(handle)
        env = endpoint_env(handle)
        channel.send(
            "ready",
            pid=os.getpid(),
            metrics_url=env.get("BROWNOUT_METRICS_URL"),
            control_url=env.get("BROWNOUT_CONTROL_URL"),
        )

    try:
        asyncio.run(
            serve_until_signal(
                ready,
                config_path=spec.config_path,
                mode=spec.mode,
                listen=spec.listen,
                confdir=spec.confdir,
                extra_options=spec.options,
                reuse_port=True,
            )
        )
    except ProxyStartError as e:
        print(f"brownout: worker {spec.index}: cannot start the proxy: {e}", file=sys.stderr, flush=True)
        return 1
    if served:
        summary = summarize(served[0].addon, duration_s=time.monotonic() - started)
        channel.send("stopped", counts=summary_counts(summary))
    return 0


def _stop_with_supervisor(channel: WorkerChannel) -> None:
    """The supervisor is gone (even killed with SIGKILL): stop as on SIGTERM, draining, rather than serve on."""
    channel.wait_closed()
    os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    sys.exit(main())
