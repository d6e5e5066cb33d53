"""Train notebooks/06_flax_digits.ipynb's model on JAX and on jaxkit and compare the test
accuracy and final loss (same code, same seeds).

    python bench/flax_digits_compare.py

Each backend runs in its own process: the notebook's code cells are executed in order, IPython
magics left out (a ``%%jit`` cell's function is wrapped in ``jax.jit``, as the magic does; the
line magics only display).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "06_flax_digits.ipynb"

RUNNER = r"""
import json, re, sys
if sys.argv[1] == "jaxkit":
    import jaxkit
    jaxkit.install_as_jax()
import matplotlib
matplotlib.use("Agg")
ns = {}
for cell in json.load(open(sys.argv[2]))["cells"]:
    if cell["cell_type"] != "code":
        continue
    src = "".join(l for l in cell["source"] if not l.startswith("# NBVAL"))
    if src.startswith("%%jit"):
        first, _, body = src.partition("\n")
        name = re.search(r"(\w+)\(", first.split(None, 1)[1]).group(1)
        exec(body, ns)
        exec(f"{name} = jax.jit({name})", ns)
    elif src.lstrip().startswith("%") or re.search(r"^\w+ = %", src, re.M):
        continue
    else:
        exec(src, ns)
print(json.dumps({"backend": sys.argv[1], "test_accuracy": ns["test_acc"],
                  "final_loss": sum(ns["losses"][-20:]) / 20, "steps": len(ns["losses"])}))
"""


def main() -> None:
    results = {}
    for backend in ("jax", "jaxkit"):
        out = subprocess.run([sys.executable, "-c", RUNNER, backend, str(NOTEBOOK)],
                             capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"{backend} failed:\n{out.stderr[-3000:]}")
        results[backend] = json.loads(out.stdout.strip().splitlines()[-1])
        print(results[backend])
    diff = abs(results["jax"]["test_accuracy"] - results["jaxkit"]["test_accuracy"])
    print(f"test accuracy: JAX {results['jax']['test_accuracy']:.4f}, jaxkit "
          f"{results['jaxkit']['test_accuracy']:.4f} (difference {100 * diff:.2f} points)")


if __name__ == "__main__":
    main()
