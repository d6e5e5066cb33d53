"""Run Optax's, chex's and Flax's own test suites against JAX and against jaxkit; print the
counts side by side.

    python bench/ecosystem_tests.py                      # throwaway venv, all three suites
    python bench/ecosystem_tests.py --suites optax --venv .venv --timeout 900

A throwaway virtual environment (or ``--venv``) gets the pinned releases, JAX 0.10.2 and this
checkout of jaxkit. Each suite's test files come from the release itself: Optax's and chex's
wheels ship their ``*_test.py`` files, Flax's source distribution its ``tests/`` folder. Each
file is run with pytest twice, in fresh processes: once as it is (real JAX), once as
``python -m jaxkit run -m pytest`` (``import jax`` is jaxkit). Counts are summed per suite.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

PINS = {"optax": "optax==0.2.8", "chex": "chex==0.1.92", "flax": "flax==0.12.8"}
EXTRA_DEPS = ["jax==0.10.2", "pytest", "absl-py", "scikit-learn", "cloudpickle", "dm-tree",
              "einops"]
ROOT = Path(__file__).resolve().parent.parent


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, text=True, capture_output=True, **kw)


def make_venv(path: Path) -> Path:
    py = path / "bin" / "python"
    if not py.exists():
        sh([sys.executable, "-m", "venv", str(path)], check=True)
    reqs = [*PINS.values(), *EXTRA_DEPS]
    sh([str(py), "-m", "pip", "install", "-q", "-e", str(ROOT), *reqs], check=True)
    return py


def suite_files(py: Path, suite: str, workdir: Path, flax_sdist: str | None = None
                ) -> list[Path]:
    """The test files of ``suite``, from the installed package or its sdist (``flax_sdist``:
    an unpacked one already on disk, for machines that cannot download it)."""
    if suite in ("optax", "chex"):
        site = sh([str(py), "-c", f"import {suite}, os; print(os.path.dirname({suite}.__file__))"],
                  check=True).stdout.strip()
        return sorted(Path(site).rglob("*_test.py"))
    dest = Path(flax_sdist) if flax_sdist else workdir / "flax_sdist"
    if not dest.exists():
        sh([str(py), "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
            "-d", str(workdir), PINS["flax"]], check=True)
        tar = next(workdir.glob("flax-*.tar.gz"))
        with tarfile.open(tar) as t:
            t.extractall(dest, filter="data")
    return sorted(dest.rglob("tests/**/*_test.py"))


def run_file(py: Path, test: Path, on_jaxkit: bool, timeout: int, env: dict,
             select: str | None = None) -> dict:
    # -P: the test file's folder (the working directory) stays off sys.path, else its modules
    # shadow the standard library's (optax/tree_utils/_random.py hides the C module
    # ``_random`` that ``random`` imports).
    head = [str(py), "-P", "-m", "jaxkit", "run", "-m", "pytest"] if on_jaxkit else \
        [str(py), "-P", "-m", "pytest"]
    report = Path(tempfile.mkdtemp()) / "report.xml"
    cmd = [*head, "-q", "-rfE", "--tb=line", "-p", "no:cacheprovider",
           f"--junitxml={report}", *(["-k", select] if select else []), str(test)]
    start = time.perf_counter()
    try:
        out = sh(cmd, timeout=timeout, cwd=test.parent, env=env)
        text = out.stdout + out.stderr
    except subprocess.TimeoutExpired as e:
        text = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return {"timeout": 1, "seconds": timeout, "tail": text[-3000:]}
    counts: dict = {"seconds": time.perf_counter() - start}
    if report.exists():
        suite = ET.parse(report).getroot()
        suite = suite.find("testsuite") if suite.tag == "testsuites" else suite
        tests, failed, errors, skipped = (int(suite.get(k, 0)) for k in
                                          ("tests", "failures", "errors", "skipped"))
        counts.update(passed=tests - failed - errors - skipped, failed=failed, error=errors,
                      skipped=skipped)
    else:
        counts["error"] = 1  # pytest did not get to write its report
    counts["tail"] = text[-3000:]
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suites", default="optax,chex,flax")
    parser.add_argument("--venv", help="reuse this virtual environment (else a throwaway one)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per test file")
    parser.add_argument("--files", help="only test files whose name contains one of these "
                        "(comma-separated; one ending in .py is a whole file name: "
                        "transforms_test.py but not linen_transforms_test.py)")
    parser.add_argument("--log", help="write each file's pytest output tail here")
    parser.add_argument("--start", help="skip the suite's files before the first whose path "
                        "contains this (resume a cut-off run)")
    parser.add_argument("--flax-sdist", help="an unpacked Flax source distribution to take the "
                        "tests from (e.g. /tmp/eco/flaxsd/flax-0.12.8), instead of pip download")
    parser.add_argument("-k", dest="select", help="pytest's -k expression for every file (a "
                        "slice of a heavy file, e.g. 'not preserve_dtype')")
    parser.add_argument("--backends", default="jax,jaxkit",
                        help="which of jax,jaxkit to run (re-measure one side only)")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="jaxkit-eco-"))
    py = Path(args.venv) / "bin" / "python" if args.venv else make_venv(workdir / "venv")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    log = open(args.log, "w") if args.log else None
    totals = {}
    for suite in args.suites.split(","):
        files = [f for f in suite_files(py, suite, workdir, args.flax_sdist)
                 if not args.files or any(p == f.name if p.endswith(".py") else p in f.name
                                          for p in args.files.split(","))]
        if args.start:
            first = next((i for i, f in enumerate(files) if args.start in str(f)), len(files))
            files = files[first:]
        backends = args.backends.split(",")
        per: dict = {b: {} for b in backends}
        for f in files:
            for backend in backends:
                c = run_file(py, f, backend == "jaxkit", args.timeout, env, args.select)
                for k, v in c.items():
                    if k != "tail":
                        per[backend][k] = per[backend].get(k, 0) + v
                line = " ".join(f"{k}={v}" for k, v in c.items()
                                if k not in ("tail", "seconds"))
                print(f"{suite:6} {f.name:42} {backend:7} {line} ({c['seconds']:.0f}s)",
                      flush=True)
                if log:
                    log.write(f"===== {suite} {f} {backend}\n{c.get('tail', '')}\n")
                    log.flush()
        totals[suite] = per
    print("\nsuite   backend  passed failed error skipped timeout  seconds")
    for suite, per in totals.items():
        for backend, c in per.items():
            print(f"{suite:7} {backend:7} {c.get('passed', 0):7} {c.get('failed', 0):6} "
                  f"{c.get('error', 0):5} {c.get('skipped', 0):7} {c.get('timeout', 0):7} "
                  f"{c.get('seconds', 0):8.0f}")


if __name__ == "__main__":
    main()
