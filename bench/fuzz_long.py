"""The differential fuzzer's long run: every op record and random programs against JAX with many
more (randomized) hypothesis examples than the CI slice, counting cases per area and listing
every mismatch, allowed (with the allowlist entry's reason) or not.

    PYTHONPATH=. python bench/fuzz_long.py [--minutes 10] [--examples 40] [--programs 400]
                                           [--seed 0] [--areas elementwise,lax]

Records run round-robin, ``--examples`` examples per record per round, until ``--minutes``
are up (a record started before then finishes); then ``--programs`` random programs. A case
is one drawn input checked in up to four modes (eager, jit, vmap, grad); figures count both.

Known hang, kept out of the records: ``jnp.gcd``/``jnp.lcm`` with the extremes of an integer
type (``gcd(int32(-2**31), 6)``) loop forever in JAX 0.10.2 and in jaxkit alike (Euclid's
``while_loop`` on ``abs(INT_MIN) == INT_MIN``), so their record draws small integers only."""
from __future__ import annotations

import argparse
import collections
import itertools
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "fuzz"))

import numpy as np  # noqa: E402
from _fuzz_allow import allowed  # noqa: E402
from _fuzz_core import case_st, check_case  # noqa: E402
from _fuzz_programs import check_program, program_st  # noqa: E402
from _fuzz_records import AREAS, RECORDS  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

HARNESS_ERRORS = []


def run_record(op, examples, run_seed, cases, modes, found):
    @seed(run_seed)
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def body(data):
        arrays, params, case_seed = data.draw(case_st(op))
        cases[op.area] += 1
        stats = {}
        found.extend((op.area, op.name, f) for f in check_case(
            op, arrays, params, np.random.default_rng(case_seed), stats=stats))
        for mode, n in stats.items():
            modes[op.area, mode] += n

    try:
        body()
    except Exception as e:  # noqa: BLE001  (a fault in the fuzzer itself: reported, run goes on)
        HARNESS_ERRORS.append(f"{op.name}: {type(e).__name__}: {e}")


def run_programs(n, run_seed, cases, found):
    @seed(run_seed)
    @settings(max_examples=n, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(program_st())
    def body(program):
        cases["programs"] += 1
        found.extend(("programs", "program", f) for f in check_program(*program))

    body()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--examples", type=int, default=40)
    ap.add_argument("--programs", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--areas", default=",".join(AREAS))
    args = ap.parse_args()
    # Areas interleaved (one record of each in turn), so a short run samples every area.
    by_area = [[op for op in RECORDS if op.area == a] for a in args.areas.split(",")]
    records = [op for group in itertools.zip_longest(*by_area) for op in group if op]
    cases, modes, found = collections.Counter(), collections.Counter(), []
    start = time.time()
    deadline = start + args.minutes * 60
    rounds = 0
    while time.time() < deadline:
        for op in records:
            if time.time() >= deadline:
                break
            before = len(found)
            run_record(op, args.examples, args.seed + rounds, cases, modes, found)
            # Progress as it goes: a run cut short still leaves its findings on the screen.
            print(f"  {op.area:<12}{op.name:<32}{len(found) - before:4d} mismatch(es)",
                  flush=True)
        rounds += 1
    if args.programs:
        run_programs(args.programs, args.seed, cases, found)
    elapsed = time.time() - start

    print(f"fuzz_long: {elapsed / 60:.1f} min, {len(records)} records, {rounds} round(s)")
    print(f"{'area':<12}{'cases':>8}{'eager':>8}{'jit':>8}{'vmap':>8}{'grad':>8}"
          f"{'mismatch':>10}{'allowed':>9}")
    unexplained, by_entry = [], collections.Counter()
    for area in AREAS + ["programs"]:
        rows = [f for f in found if f[0] == area]
        ok = [(n, f, allowed(n, f)) for _, n, f in rows]
        for n, f, entry in ok:
            if entry is None:
                unexplained.append(f)
            else:
                by_entry[entry.reason] += 1
        print(f"{area:<12}{cases[area]:>8}" + "".join(
            f"{modes[area, m]:>8}" for m in ("eager", "jit", "vmap", "grad"))
            + f"{len(rows):>10}{sum(1 for *_, e in ok if e is not None):>9}")
    print("\nallowed, per allowlist entry:")
    for reason, n in by_entry.most_common():
        print(f"  {n:6d}  {reason}")
    print(f"\nunexplained mismatches: {len(unexplained)}")
    for f in unexplained:
        print("  " + f.replace("\n", "\n    "))
    if HARNESS_ERRORS:
        print(f"\nfuzzer faults: {len(HARNESS_ERRORS)}")
        for e in HARNESS_ERRORS:
            print("  " + e[:2000])
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
