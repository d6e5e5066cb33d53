"""``generate_sourcemaps``: run a function through chosen passes and collect their dumps."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Protocol

from jaxkit.experimental.source_mapper import common

__all__ = ["SourceMapGeneratorFn", "generate_sourcemaps"]


class SourceMapGeneratorFn(Protocol):
    def __call__(self, *args, **kwargs) -> Sequence[common.SourceMapDump]:
        ...


def generate_sourcemaps(f: Callable, passes: Sequence[common.Pass],
                        **pass_kwargs) -> SourceMapGeneratorFn:
    """A function that, called with ``f``'s arguments, returns one ``SourceMapDump`` per
    pass. Passes sharing a ``compile_fn`` compile once; each compile gets a scratch
    directory of its own (removed after), and ``pass_kwargs`` go to every pass."""
    def run(*args, **kwargs) -> Sequence[common.SourceMapDump]:
        dumps: list[common.SourceMapDump] = []
        compiled: dict = {}
        with tempfile.TemporaryDirectory() as work_dir:
            for p in passes:
                if p.compile_fn not in compiled:
                    pass_dir = os.path.join(work_dir, p.name.replace(":", "__"))
                    os.makedirs(pass_dir, exist_ok=False)
                    compiled[p.compile_fn] = p.compile_fn(pass_dir, f, args, kwargs,
                                                          **pass_kwargs)
                dumps.append(p.generate_dump(compiled[p.compile_fn], **pass_kwargs))
        return dumps
    return run
