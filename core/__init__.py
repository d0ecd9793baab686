"""brownout's shared model, the bottom layer: exchange, wire formats, span model, guard, config base.

Everything above (faults, invariants, exporters, then the proxy) imports from here; nothing here
imports from them.
"""
