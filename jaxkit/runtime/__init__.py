"""The runtime: jaxlib's PjRt clients and devices, device arrays, compilation and execution.

With ``jaxkit/interpreters/mlir.py`` this package is the only code that imports jaxlib, so a
jaxlib upgrade touches these two places. ``pjrt`` (clients, devices, buffers, compile,
execute), ``array`` (the immutable device ``Array``), ``multi_device`` (replicated programs over
several devices and processes), ``gpu`` (the CUDA plugin, found without importing jax).
"""
