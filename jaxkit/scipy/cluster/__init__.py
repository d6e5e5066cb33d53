"""``jaxkit.scipy.cluster``: vector quantization (``vq``)."""
from jaxkit.scipy.cluster import vq  # noqa: F401
