"""The source mapper's passes: a pass compiles a function one way (``compile_fn``) and turns
the result into generated text with its source map (``generate_dump``). Passes register
themselves by name (``jaxpr``, ``hlo:stable-hlo``, ``hlo:original``, ``hlo:optimized``)."""
from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from jaxkit._config import config
from jaxkit.experimental.source_mapper import sourcemap
from jaxkit.transforms.jit import jit

__all__ = ["CompileFn", "GenerateDumpFn", "Pass", "SourceMapDump", "all_passes",
           "compile_with_env", "filter_passes", "flag_env", "register_pass"]


@dataclasses.dataclass(frozen=True, slots=True)
class SourceMapDump:
    """Generated text (a jaxpr, StableHLO, HLO) and the map from its lines to the source."""

    source_map: sourcemap.SourceMap
    generated_code: str
    pass_name: str


class CompileFn(Protocol):
    def __call__(self, work_dir, fn, f_args, f_kwargs, /, **kwargs) -> Any:
        ...


class GenerateDumpFn(Protocol):
    def __call__(self, compile_result: Any, /, **kwargs) -> SourceMapDump:
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class Pass:
    """A named way to compile a function and map what it produced back to the source."""

    name: str
    compile_fn: CompileFn
    generate_dump: GenerateDumpFn


_passes: dict[str, Pass] = {}


def register_pass(pass_: Pass) -> None:
    """Add a pass; its name must be new."""
    if pass_.name in _passes:
        raise ValueError(f"Pass {pass_.name} already registered")
    _passes[pass_.name] = pass_


def all_passes() -> Sequence[Pass]:
    """The registered passes, in registration order."""
    return list(_passes.values())


def filter_passes(regex: str) -> Sequence[Pass]:
    """The registered passes whose name matches ``regex`` at its start (``re.match``)."""
    return [p for p in _passes.values() if re.match(regex, p.name)]


@contextlib.contextmanager
def flag_env(**kwargs: Any) -> Iterator[None]:
    """Set configuration options (``jax_enable_x64=True``, ...) for the block and restore
    them after. JAX sets absl flags here; jaxkit's options live in ``jaxkit.config``, and
    an unknown name raises ``AttributeError`` listing the known ones."""
    with config.override(**kwargs):
        yield


def compile_with_env(f, f_args, f_kwargs, env_flags: dict[str, Any],
                     compiler_flags: dict[str, Any] | None) -> None:
    """Compile ``f`` for ``f_args``/``f_kwargs`` with the options ``env_flags`` set."""
    if compiler_flags:
        raise NotImplementedError(
            "compile_with_env: jaxkit's Lowered.compile() takes no XLA compiler options, so "
            f"{sorted(compiler_flags)} cannot be passed; set them in the XLA_FLAGS "
            "environment variable before jaxkit starts instead")
    with flag_env(**env_flags):
        jit(lambda *args, **kwargs: f(*args, **kwargs)).lower(*f_args, **f_kwargs).compile()
