"""Decisions: catalogs, the rule engine, settings, install, rendering and the CLI."""
