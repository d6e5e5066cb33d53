"""What the magics compute, as pure functions returning result objects.

Each ``*_report`` function takes Python values (a function and example arguments), does the
work with public jaxkit APIs only, and returns a value object: ``_repr_pretty_`` gives stable
text, ``_repr_html_`` adds tables, graphs (SVG when Graphviz's ``dot`` exists) and charts.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import jaxkit
import jaxkit.numpy as jnp
from jaxkit import tree_util

from . import fdcheck, graph, graphview, render, sharding_panel
from .timing import Timing, format_seconds, time_call


def _placement(tree) -> list[tuple[str, str, str]]:
    """(path, type, where) for every leaf of ``tree``."""
    rows = []
    for path, leaf in tree_util.tree_flatten_with_path(tree)[0]:
        name = tree_util.keystr(path) or "(value)"
        if isinstance(leaf, jaxkit.Array):
            devices = leaf.devices()
            where = str(next(iter(devices))) if len(devices) == 1 else \
                f"{len(devices)} devices, {getattr(leaf.sharding, 'spec', leaf.sharding)}"
            rows.append((name, leaf.aval.str_short(), where))
        elif isinstance(leaf, np.ndarray):
            rows.append((name, f"{leaf.dtype}{list(leaf.shape)}", "host (NumPy, copied per call)"))
        else:
            rows.append((name, type(leaf).__name__, "host (Python scalar)"))
    return rows


def input_labels(arg_names: Sequence[str], args: Sequence) -> list[str] | None:
    """One label per leaf of ``args`` (``params[0][1]``, ``x``), in the order a traced
    program takes them; None without names."""
    if not arg_names:
        return None
    return [f"{name}{tree_util.keystr(path)}"
            for name, arg in zip(arg_names, args)
            for path, _ in tree_util.tree_flatten_with_path(arg)[0]]


class _GraphMixin:
    """A traced program shown as a graph: DOT always, SVG when ``dot`` is installed."""

    jaxpr: jaxkit.core.ClosedJaxpr
    input_labels: list[str] | None = None

    @property
    def dot(self) -> str:
        labels = self.input_labels
        if labels is not None and len(labels) != len(self.jaxpr.jaxpr.invars):
            labels = None  # static or keyword arguments: the leaves do not line up
        return graph.jaxpr_to_dot(self.jaxpr, getattr(self, "name", "jaxpr"),
                                  input_labels=labels)

    def graph_html(self) -> str:
        """The graph in a zoom/pan viewer, nested programs folded under it (see graphview);
        a table of the equations when Graphviz is not installed."""
        labels = self.input_labels
        if labels is not None and len(labels) != len(self.jaxpr.jaxpr.invars):
            labels = None
        return graphview.graph_view_html(self.jaxpr, getattr(self, "name", "jaxpr"), labels)

    def graph_widget(self):
        """The graph as an ipywidgets box: choose nested jaxprs to unfold them in place."""
        labels = self.input_labels
        if labels is not None and len(labels) != len(self.jaxpr.jaxpr.invars):
            labels = None
        return graphview.UnfoldView(self.jaxpr, getattr(self, "name", "jaxpr"),
                                    labels).widget()


# --------------------------------------------------------------------------------------------
# %jaxpr and %hlo
# --------------------------------------------------------------------------------------------


@dataclass
class JaxprResult(_GraphMixin):
    """The jaxpr of a call, with its graph."""

    name: str
    jaxpr: Any

    def _repr_pretty_(self, p, cycle):
        p.text(str(self.jaxpr))

    def _repr_html_(self):
        return render.report(f"jaxpr of {self.name}", [render.pre(str(self.jaxpr)),
                                                       render.details("graph",
                                                                      self.graph_html())])


def jaxpr_report(fn: Callable, args: Sequence, kwargs: dict, name: str,
                 arg_names: Sequence[str] = ()) -> JaxprResult:
    result = JaxprResult(name, jaxkit.make_jaxpr(lambda *a: fn(*a, **kwargs))(*args))
    result.input_labels = input_labels(arg_names, args)
    return result


@dataclass
class HloResult:
    """StableHLO (before XLA) or optimised HLO (after XLA) text of a call."""

    name: str
    text: str
    optimized: bool

    def _repr_pretty_(self, p, cycle):
        p.text(self.text)

    def _repr_html_(self):
        kind = "optimised HLO" if self.optimized else "StableHLO"
        return render.report(f"{kind} of {self.name}", [render.pre(self.text)])


def hlo_report(fn: Callable, args: Sequence, kwargs: dict, name: str,
               optimized: bool = False, static_argnames: Sequence[str] = ()) -> HloResult:
    jitted = fn if jaxkit.transforms.jit.jit_object(fn) is not None else jaxkit.jit(
        fn, static_argnames=tuple(static_argnames) or None)
    lowered = jitted.lower(*args, **kwargs)
    text = lowered.compile().as_text() if optimized else lowered.as_text()
    return HloResult(name, text, optimized)


# --------------------------------------------------------------------------------------------
# %jit / %%jit
# --------------------------------------------------------------------------------------------


@dataclass
class JitReport(_GraphMixin):
    """Everything about compiling one call: graph, IRs, stage times, cache, placement, cost."""

    name: str
    jaxpr: Any
    stablehlo: str
    optimized_hlo: str
    trace_s: float
    lower_s: float
    compile_s: float
    cache_hit: bool
    miss_reason: str | None
    inputs: list
    outputs: list
    cost: dict
    memory: dict
    eager: Timing | None = None
    jitted: Timing | None = None
    panels: tuple = ("graph", "jaxpr", "stablehlo", "hlo", "times", "cache", "placement",
                     "cost", "memory", "speed", "sharding")
    # Layouts on the mesh and XLA's collectives; None when the call is not sharded.
    sharding: sharding_panel.ShardingPanel | None = None
    # False when the function was compiled before this jit object existed (another jit of the
    # same function): the stage times are then those of rerunning the stages, with XLA's
    # executable from the in-memory cache, and say nothing about the first compile's cost.
    compile_recorded: bool = True

    @property
    def speedup(self) -> float | None:
        if self.eager is None or self.jitted is None:
            return None
        return self.eager.best / self.jitted.best

    def break_even_calls(self) -> int | None:
        """After how many calls compiling (trace + lower + compile) has paid for itself."""
        if self.eager is None or self.jitted is None or not self.compile_recorded:
            return None
        saved = self.eager.best - self.jitted.best
        cost = sum(t or 0.0 for t in (self.trace_s, self.lower_s, self.compile_s))
        return math.ceil(cost / saved) if saved > 0 else None

    def _pays_back(self) -> str:
        if not self.compile_recorded:
            return "after an unknown number of calls (compiled before this report)"
        n = self.break_even_calls()
        return (f"after {n} call{'s' if n != 1 else ''}" if n is not None
                else "never (not faster per call)")

    def summary_lines(self) -> list[str]:
        lines = [f"jit({self.name}): {len(self.jaxpr.eqns)} equations"]
        lines.append(f"  cache: {'hit' if self.cache_hit else 'miss'}"
                     + ("" if self.cache_hit else f" ({self.miss_reason})"))
        lines.append(f"  trace {format_seconds(self.trace_s)}, lower "
                     f"{format_seconds(self.lower_s)}, compile {format_seconds(self.compile_s)}"
                     + ("" if self.compile_recorded else " (stages rerun; the executable "
                        "came from the in-memory cache)"))
        if self.cost:
            lines.append("  cost: " + ", ".join(f"{k} {self.cost[k]:g}" for k in
                                                ("flops", "transcendentals", "bytes accessed")
                                                if k in self.cost))
        if self.eager is not None and self.jitted is not None:
            lines.append(f"  eager {self.eager.summary()}")
            lines.append(f"  jit   {self.jitted.summary()}")
            lines.append(f"  speedup {self.speedup:.2f}x (best runs); compiling pays back "
                         f"{self._pays_back()}")
        if "sharding" in self.panels and self.sharding is not None:
            lines += self.sharding.summary_lines()
        return lines

    def _repr_pretty_(self, p, cycle):
        p.text("\n".join(self.summary_lines() + ["", str(self.jaxpr)]))

    def _repr_html_(self):
        s = []
        if "times" in self.panels or "cache" in self.panels:
            cache = ("<span class='hit'>cache hit</span>" if self.cache_hit else
                     f"<span class='miss'>cache miss</span>: {render.escape(self.miss_reason)}")
            s.append(f"<p>{cache}</p>")
            s.append(render.table([("trace", format_seconds(self.trace_s)),
                                   ("lower", format_seconds(self.lower_s)),
                                   ("compile", format_seconds(self.compile_s))],
                                  ("stage", "time")))
        if "speed" in self.panels and self.speedup is not None:
            e = render.escape
            s.append(render.html_table(
                [("eager (op by op)", e(self.eager), f"{self.eager.sparkline()} "
                  f"{e(self.eager.summary())}"),
                 ("jit", e(self.jitted), f"{self.jitted.sparkline()} {e(self.jitted.summary())}"),
                 ("speedup", f"{self.speedup:.2f}x", ""),
                 ("compiling pays back", e(self._pays_back()), "")],
                ("", "best", "mean ± std. dev.")))
        if "sharding" in self.panels and self.sharding is not None:
            s.append(self.sharding.html())
        if "graph" in self.panels:
            s.append(render.details("graph", self.graph_html(), open_=True))
        if "jaxpr" in self.panels:
            s.append(render.details("jaxpr", render.pre(str(self.jaxpr))))
        if "stablehlo" in self.panels:
            s.append(render.details("StableHLO", render.pre(self.stablehlo)))
        if "hlo" in self.panels:
            s.append(render.details("optimised HLO", render.pre(self.optimized_hlo)))
        if "placement" in self.panels:
            s.append(render.details("device placement", render.table(
                [("in",) + r for r in self.inputs] + [("out",) + r for r in self.outputs],
                ("", "leaf", "type", "device"))))
        if "cost" in self.panels and self.cost:
            s.append(render.details("cost analysis", render.table(sorted(
                (k, f"{v:g}") for k, v in self.cost.items()), ("metric", "value"))))
        if "memory" in self.panels and self.memory:
            s.append(render.details("memory analysis", render.table(
                [(k, f"{v:,} B") for k, v in self.memory.items()], ("buffer", "bytes"))))
        return render.report(f"jit({self.name})", s)

    def widget(self):
        """Tabs (graph / jaxpr / StableHLO / HLO) as an ipywidgets widget."""
        import ipywidgets

        tabs = ipywidgets.Tab(children=[self.graph_widget(),
                                        ipywidgets.HTML(render.pre(str(self.jaxpr))),
                                        ipywidgets.HTML(render.pre(self.stablehlo)),
                                        ipywidgets.HTML(render.pre(self.optimized_hlo))])
        for i, title in enumerate(("graph", "jaxpr", "StableHLO", "optimised HLO")):
            tabs.set_title(i, title)
        return tabs


_MEMORY_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
                  "alias_size_in_bytes", "generated_code_size_in_bytes")


def _runs(say: Callable[[str], None], what: str) -> Callable[[int, int], None]:
    """A ``time_call`` progress callback telling ``say`` "what, run i of n"."""
    say(what)
    return lambda i, n: say(f"{what}, run {min(i + 1, n)} of {n}")


def jit_report(jitted, fn: Callable, args: Sequence, kwargs: dict, name: str,
               time_it: bool = True, panels: Sequence[str] | None = None,
               repeat: int = 5, arg_names: Sequence[str] = (),
               progress: Callable[[str], None] | None = None) -> JitReport:
    """Call ``jitted`` once (recording hit/miss), then trace/lower/compile it afresh for the
    texts and stage times, and optionally time eager against jit. ``progress`` is told
    each step as it starts (the magic shows it in a terminal)."""
    say = progress or (lambda msg: None)
    say(f"compiling {name}")
    events_before = len(jitted.cache_events)
    out = jitted(*args, **kwargs)
    jaxkit.block_until_ready(out)
    hit = len(jitted.cache_events) == events_before
    reason = None if hit else jitted.cache_events[-1].reason
    # The texts come from the stages again; XLA does not run twice: the executable comes from
    # the in-memory compilation cache. The stage times shown are those of the compile that
    # made the cached entry (recorded in jit's cache events), not of this rerun.
    traced = jitted.trace(*args, **kwargs)
    lowered = traced.lower()
    compiled = lowered.compile()
    avals = tuple(traced.jaxpr.in_avals)
    recorded = next((ev.timings for ev in reversed(jitted.cache_events)
                     if ev.signature is not None and tuple(ev.signature.avals) == avals), None)
    timings = recorded or compiled.timings
    memory_stats = compiled.memory_analysis()
    memory = {f: getattr(memory_stats, f) for f in _MEMORY_FIELDS if hasattr(memory_stats, f)}
    cost = {k: v for k, v in compiled.cost_analysis().items() if "{" not in k}
    eager_t = jit_t = None
    if time_it:
        eager_t = time_call(lambda: fn(*args, **kwargs), repeat=repeat,
                            progress=_runs(say, f"timing {name} eagerly"))
        jit_t = time_call(lambda: jitted(*args, **kwargs), repeat=repeat,
                          progress=_runs(say, f"timing jit({name})"))
    report = JitReport(name, traced.jaxpr, lowered.as_text(), compiled.as_text(),
                       timings.trace, timings.lower, timings.compile,
                       hit, reason, _placement(list(args)), _placement(out), cost, memory,
                       eager_t, jit_t)
    report.compile_recorded = recorded is not None
    report.input_labels = input_labels(arg_names, args)
    report.sharding = sharding_panel.sharding_panel(args, out, report.optimized_hlo,
                                                    report.input_labels)
    if panels:
        report.panels = tuple(panels)
    return report


# --------------------------------------------------------------------------------------------
# %jit_timeit
# --------------------------------------------------------------------------------------------


@dataclass
class SpeedupReport:
    """Per-call times of several ways to run the same computation; with ``compile_s`` (what
    the first jit call spent tracing, lowering and compiling), when jit pays that back."""

    title: str
    timings: dict[str, Timing]
    baseline: str
    compile_s: float | None = None

    def speedups(self) -> dict[str, float]:
        base = self.timings[self.baseline].best
        return {k: base / t.best for k, t in self.timings.items()}

    def break_even_calls(self) -> int | None:
        """Calls after which jit (compile once, then its steady time) has cost less than
        running eagerly every time; None when jit is not faster per call."""
        if self.compile_s is None or "jit" not in self.timings:
            return None
        saved = self.timings[self.baseline].best - self.timings["jit"].best
        return math.ceil(self.compile_s / saved) if saved > 0 else None

    def rows(self) -> list[tuple[str, str, str, str]]:
        sp = self.speedups()
        return [(k, str(t), t.summary(), f"{sp[k]:.2f}x") for k, t in self.timings.items()]

    @property
    def header(self) -> tuple[str, ...]:
        return ("method", "best", "mean ± std. dev.", f"speedup vs {self.baseline}")

    def notes(self) -> list[str]:
        out = []
        if self.compile_s is not None:
            n = self.break_even_calls()
            out.append(f"jit's first call spent {format_seconds(self.compile_s)} tracing, "
                       "lowering and compiling; "
                       + (f"jit pays that back after {n} call{'s' if n != 1 else ''}"
                          if n is not None else "jit is not faster per call here, so it "
                          "never pays that back"))
        out += [f"{k}: {w}" for k, t in self.timings.items()
                if (w := t.variance_warning()) is not None]
        return out

    def _repr_pretty_(self, p, cycle):
        p.text("\n".join([self.title, render.text_table(self.rows(), self.header)]
                         + self.notes()))

    def chart(self):
        return render.bar_chart(list(self.timings), [t.best for t in self.timings.values()],
                                self.title)

    def _repr_html_(self):
        # Each row's mean ± std. dev. with the spread of its repeats drawn beside it.
        rows = [(render.escape(k), render.escape(best), f"{t.sparkline()} {render.escape(s)}",
                 render.escape(sp)) for (k, best, s, sp), t in zip(self.rows(),
                                                                   self.timings.values())]
        parts = [render.html_table(rows, self.header)]
        parts += [f"<p>{render.escape(n)}</p>" for n in self.notes()]
        if render.matplotlib_available():
            parts.append(render.figure_to_svg(self.chart()))
        return render.report(self.title, parts)


def jit_timeit_report(fn: Callable, args: Sequence, kwargs: dict, name: str,
                      repeat: int = 5, static_argnames: Sequence[str] = (),
                      progress: Callable[[str], None] | None = None) -> SpeedupReport:
    say = progress or (lambda msg: None)
    jitted = jaxkit.jit(fn, static_argnames=tuple(static_argnames) or None)
    say(f"compiling {name}")
    jaxkit.block_until_ready(jitted(*args, **kwargs))  # the compile, timed by jit itself
    compile_s = jitted.cache_events[-1].timings.total() if jitted.cache_events else None
    timings = {"eager": time_call(lambda: fn(*args, **kwargs), repeat=repeat,
                                  progress=_runs(say, f"timing {name} eagerly")),
               "jit": time_call(lambda: jitted(*args, **kwargs), repeat=repeat,
                                progress=_runs(say, f"timing jit({name})"))}
    return SpeedupReport(f"{name}: eager vs jit", timings, "eager", compile_s)


# --------------------------------------------------------------------------------------------
# %grad
# --------------------------------------------------------------------------------------------


@dataclass
class GradReport:
    """Value and gradient of a scalar function of any pytrees, its forward and gradient
    programs, and a finite-difference check (see ``fdcheck``)."""

    name: str
    value: Any
    grads: Any
    forward_jaxpr: Any
    grad_jaxpr: Any
    argnums: tuple
    args: tuple
    check: str
    probes: list
    eps: float
    arg_names: tuple = ()

    def arg_name(self, n: int) -> str:
        return self.arg_names[n] if n < len(self.arg_names) else f"arg {n}"

    @property
    def max_abs_error(self) -> float:
        return max((p.error for p in self.probes), default=0.0)

    def grad_rows(self) -> list[tuple[str, str, str, str, str]]:
        """(path, type, norm, min, max) for every leaf of the gradient."""
        grads = (self.grads,) if len(self.argnums) == 1 and not isinstance(
            self.grads, tuple) else self.grads
        rows = []
        for n, g in zip(self.argnums, grads):
            for path, leaf in tree_util.tree_flatten_with_path(g)[0]:
                a = np.asarray(leaf)
                finite = a[np.isfinite(a)] if a.size else a
                rows.append((f"{self.arg_name(n)}{tree_util.keystr(path)}",
                             f"{a.dtype}{list(a.shape)}",
                             f"{float(np.linalg.norm(a.astype(np.float64))):.4g}",
                             f"{float(finite.min()):.4g}" if finite.size else "-",
                             f"{float(finite.max()):.4g}" if finite.size else "-"))
        return rows

    def check_rows(self) -> list[tuple[str, str, str, str]]:
        return [(p.label, f"{p.analytic:.6g}", f"{p.numeric:.6g}", f"{p.error:.3g}")
                for p in self.probes]

    def check_title(self) -> str:
        kind = {"directions": "along random directions", "full": "element by element"}
        return f"central differences {kind[self.check]} (eps={self.eps:g})"

    def _repr_pretty_(self, p, cycle):
        lines = [f"{self.name}: value = {self.value}", "",
                 render.text_table(self.grad_rows(), ("gradient", "type", "norm", "min",
                                                      "max"))]
        if self.check != "none":
            lines += ["", self.check_title(),
                      render.text_table(self.check_rows(), ("along", "grad", "finite diff.",
                                                            "|difference|")),
                      f"largest |grad - finite difference| = {self.max_abs_error:.3g}"]
        p.text("\n".join(lines))

    def _repr_html_(self):
        fwd = JaxprResult(f"{self.name} (forward)", self.forward_jaxpr)
        bwd = JaxprResult(f"grad({self.name})", self.grad_jaxpr)
        fwd.input_labels = bwd.input_labels = input_labels(self.arg_names, self.args)
        parts = [render.table([("value", self.value)]),
                 render.table(self.grad_rows(), ("gradient", "type", "norm", "min", "max"))]
        if self.check != "none":
            parts.append(render.details(self.check_title(), render.table(
                self.check_rows(), ("along", "grad", "finite diff.", "|difference|"))
                + f"<p>largest |grad - finite difference| = {self.max_abs_error:.3g}</p>",
                open_=True))
        parts += [render.details("forward program", render.pre(str(self.forward_jaxpr))
                                 + fwd.graph_html(), open_=False),
                  render.details("gradient program (forward + transposed backward)",
                                 render.pre(str(self.grad_jaxpr)) + bwd.graph_html())]
        return render.report(f"grad of {self.name}", parts)


def grad_report(fn: Callable, args: Sequence, name: str, argnums: int | tuple = 0,
                eps: float = 1e-3, check: str = "directions",
                arg_names: Sequence[str] = ()) -> GradReport:
    """``check``: "directions" (a few random directions, two calls each), "full" (every
    element, two calls each) or "none". ``arg_names``: the arguments as the user wrote them
    (``params``), naming the gradient's leaves (``params[0][1]``)."""
    value, grads = jaxkit.value_and_grad(fn, argnums=argnums)(*args)
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    grad_list = [grads] if isinstance(argnums, int) else list(grads)
    if check == "directions":
        probes = fdcheck.directions(fn, args, nums, grad_list, eps)
    elif check == "full":
        probes = fdcheck.elementwise(fn, args, nums, grad_list, eps, arg_names)
    elif check == "none":
        probes = []
    else:
        raise ValueError(f"check must be 'directions', 'full' or 'none', got {check!r}")
    return GradReport(name, value, grads, jaxkit.make_jaxpr(fn)(*args),
                      jaxkit.make_jaxpr(jaxkit.grad(fn, argnums=argnums))(*args),
                      nums, tuple(args), check, probes, eps, tuple(arg_names))


