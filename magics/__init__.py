"""IPython magics that show what jaxkit's transformations did: ``%load_ext jaxkit``.

``%%jit CALL`` / ``%jit CALL`` (``-a``: the source annotated line by line), ``%grad CALL``,
``%vmap_timeit FUNC ARGS``, ``%jit_timeit CALL``, ``%jaxpr CALL``, ``%hlo CALL``, ``%devices``,
``%memory [CALL]``. Each parses its arguments
with ``IPython.core.magic_arguments`` (so ``%jit?`` shows help), calls a pure function in
``reports.py`` and returns a result object; ``-o`` returns it, ``-q`` does not display it
(as ``%timeit`` does).

Graphs are shown in a zoom/pan viewer with nested programs (jit, custom_jvp, scan bodies,
cond branches) and named scopes (``jax.named_scope``, Flax layers: ``graph_scopes``) folded
into one node each and unfoldable (``graphview``); timing tables draw
the spread of their repeats as sparklines; in a terminal, long compiles and timings show a
progress line on stderr (``progress``).
"""
from __future__ import annotations

import ast
import os
from typing import Any

from IPython.core import magic_arguments
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.display import display

import jaxkit
from jaxkit.extend import source_info_util

from . import annotate, memory, reports
from .errors import magic_errors
from .graph import dot_available, jaxpr_to_dot
from .progress import TerminalProgress, stderr_is_terminal
from .timing import Timing, format_seconds, time_call

__all__ = ["JaxkitMagics", "load_ipython_extension", "reports", "annotate", "jaxpr_to_dot",
           "dot_available", "Timing", "format_seconds", "time_call"]

# Equations traced while a magic runs are located in the user's code, not in the magics.
source_info_util.register_exclusion(os.path.dirname(os.path.abspath(__file__)) + os.sep)


class CallSpec:
    """A parsed ``f(a, b, k=v)``: the callee's name and the evaluated callee and arguments."""

    def __init__(self, source: str, namespace: dict):
        try:
            node = ast.parse(source.strip(), mode="eval").body
        except SyntaxError as e:
            raise UsageError(f"expected a call such as `f(x)`, got {source.strip()!r}: "
                             f"{e.msg}") from None
        if not isinstance(node, ast.Call):
            raise UsageError(f"expected a call such as `f(x)`, got {source.strip()!r}")
        self.source = source.strip()
        self.name = ast.unparse(node.func)
        self.func_node = node.func
        self.fn = self._eval(node.func, namespace)
        self.args = [self._eval(a, namespace) for a in node.args]
        self.arg_sources = [ast.unparse(a) for a in node.args]  # how the user named them
        self.kwargs = {k.arg: self._eval(k.value, namespace) for k in node.keywords}

    @staticmethod
    def _eval(node: ast.AST, namespace: dict) -> Any:
        try:
            return eval(compile(ast.Expression(node), "<magic call>", "eval"), namespace)
        except NameError as e:
            raise UsageError(f"{e}: define it in a cell first (the magic evaluates "
                             f"`{ast.unparse(node)}` in the notebook's namespace)") from None


def _split_cell(cell: str, call: str) -> tuple[str, str]:
    """(the code to run, the example call): the call is the magic line's ``call`` or, when
    that is empty, the cell's last line, which must then be a call (``f(x)``)."""
    try:
        tree = ast.parse(cell)
    except SyntaxError as e:
        raise UsageError(f"the cell has a syntax error at line {e.lineno}: {e.msg}") from None
    if call:
        return cell, call
    last = tree.body[-1] if tree.body else None
    if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)):
        raise UsageError("%%jit needs an example call: on the magic line (%%jit f(x)) or as "
                         "the cell's last line")
    lines = cell.splitlines()
    return "\n".join(lines[:last.lineno - 1]), "\n".join(lines[last.lineno - 1:last.end_lineno])


def _split_names(text: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip()) if text else ()


def _ints(option: str, text: str) -> tuple[int, ...]:
    try:
        return tuple(int(n) for n in _split_names(text))
    except ValueError:
        raise UsageError(f"{option} takes comma-separated integers, e.g. {option} 0,1; got "
                         f"{text!r}") from None


def _parse_axes(text: str | None):
    if text is None:
        return 0
    items = [t.strip() for t in text.split(",")]
    try:
        axes = [None if t in ("None", "none", "") else int(t) for t in items]
    except ValueError:
        raise UsageError(f"--in-axes takes integers or None per argument, e.g. 0,None; got "
                         f"{text!r}") from None
    return axes[0] if len(axes) == 1 else tuple(axes)


