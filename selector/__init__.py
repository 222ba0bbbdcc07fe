"""Decisions: catalogs, the rule engine, settings, install, rendering and the CLI."""

__version__ = "0.3.0"
