"""``jax.extend.core.DebugInfo``: what a traced function is, for error messages, in the form
JAX 0.10.2 gives it (a named tuple of ``traced_for``, ``func_src_info``, ``arg_names``,
``result_paths``).

Libraries build one to hand to ``linear_util.wrap_init(..., debug_info=...)`` and read
``func_name``/``arg_names`` back; jaxkit's tracer keeps its own record of the same facts.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from jaxkit import tree_util

__all__ = ["DebugInfo"]

# "f at /path/file.py:12": the function's name, then where it was defined.
_SRC_INFO = re.compile(r"([^ ]+)( at (.+):(\d+))?$")
# keystr writes a flattened-index key as "<flat index 0>"; paths show the bare index.
_FLAT_INDEX = re.compile(r"<flat index ([^>]+)>")


class DebugInfo(NamedTuple):
    """``traced_for`` (``"jit"``, ``"vmap"``, ...), ``func_src_info`` (``"f at file:line"``),
    ``arg_names`` (one per flat argument, or None) and ``result_paths`` (one per flat result,
    None, or a thunk computing them once the function has run)."""

    traced_for: str
    func_src_info: str
    arg_names: tuple[str, ...] | None
    result_paths: tuple[str, ...] | Callable[[], tuple[str, ...]] | None

    def resolve_result_paths(self) -> DebugInfo:
        """The same, with a result-paths thunk replaced by its value."""
        if callable(self.result_paths):
            return self._replace(result_paths=tuple(self.result_paths()))
        return self

    @property
    def func_name(self) -> str:
        return self.func_src_info.split(" ")[0]

    def replace_func_name(self, name: str) -> DebugInfo:
        rest = self.func_src_info.split(" ")[1:]
        return self._replace(func_src_info=" ".join([name, *rest]))

    def set_result_paths(self, ans: Any) -> DebugInfo:
        """The same, with result paths read from the pytree ``ans`` (``result``,
        ``result[0]``, ``result['a']``, ...)."""
        paths = tuple("result" + _FLAT_INDEX.sub(r"\1", tree_util.keystr(p))
                      for p, _ in tree_util.tree_flatten_with_path(ans)[0])
        return self._replace(result_paths=paths)

    @property
    def func_filename(self) -> str | None:
        m = _SRC_INFO.match(self.func_src_info)
        return m.group(3) if m else None

    @property
    def func_lineno(self) -> int | None:
        m = _SRC_INFO.match(self.func_src_info)
        return int(m.group(4)) if m and m.group(4) is not None else None

    def safe_arg_names(self, expected_count: int) -> tuple[str, ...]:
        """``arg_names``, or ``expected_count`` empty names when unknown."""
        if self.arg_names is not None:
            return self.arg_names
        return ("",) * expected_count

    def assert_arg_names(self, expected_count: int) -> None:
        assert self.arg_names is None or len(self.arg_names) == expected_count, (
            expected_count, self)

    def filter_arg_names(self, keep: Sequence[bool]) -> tuple[str, ...] | None:
        if self.arg_names is None:
            return None
        return tuple(n for n, k in zip(self.safe_arg_names(len(keep)), keep) if k)

    def safe_result_paths(self, expected_count: int) -> tuple[str, ...]:
        """``result_paths``, or ``expected_count`` empty paths when unknown."""
        if self.result_paths is not None and not callable(self.result_paths):
            return self.result_paths
        return ("",) * expected_count

    def assert_result_paths(self, expected_count: int) -> None:
        assert self.result_paths is None or callable(self.result_paths) or \
            len(self.result_paths) == expected_count, (expected_count, self)

    def filter_result_paths(self, keep: Sequence[bool]) -> tuple[str, ...] | None:
        if self.result_paths is None or callable(self.result_paths):
            return None
        return tuple(p for p, k in zip(self.result_paths, keep) if k)

    def with_unknown_names(self) -> DebugInfo:
        return self._replace(arg_names=None, result_paths=None)