def _panels(text: str | None) -> tuple[str, ...] | None:
    panels = _split_names(text)
    unknown = [p for p in panels if p not in reports.JitReport.panels]
    if unknown:
        raise UsageError(f"unknown panel(s) {', '.join(map(repr, unknown))} for --panels; "
                         f"choose from {', '.join(reports.JitReport.panels)}")
    return panels or None


def _lookup(option: str, name: str, namespace: dict):
    try:
        return namespace[name]
    except KeyError:
        raise UsageError(f"{option} {name}: no variable named {name!r} in the notebook; "
                         "define it first or check the spelling") from None


@magics_class
class JaxkitMagics(Magics):
    """The jaxkit magics; registered by ``%load_ext jaxkit``."""

    def _finish(self, result, args):
        if not args.q:
            display(result)
        return result if args.o else None

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("-o", action="store_true", help="return the result object")
    @magic_arguments.argument("-q", action="store_true", help="do not display the result")
    @magic_arguments.argument("--static", default=None,
                              help="comma-separated static argument names")
    @magic_arguments.argument("--panels", default=None,
                              help="comma-separated panels to show: graph, jaxpr, stablehlo, "
                                   "hlo, times, cache, placement, cost, memory, speed, "
                                   "sharding")
    @magic_arguments.argument("--no-timeit", action="store_true",
                              help="do not time eager against jit")
    @magic_arguments.argument("-r", "--repeat", type=int, default=5,
                              help="timing repeats (best is reported)")
    @magic_arguments.argument("-a", "--annotate", action="store_true",
                              help="show the source annotated line by line: the jaxpr "
                                   "equations, optimised HLO instructions and estimated "
                                   "flops/bytes of each line")
    @magic_arguments.argument("call", nargs="*",
                              help="an example call, e.g. selu(x) (in a cell, it may be the "
                                   "cell's last line instead)")
    @line_cell_magic
    @magic_errors
    def jit(self, line: str, cell: str | None = None):
        """Compile a function with jaxkit.jit for an example call and show what happened:
        the traced graph, jaxpr, StableHLO and optimised HLO, trace/lower/compile times,
        cache hit or miss (and why), device placement, cost and memory analysis, and eager
        against jit time. As a cell magic the cell is run first (it defines the function)
        and the function is replaced in the namespace by its jitted version; the call may be
        the cell's last line. With -a, the source (the cell's, or the function's) annotated
        line by line, as Cython's %%cython -a does."""
        args = magic_arguments.parse_argstring(self.jit, line)
        panels = _panels(args.panels)
        ns = self.shell.user_ns
        source = None
        if cell is not None:
            code, call_text = _split_cell(cell, " ".join(args.call))
            # Compiled under a file name of its own (registered with linecache, as IPython
            # does for cells), so that tracebacks and the equations' locations name its lines.
            filename = self.shell.compile.cache(code, self.shell.execution_count)
            exec(compile(code, filename, "exec"), self.shell.user_global_ns, ns)
            source = annotate.SourceLines(filename, 1, code.splitlines())
        elif not args.call:
            raise UsageError("%jit needs an example call, e.g. %jit f(x)")
        else:
            call_text = " ".join(args.call)
        call = CallSpec(call_text, ns)
        static = _split_names(args.static)
        if jaxkit.transforms.jit.jit_object(call.fn) is not None:
            jitted, fn = call.fn, jaxkit.transforms.jit.jit_object(call.fn)._fun
        else:
            fn = call.fn
            jitted = jaxkit.jit(fn, static_argnames=static or None)
            if cell is not None and isinstance(call.func_node, ast.Name):
                ns[call.name] = jitted
        if args.annotate:
            if source is None:
                try:
                    source = annotate.SourceLines.of_function(fn)
                except ValueError as e:
                    raise UsageError(str(e)) from None
            with TerminalProgress(f"compiling {call.name}"):
                result = annotate.annotate_report(jitted, call.args, call.kwargs, call.name,
                                                  source)
            return self._finish(result, args)
        with TerminalProgress(f"compiling {call.name}") as bar:
            report = reports.jit_report(jitted, fn, call.args, call.kwargs, call.name,
                                        time_it=not args.no_timeit,
                                        panels=panels,
                                        repeat=args.repeat, arg_names=call.arg_sources,
                                        progress=bar.update)
        return self._finish(report, args)

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("-o", action="store_true", help="return the result object")
    @magic_arguments.argument("-q", action="store_true", help="do not display the result")
    @magic_arguments.argument("--argnums", default="0",
                              help="comma-separated positions to differentiate")
    @magic_arguments.argument("--eps", type=float, default=1e-3,
                              help="finite-difference step")
    @magic_arguments.argument("--check", default="directions",
                              choices=("directions", "full", "none"),
                              help="compare with central differences along a few random "
                                   "directions (default: two evaluations each, whatever the "
                                   "parameter count), along every element, or not at all")
    @magic_arguments.argument("call", nargs="+", help="an example call, e.g. loss(w, x)")
    @line_magic
    @magic_errors
    def grad(self, line: str):
        """Value and gradient of a scalar function at an example call (arguments may be any
        pytrees: a list of (w, b) layers, a dict of parameters), the gradient as a tree, the
        graphs of the forward and of the gradient program, and a finite-difference check."""
        args = magic_arguments.parse_argstring(self.grad, line)
        call = CallSpec(" ".join(args.call), self.shell.user_ns)
        nums = _ints("--argnums", args.argnums)
        if not nums or any(not 0 <= n < len(call.args) for n in nums):
            raise UsageError(f"--argnums {args.argnums}: {call.name} is called with "
                             f"{len(call.args)} positional argument(s); give positions "
                             f"among 0..{len(call.args) - 1}")
        argnums = nums[0] if len(nums) == 1 else nums
        fn = call.fn if not call.kwargs else (lambda *a: call.fn(*a, **call.kwargs))
        out = jaxkit.eval_shape(fn, *call.args)
        if not (isinstance(out, jaxkit.ShapeDtypeStruct) and out.shape == ()):
            shapes = jaxkit.tree_util.tree_map(lambda s: f"{s.dtype}{list(s.shape)}", out)
            raise UsageError(f"%grad needs a function with a scalar output; {call.name} "
                             f"returns {shapes}. Reduce it to a scalar (e.g. jnp.sum), or use "
                             "jax.jacrev / jax.jacfwd for a Jacobian")
        report = reports.grad_report(fn, call.args, call.name, argnums, args.eps, args.check,
                                     arg_names=call.arg_sources)
        return self._finish(report, args)

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("-o", action="store_true", help="return the result object")
    @magic_arguments.argument("-q", action="store_true", help="do not display the result")
    @magic_arguments.argument("--in-axes", default=None,
                              help="comma-separated in_axes, e.g. 0,None (default 0)")
    @magic_arguments.argument("--sizes", default="1,10,100,1000", help="batch sizes")
    @magic_arguments.argument("--hand", default=None,
                              help="name of a hand-batched version to compare with")
    @magic_arguments.argument("-r", "--repeat", type=int, default=3, help="timing repeats")
    @magic_arguments.argument("func", help="the per-example function (a name)")
    @magic_arguments.argument("examples", nargs="*",
                              help="example (unbatched) arguments, as expressions")
    @line_magic
    @magic_errors
    def vmap_timeit(self, line: str):
        """Time a per-example function batched four ways (Python loop, eager vmap, jit(vmap),
        and an optional hand-batched version) across batch sizes, with a speedup chart."""
        args = magic_arguments.parse_argstring(self.vmap_timeit, line)
        ns = self.shell.user_ns
        if "(" in args.func:
            call = CallSpec(args.func + " ".join(args.examples), ns)
            fn, examples, name = call.fn, call.args, call.name
        else:
            fn = CallSpec._eval(ast.parse(args.func, mode="eval").body, ns)
            examples = [CallSpec._eval(ast.parse(e, mode="eval").body, ns)
                        for e in args.examples]
            name = args.func
        hand = _lookup("--hand", args.hand, ns) if args.hand else None
        sizes = list(_ints("--sizes", args.sizes))
        # In a terminal the progress is a line on stderr, erased when done; in a notebook it
        # is the output itself, replaced by the report at the end.
        terminal = stderr_is_terminal()
        handle = display(f"timing {name} ...", display_id=True) \
            if not args.q and not terminal else None
        with TerminalProgress(f"timing {name}") as bar:
            def progress(msg):
                bar.update(f"timing {name}: {msg}")
                if handle is not None:
                    handle.update(f"timing {name}: {msg}")

            report = reports.vmap_timeit_report(fn, examples, name, _parse_axes(args.in_axes),
                                                sizes, hand, args.repeat, progress)
        if handle is not None:
            handle.update(report)
        elif not args.q:
            display(report)
        return report if args.o else None

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("-o", action="store_true", help="return the result object")
    @magic_arguments.argument("-q", action="store_true", help="do not display the result")
    @magic_arguments.argument("-r", "--repeat", type=int, default=5, help="timing repeats")
    @magic_arguments.argument("--static", default=None,
                              help="comma-separated static argument names")
    @magic_arguments.argument("call", nargs="+", help="an example call, e.g. selu(x)")
    @line_magic
    @magic_errors
    def jit_timeit(self, line: str):
        """Time a call eagerly (op by op) and under jit; show both and the speedup chart."""
        args = magic_arguments.parse_argstring(self.jit_timeit, line)
        call = CallSpec(" ".join(args.call), self.shell.user_ns)
        jit_obj = jaxkit.transforms.jit.jit_object(call.fn)
        fn = call.fn if jit_obj is None else jit_obj._fun
        with TerminalProgress(f"compiling {call.name}") as bar:
            report = reports.jit_timeit_report(fn, call.args, call.kwargs, call.name,
                                               args.repeat, _split_names(args.static),
                                               progress=bar.update)
        return self._finish(report, args)

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("-o", action="store_true", help="return the result object")
    @magic_arguments.argument("-q", action="store_true", help="do not display the result")
    @magic_arguments.argument("call", nargs="+", help="an example call, e.g. f(x)")
    @line_magic
    @magic_errors
    def jaxpr(self, line: str):
        """The jaxpr of a call, with its graph."""
        args = magic_arguments.parse_argstring(self.jaxpr, line)
        call = CallSpec(" ".join(args.call), self.shell.user_ns)
        return self._finish(reports.jaxpr_report(call.fn, call.args, call.kwargs, call.name,
                                                 call.arg_sources), args)

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("-o", action="store_true", help="return the result object")
    @magic_arguments.argument("-q", action="store_true", help="do not display the result")
    @magic_arguments.argument("--optimized", action="store_true",
                              help="the HLO after XLA's optimisations instead of StableHLO")
    @magic_arguments.argument("--static", default=None,
                              help="comma-separated static argument names")
    @magic_arguments.argument("call", nargs="+", help="an example call, e.g. f(x)")
    @line_magic
    @magic_errors
    def hlo(self, line: str):
        """The StableHLO module of a call (or, with --optimized, XLA's optimised HLO)."""
        args = magic_arguments.parse_argstring(self.hlo, line)
        call = CallSpec(" ".join(args.call), self.shell.user_ns)
        with TerminalProgress(f"compiling {call.name}" if args.optimized
                              else f"lowering {call.name}"):
            result = reports.hlo_report(call.fn, call.args, call.kwargs, call.name,
                                        args.optimized, _split_names(args.static))
        return self._finish(result, args)

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("-o", action="store_true", help="return the result object")
    @magic_arguments.argument("-q", action="store_true", help="do not display the result")
    @line_magic
    @magic_errors
    def devices(self, line: str):
        """The devices jaxkit can run on."""
        args = magic_arguments.parse_argstring(self.devices, line)
        return self._finish(reports.devices_report(), args)


