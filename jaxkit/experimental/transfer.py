"""``jax.experimental.transfer``: move arrays between processes through jaxlib's transfer
server (cross-slice DCN transfers in JAX; a socket transport on CPU).

    server = start_transfer_server(jaxkit.devices()[0].client)
    server.await_pull(uuid, arrays)               # offer a pytree of arrays, once
    conn = peer_server.connect(server.address())  # on the peer
    conn.pull(uuid, shapes)                       # a pytree of ShapeDtypeStructs -> arrays

jaxkit's ``ShapeDtypeStruct`` carries no sharding: a pulled array lands on the default
device unless its spec (an array, say) has a single-device ``sharding``.
"""
from jaxkit.runtime.transfer_server import (TransferConnection, TransferServer,
                                            make_error_array, start_transfer_server)

__all__ = ["TransferConnection", "TransferServer", "make_error_array",
           "start_transfer_server"]
