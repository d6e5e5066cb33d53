"""Python host callbacks in lowered modules: ``pure_callback``, ``io_callback`` and
``debug.print`` become a custom call of jaxlib's typed-FFI Python callback handler of the
module's platform, which runs the i-th callable handed to the compiler (``mlir_ir``'s
``host_callback_call``; ``mlir.emit_python_callback`` is JAX's form of it)."""
from __future__ import annotations

from jaxkit.interpreters.mlir_ir import host_callback_call

emit_python_callback = host_callback_call
