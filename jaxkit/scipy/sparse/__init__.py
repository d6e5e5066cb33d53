"""``jaxkit.scipy.sparse``: iterative linear solvers (``sparse.linalg``)."""
from jaxkit.scipy.sparse import linalg  # noqa: F401