# --------------------------------------------------------------------------------------------
# %vmap_timeit
# --------------------------------------------------------------------------------------------


@dataclass
class VmapTimeitReport:
    """Time per call of four ways to batch a per-example function, across batch sizes."""

    name: str
    sizes: list[int]
    series: dict[str, list[float]] = field(default_factory=dict)
    # The full measurement behind each number of ``series`` (its repeats, for sparklines).
    timings: dict[str, list[Timing]] = field(default_factory=dict)

    def rows(self):
        methods = list(self.series)
        return [[str(b)] + [format_seconds(self.series[m][i]) for m in methods]
                for i, b in enumerate(self.sizes)], ["batch"] + methods

    def speedup_rows(self):
        base = self.series["python loop"]
        return [[str(b)] + [f"{base[i] / self.series[m][i]:.1f}x" for m in self.series]
                for i, b in enumerate(self.sizes)], ["batch"] + list(self.series)

    def _repr_pretty_(self, p, cycle):
        rows, header = self.rows()
        srows, sheader = self.speedup_rows()
        p.text(f"vmap timings for {self.name}\n" + render.text_table(rows, header) +
               "\n\nspeedup over the Python loop\n" + render.text_table(srows, sheader))

    def chart(self):
        return render.line_chart(self.sizes, self.series, f"batching {self.name}")

    def _repr_html_(self):
        rows, header = self.rows()
        srows, sheader = self.speedup_rows()
        if all(len(self.timings.get(m, ())) == len(self.sizes) for m in self.series):
            # best time per call, the spread of the repeats beside it, mean ± std as tooltip
            rows = [[render.escape(row[0])] + [
                f"<span title='{render.escape(t.summary())}'>{render.escape(cell)}</span> "
                f"{t.sparkline()}" for cell, t in zip(row[1:], (self.timings[m][i]
                                                               for m in self.series))]
                for i, row in enumerate(rows)]
            table = render.html_table(rows, header)
        else:
            table = render.table(rows, header)
        parts = [table, "<p>speedup over the Python loop</p>",
                 render.table(srows, sheader)]
        if render.matplotlib_available():
            parts.append(render.figure_to_svg(self.chart()))
        return render.report(f"vmap timings for {self.name}", parts)


