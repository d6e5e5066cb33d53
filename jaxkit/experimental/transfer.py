"""``jax.experimental.transfer``: move arrays between processes through jaxlib's transfer
server (cross-slice DCN transfers in JAX; a socket transport on CPU).

    server = start_transfer_server(jaxkit.devices()[0].client)
    server.await_pull(uuid, arrays)               # offer a pytree of arrays, once
    conn = peer_server.connect(server.address())  # on the peer
    conn.pull(uuid, shapes)                       # a pytree of ShapeDtypeStructs -> arrays

jaxkit's ``ShapeDtypeStruct`` carries no sharding: a pulled array lands on the default
device unless its spec (an array, say) has a single-device ``sharding``.
"""
# JAX's module builds its classes over jaxlib's with these decorators; jaxkit's classes wrap
# jaxlib's objects instead (``jaxkit.runtime.transfer_server``), and the names stay for code
# that decorates its own classes the same way.
from jaxkit._util import use_cpp_class, use_cpp_method  # noqa: F401
from jaxkit.runtime.transfer_server import (TransferConnection, TransferServer,
                                            make_error_array, start_transfer_server)

__all__ = ["TransferConnection", "TransferServer", "make_error_array",
           "start_transfer_server"]
