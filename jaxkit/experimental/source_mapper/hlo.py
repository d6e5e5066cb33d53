"""The HLO passes: StableHLO as lowered (``hlo:stable-hlo``), XLA HLO before optimization
(``hlo:original``) and after it (``hlo:optimized``), each line that carries source
metadata mapped to the user line.

HLO text names positions in one of two ways. The older one writes them into each
instruction, ``metadata={op_name="..." source_file="..." source_line=N}``. The newer one
(what jaxlib 0.10.2 prints) lists them once in tables at the top (``FileNames``,
``FunctionNames``, ``FileLocations``, ``StackFrames``) and an instruction refers to a frame
with ``stack_frame_id=N``; the frame's location gives file and line.
"""
from __future__ import annotations

import enum
import re
from typing import Any

from jaxkit.experimental.source_mapper import common, mlir, sourcemap
from jaxkit.transforms.jit import jit

__all__ = ["HloPass", "optimized_generate_dump", "original_hlo_generate_dump",
           "parse_hlo_dump", "stable_hlo_generate_dump", "trace_and_lower"]


class HloPass(enum.Enum):
    STABLE_HLO = "hlo:stable-hlo"
    ORIGINAL = "hlo:original"
    OPTIMIZED = "hlo:optimized"


_INLINE_METADATA = re.compile(r'metadata={.*op_name="(?P<scope>.*)"'
                              r' source_file="(?P<src_file>.*)"'
                              r" source_line=(?P<src_line>[0-9]+).*?}")
_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_TABLE_KEYS = {
    "FileLocations": {"file_name_id", "function_name_id", "line", "end_line", "column",
                      "end_column"},
    "StackFrames": {"file_location_id", "parent_frame_id"},
}
_ROW = re.compile(r"(\d+)\s+{(.*)}")
_NAME_ROW = re.compile(r'(\d+)\s+"(.*)"')
_FRAME_REF = re.compile(r"stack_frame_id=(\d+)")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _finish(gen: sourcemap.MappingsGenerator, sources: list[str]) -> sourcemap.SourceMap:
    gen.new_group()
    return sourcemap.SourceMap(version=3, sources=sources, sources_content=[],
                               mappings=gen.mappings(), names=[])


def _source_index(sources: list[str], name: str) -> int:
    if name not in sources:
        sources.append(name)
    return sources.index(name)


def _parse_inline_format(lines: list[str]) -> sourcemap.SourceMap:
    gen = sourcemap.MappingsGenerator()
    sources: list[str] = []
    for line in lines:
        gen.new_group()
        m = _INLINE_METADATA.search(line)
        if m:
            gen.new_segment(_indent(line), _source_index(sources, m["src_file"]),
                            int(m["src_line"]) - 1, 0)
    return _finish(gen, sources)


def _read_tables(lines: list[str]) -> dict[str, dict[int, Any]]:
    tables: dict[str, dict[int, Any]] = {name: {} for name in _TABLES}
    section = None
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        if line in _TABLES:
            section = line
            continue
        if section in ("FileNames", "FunctionNames"):
            if m := _NAME_ROW.match(line):
                tables[section][int(m[1])] = m[2]
        elif section in _TABLE_KEYS:
            if m := _ROW.match(line):
                fields = {}
                for part in m[2].split():
                    key, _, value = part.partition("=")
                    if key not in _TABLE_KEYS[section]:
                        raise ValueError(f"Unknown attribute for {section}: {key}")
                    fields[key] = int(value)
                tables[section][int(m[1])] = fields
    return tables


def _parse_table_format(lines: list[str]) -> sourcemap.SourceMap:
    tables = _read_tables(lines)
    gen = sourcemap.MappingsGenerator()
    sources: list[str] = []
    for line in lines:
        gen.new_group()
        m = _FRAME_REF.search(line) if "metadata={" in line else None
        if m is None:
            continue
        frame_id = int(m[1])
        frame = tables["StackFrames"].get(frame_id)
        if frame is None:
            raise ValueError(f"Could not find mapping for stack_frame_id={frame_id}")
        location = tables["FileLocations"].get(frame["file_location_id"])
        if location is None:
            raise ValueError(f"Could not find mapping for file_location_id="
                             f"{frame['file_location_id']}")
        file_name = tables["FileNames"].get(location["file_name_id"])
        if file_name:
            gen.new_segment(_indent(line), _source_index(sources, file_name),
                            location["line"] - 1, 0)
    return _finish(gen, sources)


def parse_hlo_dump(text: str) -> sourcemap.SourceMap:
    """The source map of HLO text, in whichever of the two metadata forms it uses."""
    lines = text.split("\n")
    if "FileNames" in text:
        return _parse_table_format(lines)
    return _parse_inline_format(lines)


def trace_and_lower(work_dir, f, f_args, f_kwargs, **_) -> tuple[Any, str]:
    """The HLO passes' compile step: ``jit(f).lower(*f_args)`` (keyword arguments bound)."""
    return jit(lambda *args: f(*args, **f_kwargs)).lower(*f_args), work_dir


def stable_hlo_generate_dump(args: tuple[Any, str], **_) -> common.SourceMapDump:
    lowered, _ = args
    text = lowered.as_text(debug_info=True)
    return common.SourceMapDump(source_map=mlir.create_mlir_sourcemap(text),
                                generated_code=text, pass_name=HloPass.STABLE_HLO.value)


def original_hlo_generate_dump(args: tuple[Any, str], **_) -> common.SourceMapDump:
    lowered, _ = args
    text = lowered.as_text(dialect="hlo", debug_info=True)
    return common.SourceMapDump(source_map=parse_hlo_dump(text), generated_code=text,
                                pass_name=HloPass.ORIGINAL.value)


def optimized_generate_dump(args: tuple[Any, str],
                            xla_compiler_flags: dict[str, Any] | None = None,
                            **_) -> common.SourceMapDump:
    """The compiled program's HLO. JAX also passes ``xla_dump_to`` (the pass's scratch
    directory) and ``xla_compiler_flags`` to the compiler; jaxkit's ``Lowered.compile()``
    takes no compiler options, so flags are refused rather than ignored."""
    lowered, _ = args
    if xla_compiler_flags:
        raise NotImplementedError(
            "hlo:optimized with xla_compiler_flags: jaxkit's Lowered.compile() takes no XLA "
            f"compiler options ({sorted(xla_compiler_flags)}); set them in the XLA_FLAGS "
            "environment variable before jaxkit starts instead")
    text = lowered.compile().as_text()
    return common.SourceMapDump(source_map=parse_hlo_dump(text), generated_code=text,
                                pass_name=HloPass.OPTIMIZED.value)


for _pass, _dump in ((HloPass.STABLE_HLO, stable_hlo_generate_dump),
                     (HloPass.ORIGINAL, original_hlo_generate_dump),
                     (HloPass.OPTIMIZED, optimized_generate_dump)):
    common.register_pass(common.Pass(name=_pass.value, compile_fn=trace_and_lower,
                                     generate_dump=_dump))
