"""``%memory``: what occupies device memory now, and what a jitted call will need.

Without a call: the live arrays by device (count, bytes) and the largest of them. With a call
(``%memory f(x)``): XLA's memory analysis of the compiled program: argument, output,
temporary and code sizes and the peak it plans for.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import jaxkit

from . import render


def format_bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


@dataclass
class LiveMemoryReport:
    """Live arrays by device, and the largest ones."""

    by_device: dict[str, tuple[int, int]]          # device -> (count, bytes)
    largest: list[tuple[str, str, int]]             # (type, device, bytes)
    top: int = 10

    @property
    def total_bytes(self) -> int:
        return sum(b for _, b in self.by_device.values())

    def device_rows(self):
        return [(d, str(c), format_bytes(b)) for d, (c, b) in sorted(self.by_device.items())]

    def largest_rows(self):
        return [(t, d, format_bytes(b)) for t, d, b in self.largest]

    def _repr_pretty_(self, p, cycle):
        p.text("live arrays by device\n"
               + render.text_table(self.device_rows(), ("device", "arrays", "bytes"))
               + f"\n\nlargest {len(self.largest)}\n"
               + render.text_table(self.largest_rows(), ("array", "device", "bytes")))

    def _repr_html_(self):
        return render.report(f"live arrays: {format_bytes(self.total_bytes)}", [
            render.table(self.device_rows(), ("device", "arrays", "bytes")),
            render.details(f"largest {len(self.largest)}", render.table(
                self.largest_rows(), ("array", "device", "bytes")), open_=True)])


def live_memory_report(top: int = 10) -> LiveMemoryReport:
    by_device: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    arrays = []
    for a in jaxkit.live_arrays():
        if a.is_deleted():
            continue
        device, nbytes = str(a.device), int(a.nbytes)
        by_device[device][0] += 1
        by_device[device][1] += nbytes
        arrays.append((f"{a.dtype.name}{list(a.shape)}", device, nbytes))
    arrays.sort(key=lambda r: -r[2])
    return LiveMemoryReport({d: (c, b) for d, (c, b) in by_device.items()}, arrays[:top], top)


_FIELDS = [("arguments", "argument_size_in_bytes"), ("outputs", "output_size_in_bytes"),
           ("temporaries", "temp_size_in_bytes"),
           ("aliased (outputs reusing arguments)", "alias_size_in_bytes"),
           ("generated code", "generated_code_size_in_bytes"),
           ("peak (XLA's plan)", "peak_memory_in_bytes")]


@dataclass
class ProgramMemoryReport:
    """XLA's memory analysis of one compiled call."""

    name: str
    sizes: dict[str, int] = field(default_factory=dict)

    def rows(self):
        return [(k, format_bytes(v)) for k, v in self.sizes.items()]

    def _repr_pretty_(self, p, cycle):
        p.text(f"memory of jit({self.name})\n" + render.text_table(self.rows(),
                                                                   ("buffer", "bytes")))

    def _repr_html_(self):
        return render.report(f"memory of jit({self.name})",
                             [render.table(self.rows(), ("buffer", "bytes"))])


def program_memory_report(fn: Callable, args: Sequence, kwargs: dict,
                          name: str) -> ProgramMemoryReport:
    jitted = fn if jaxkit.transforms.jit.jit_object(fn) is not None else jaxkit.jit(fn)
    stats = jitted.lower(*args, **kwargs).compile().memory_analysis()
    return ProgramMemoryReport(name, {label: int(getattr(stats, attr)) for label, attr in _FIELDS
                                      if hasattr(stats, attr)})