def _batch_of(example, size: int, axis):
    if axis is None:
        return example
    x = jnp.asarray(example)
    rng = np.random.default_rng(size)
    noise = rng.standard_normal((size,) + x.shape).astype(np.float32) * 0.01
    stacked = jnp.asarray(np.asarray(x)[None] + noise.astype(np.asarray(x).dtype)) \
        if jnp.issubdtype(x.dtype, jnp.floating) else jnp.stack([x] * size)
    return jnp.moveaxis(stacked, 0, axis)


def vmap_timeit_report(fn: Callable, examples: Sequence, name: str,
                       in_axes: int | Sequence = 0, sizes: Sequence[int] = (1, 10, 100, 1000),
                       hand_batched: Callable | None = None, repeat: int = 3,
                       progress: Callable[[str], None] | None = None) -> VmapTimeitReport:
    axes = [in_axes] * len(examples) if isinstance(in_axes, int) or in_axes is None \
        else list(in_axes)
    report = VmapTimeitReport(name, list(sizes))
    vf = jaxkit.vmap(fn, in_axes=tuple(axes))
    jvf = jaxkit.jit(vf)
    jhand = jaxkit.jit(hand_batched) if hand_batched is not None else None
    methods = {"python loop": None, "vmap (eager)": vf, "jit(vmap)": jvf}
    if jhand is not None:
        methods["hand-batched jit"] = jhand
    for m in methods:
        report.series[m] = []
        report.timings[m] = []
    for size in sizes:
        batch = [_batch_of(e, size, a) for e, a in zip(examples, axes)]

        def loop(batch=batch, size=size):
            outs = [fn(*[b if a is None else jnp.take(b, i, axis=a) for b, a in
                         zip(batch, axes)]) for i in range(size)]
            return jnp.stack(outs)

        for m, f in methods.items():
            if progress is not None:
                progress(f"batch {size}: {m}")
            call = loop if f is None else (lambda f=f, batch=batch: f(*batch))
            timing = time_call(call, repeat=repeat, min_window=0.02)
            report.series[m].append(timing.best)
            report.timings[m].append(timing)
    return report


# --------------------------------------------------------------------------------------------
# %devices
# --------------------------------------------------------------------------------------------


@dataclass
class DevicesReport:
    rows: list[tuple]

    def _repr_pretty_(self, p, cycle):
        p.text(render.text_table(self.rows, ("id", "platform", "kind", "process")))

    def _repr_html_(self):
        return render.report("devices", [render.table(self.rows, ("id", "platform", "kind",
                                                                  "process"))])


def devices_report() -> DevicesReport:
    return DevicesReport([(d.id, d.platform, d.device_kind, d.process_index)
                          for d in jaxkit.devices()])
