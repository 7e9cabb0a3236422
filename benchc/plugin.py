"""The benchc pytest plugin (options, session model fixture, cell and model gates).

Registered both by the root ``conftest.py`` and as the ``pytest11`` entry point ``benchc.plugin``;
the shared name keeps pytest from loading it twice.
"""
