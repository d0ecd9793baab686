"""Staging experiments: timed phases switched on across a running fleet, the steady state read from Prometheus.

`config` is the file's shape, `targets` reach the fleet (its store or its control APIs), `promql`
asks Prometheus, `figures` are brownout's own numbers as PromQL, `runner` runs the phases, and
`report` turns what happened into the report documents.
"""
