"""Executors beyond one process: the grid's chunks computed elsewhere, stored by one writer.

The unit of work is the results store's chunk (run key, entry, first row), computed by
:meth:`benchc.suite.run.SuiteRun.compute_chunk` whoever computes it, so a chunk's bytes do not
depend on where it ran. :mod:`benchc.engine.leases` hands chunks out and takes lost ones back,
:mod:`benchc.engine.devices` names what besides the run key decides a chunk's bits,
:mod:`benchc.engine.ray` runs the chunks on a Ray cluster (the ``benchc[ray]`` extra), and
:mod:`benchc.engine.stored` gates on a finished store without a model (``--from-store``).

The suite reaches the engine only through the executor registry (``benchc.executors`` entry
points ``ray`` and ``stored``, :mod:`benchc.registry`); it never imports this package.
"""

from benchc.registry import ExtensionError


class EngineError(ExtensionError):
    """A distributed run cannot go on (actors disagree, a chunk keeps failing): one line."""