@magics_class
class MemoryMagics(Magics):
    """``%memory``."""

    @magic_arguments.magic_arguments()
    @magic_arguments.argument("-o", action="store_true", help="return the result object")
    @magic_arguments.argument("-q", action="store_true", help="do not display the result")
    @magic_arguments.argument("--top", type=int, default=10,
                              help="how many of the largest live arrays to list")
    @magic_arguments.argument("call", nargs="*",
                              help="an example call, e.g. step(params, x): XLA's memory "
                                   "analysis of its compiled program")
    @line_magic
    @magic_errors
    def memory(self, line: str):
        """Live arrays by device and the largest of them; or, given a call, the memory XLA's
        compiled program for it needs (arguments, outputs, temporaries, peak)."""
        args = magic_arguments.parse_argstring(self.memory, line)
        if args.call:
            call = CallSpec(" ".join(args.call), self.shell.user_ns)
            with TerminalProgress(f"compiling {call.name}"):
                result = memory.program_memory_report(call.fn, call.args, call.kwargs,
                                                      call.name)
        else:
            result = memory.live_memory_report(args.top)
        if not args.q:
            display(result)
        return result if args.o else None


def load_ipython_extension(ipython) -> None:
    """``%load_ext jaxkit`` (or ``jaxkit.magics``)."""
    ipython.register_magics(JaxkitMagics)
    ipython.register_magics(MemoryMagics)
