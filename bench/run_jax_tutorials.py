"""Run the code cells of JAX's MyST tutorials under JAX and under jaxkit and compare outputs.

    python bench/run_jax_tutorials.py DOCS_DIR [--show-diffs] [--timeout=SECONDS] [name.md ...]
    python bench/run_jax_tutorials.py DOCS_DIR --list

(no names: every document under DOCS_DIR that has code cells, e.g. ``notebooks/*.md``;
``--list`` prints those documents, with their numbers of code cells, and runs nothing)

(``JAXKIT_SRC=/path/to/checkout`` runs another checkout's jaxkit, e.g. a baseline.)

DOCS_DIR holds the tutorials' ``.md`` sources (the ``docs/`` of jax-ml/jax at tag
``jax-v0.10.2``; they are not vendored here). Each document runs in two fresh subprocesses:
one with the real ``jax`` (the test-only oracle) and one where ``jax`` and its submodules
resolve to ``jaxkit`` (a meta-path alias set up by this script, so the tutorial code runs
unchanged). Cells run in order in one namespace, like a notebook: what a cell prints, plus
the repr of its last expression, is its output; an exception becomes one line with its class.
IPython magics (``%timeit`` ...) are dropped and cells using them are not compared (their
output is timing). Memory addresses are masked. Prints per document the cells that match,
and the differing cells (with ``--show-diffs``, both outputs). A document whose run takes
longer than ``--timeout`` (default 900 s) under either library has every cell marked as timed
out on that side, and the run goes on with the next document.
"""
from __future__ import annotations

import ast
import difflib
import json
import os
import re
import subprocess
import sys

_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.S | re.M)

_RUNNER = r'''
import ast, contextlib, io, json, sys, traceback, importlib, importlib.abc, importlib.util
import os
os.environ.setdefault("XLA_FLAGS", "")
if MODE == "jaxkit" and os.environ.get("JAXKIT_SRC"):
    # Another checkout's jaxkit (e.g. a baseline): ahead of an editable install's finder.
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__name__.lower()]
    sys.path.insert(0, os.environ["JAXKIT_SRC"])
if MODE == "jaxkit":
    class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            if name == "jax" or name.startswith("jax."):
                # jax._src.X: the compatibility modules that stand for JAX's private ones.
                target = ("jaxkit._src_compat" + name[8:] if name.startswith("jax._src")
                          else "jaxkit" + name[3:])
                try:
                    spec = importlib.util.find_spec(target)
                except ImportError:
                    return None
                if spec is None:
                    return None
                return importlib.util.spec_from_loader(name, self, is_package=True)
            return None
        def create_module(self, spec):
            name = spec.name
            return importlib.import_module("jaxkit._src_compat" + name[8:]
                                           if name.startswith("jax._src")
                                           else "jaxkit" + name[3:])
        def exec_module(self, module):
            pass
    sys.meta_path.insert(0, _Alias())
cells = json.loads(sys.stdin.read())
ns = {"__name__": "__main__"}
results = []
for src in cells:
    out = io.StringIO()
    try:
        tree = ast.parse(src)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            exec(compile(tree, "<cell>", "exec"), ns)
            if last is not None:
                value = eval(compile(last, "<cell>", "eval"), ns)
                if value is not None:
                    print(repr(value))
    except BaseException as e:  # noqa: BLE001
        out.write(f"<raised {type(e).__name__}>\n")
    results.append(out.getvalue())
print(json.dumps(results))
'''


def cells_of(text: str) -> list[tuple[str, bool]]:
    """(source, compared) per code cell; magic lines are dropped (the cell is then not
    compared when they were timing magics)."""
    out = []
    for m in _CELL.finditer(text):
        lines, compared = [], True
        body = m.group(1)
        # MyST cell options: ``:key: value`` lines, or a ``---``-delimited YAML block.
        body = re.sub(r"\A---\n.*?\n---\n", "", body, flags=re.S)
        for line in body.splitlines():
            if re.match(r"^:[\w-]+:", line):
                continue
            if line.lstrip().startswith(("%", "!")):
                compared = False if "time" in line else compared
                continue
            lines.append(line)
        src = "\n".join(lines)
        try:
            ast.parse(src)
        except SyntaxError:
            compared = False
            src = "pass"
        out.append((src, compared))
    return out


def discover(docs_dir: str) -> list[str]:
    """Every MyST document under ``docs_dir`` with code cells (``notebooks/``, ``jep/``... too),
    as paths relative to it; the ``.ipynb`` twins of these documents hold the same cells."""
    found = []
    for root, _, files in os.walk(docs_dir):
        for name in files:
            path = os.path.join(root, name)
            if name.endswith(".md"):
                with open(path) as f:
                    if _CELL.search(f.read()):
                        found.append(os.path.relpath(path, docs_dir))
    return sorted(found)


def run(mode: str, cells: list[str], timeout: float = 900) -> list[str]:
    code = f"MODE = {mode!r}\n" + _RUNNER
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    try:
        proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(cells), text=True,
                              capture_output=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [f"<runner timed out after {timeout:g} s>"] * len(cells)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return [f"<runner failed: {proc.stderr[-500:]}>"] * len(cells)


def _mask(text: str) -> str:
    return re.sub(r"0x[0-9a-f]+", "0x?", text)


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    show = "--show-diffs" in sys.argv
    timeout = float(next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--timeout=")),
                         900))
    docs_dir, names = args[0], args[1:]
    names = names or discover(docs_dir)
    if "--list" in sys.argv:
        for name in names:
            with open(os.path.join(docs_dir, name)) as f:
                print(f"{name}: {len(cells_of(f.read()))} code cells")
        return 0
    total_same = total_cmp = 0
    for name in names:
        with open(os.path.join(docs_dir, name)) as f:
            cells = cells_of(f.read())
        srcs = [c for c, _ in cells]
        ref, ours = run("jax", srcs, timeout), run("jaxkit", srcs, timeout)
        same, differ = 0, []
        compared = [i for i, (_, c) in enumerate(cells) if c]
        for i in compared:
            if _mask(ref[i]) == _mask(ours[i]):
                same += 1
            else:
                differ.append(i)
        total_same += same
        total_cmp += len(compared)
        print(f"{name}: {same}/{len(compared)} cells print the same "
              f"({len(cells) - len(compared)} timing/magic cells not compared)")
        for i in differ:
            print(f"  cell {i} differs:")
            if show:
                print("    source: " + srcs[i].replace("\n", "\n            ")[:800])
                for line in difflib.unified_diff(_mask(ref[i]).splitlines(),
                                                 _mask(ours[i]).splitlines(), "jax",
                                                 "jaxkit", lineterm="", n=1):
                    print("    " + line[:300])
    print(f"total: {total_same}/{total_cmp} compared cells print the same")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
