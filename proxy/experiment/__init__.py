"""Chaos experiments: run an agent under phases of chaos, check steady state, analyse, report, gate."""

from __future__ import annotations

from brownout.proxy.experiment.config import ExperimentConfig, ExperimentError, load_experiment, parse_experiment

__all__ = ["ExperimentConfig", "ExperimentError", "load_experiment", "parse_experiment"]
