"""Breaking-point search: the fault intensity at which an agent stops meeting its goal, with an interval.

`brownout experiment search exp.yaml` runs the file's `search:` (config.py): bracket and bisect the
parameter with a sequential test per level (algorithm.py, sequential.py), fit a dose-response curve to
every run (fit.py), and report the breaking point with its confidence interval (report*.py, chart.py).
"""
