"""Loads the benchc pytest plugin for this checkout (a no-op when the entry point already did)."""

pytest_plugins = ["benchc.plugin"]
