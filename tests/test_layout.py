"""The package's layout rules that import-linter cannot check: no function-local imports of
jaxkit modules (a cycle broken by hand means the layering is wrong), files under the size
budget, and the magics on jaxkit's public API only."""
import ast
import pathlib
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]

# The optional IPython layer sits above everything; ``%load_ext jaxkit`` reaches it through this
# plugin hook, lazily so that ``import jaxkit`` never imports IPython.
ALLOWED_LOCAL = {("jaxkit/__init__.py", "jaxkit.magics")}


def _sources():
    return sorted((ROOT / "jaxkit").rglob("*.py"))


def _local_imports(path: pathlib.Path):
    tree = ast.parse(path.read_text())
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.ImportFrom):  # relative: always inside the package
                names = ["jaxkit." + (node.module or "")]
            else:
                continue
            for name in names:
                if name == "jaxkit" or name.startswith("jaxkit."):
                    yield node.lineno, name


def test_no_function_local_imports_of_jaxkit_modules():
    found = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        found += [f"{rel}:{line} imports {name}" for line, name in _local_imports(path)
                  if (rel, name) not in ALLOWED_LOCAL]
    assert not found, "function-local imports of jaxkit modules:\n" + "\n".join(found)


def test_files_are_under_800_lines():
    paths = _sources() + sorted((ROOT / "magics").rglob("*.py"))
    big = [f"{p.relative_to(ROOT)}: {n} lines" for p in paths
           if (n := len(p.read_text().splitlines())) > 800]
    assert not big, "files over 800 lines (split them along a real seam):\n" + "\n".join(big)


def test_every_package_is_installed():
    """A package missing from pyproject.toml works from a source checkout but not installed."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {p.parent.relative_to(ROOT).as_posix().replace("/", ".")
             for p in (ROOT / "jaxkit").rglob("__init__.py")}
    assert found <= listed, f"packages not installed: {sorted(found - listed)}"


def test_import_linter_contracts_hold():
    """The layering of pyproject.toml's [tool.importlinter] contracts (also run by .ci/run)."""
    script = pathlib.Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(script), "--config", str(ROOT / "pyproject.toml")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


def test_source_checkout_finds_the_magics(tmp_path):
    """Python started at the repository root imports ./jaxkit (the source folder), which has no
    magics subpackage: the checkout finder maps jaxkit.magics onto ./magics."""
    from jaxkit import _checkout

    magics_dir = _checkout.checkout_magics_dir(str(ROOT / "jaxkit"))
    assert magics_dir == str(ROOT / "magics")
    spec = _checkout.CheckoutMagicsFinder(magics_dir).find_spec("jaxkit.magics")
    assert spec.origin == str(ROOT / "magics" / "__init__.py")
    assert spec.submodule_search_locations == [magics_dir]
    assert _checkout.CheckoutMagicsFinder(magics_dir).find_spec("jaxkit.numpy") is None
    # An installed package (a jaxkit folder with magics inside) is left alone.
    (tmp_path / "jaxkit" / "magics").mkdir(parents=True)
    (tmp_path / "magics").mkdir()
    (tmp_path / "magics" / "__init__.py").write_text("")
    assert _checkout.checkout_magics_dir(str(tmp_path / "jaxkit")) is None


# What the magics may use of jaxkit: its public API. import-linter cannot see them (the source
# folder magics/ is installed as jaxkit.magics), so this test reads their imports and attribute
# accesses. jaxkit.core is the jaxpr IR (JAX exports it as jax.extend.core), jaxkit.transforms
# the transformations' public objects.
# jaxkit.extend.source_info_util is JAX's public hook (register_exclusion) for libraries
# whose frames should not count as the user's line.
MAGICS_MAY_IMPORT = {"jaxkit", "jaxkit.numpy", "jaxkit.lax", "jaxkit.random", "jaxkit.nn",
                     "jaxkit.tree_util", "jaxkit.core", "jaxkit.transforms.jit",
                     "jaxkit.extend", "jaxkit.extend.source_info_util"}


def _magics_uses():
    for path in sorted((ROOT / "magics").rglob("*.py")):
        tree = ast.parse(path.read_text())
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                    node.module.startswith("jaxkit") and not node.module.startswith(
                        "jaxkit.magics"):
                for a in node.names:
                    yield path.name, node.module, a.name
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("jaxkit") and not a.name.startswith("jaxkit.magics"):
                        yield path.name, a.name, None
                        aliases[a.asname or a.name.split(".")[0]] = a.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                    node.value.id in aliases:
                yield path.name, aliases[node.value.id], node.attr


def test_magics_use_only_public_jaxkit():
    bad = []
    for file, module, name in _magics_uses():
        if module not in MAGICS_MAY_IMPORT:
            bad.append(f"{file}: imports {module}")
        elif name is not None and name.startswith("_") and not name.endswith("__"):
            bad.append(f"{file}: uses private {module}.{name}")
    assert not bad, "magics reach past jaxkit's public API:\n" + "\n".join(sorted(set(bad)))
