"""`brownout run --workers N`: several processes on one port, one /metrics, one control API, one summary.

run.py is the supervising process (the command); supervisor.py starts, restarts and stops the worker
processes (worker.py), which talk back over spec.py's channel; metrics.py and control.py are the
supervisor's /metrics and control API over the workers' own; paths.py gives each worker its own logs.
"""
