"""``jax._src.interpreters``: the private interpreter modules libraries import (Flax's fp8 layers
import ``pxla`` beside ``earray``)."""
