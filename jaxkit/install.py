"""``install_as_jax()``: run existing JAX code and JAX libraries (Optax, chex, Flax) on jaxkit.

A ``sys.meta_path`` finder answers every import of ``jax`` or ``jax.X.Y`` with jaxkit's module of
the same role: ``jax`` is ``jaxkit``, ``jax.numpy`` is ``jaxkit.numpy``, ``jax.extend.core`` is
``jaxkit.extend.core``, and the few private ``jax._src.X`` modules that libraries reach are the
compatibility modules in ``jaxkit._src_compat``. The same module object is registered under both
names, so ``jax.numpy is jaxkit.numpy``.

``jax`` itself is a thin module over ``jaxkit``: every attribute is jaxkit's, except that it
reports the JAX version whose behaviour jaxkit reproduces (``__version__``, ``__version_info__``,
``jax.version``: libraries choose code paths by it) and that ``jax.core`` and other public modules
whose jaxkit counterpart is internal resolve to their compatibility modules.

The two packages are never mixed: installing fails if the real ``jax`` is already imported, and
once installed, a ``jax`` module that jaxkit does not provide raises ``ModuleNotFoundError``
saying so instead of falling through to the real package.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types


__all__ = ["install_as_jax", "is_installed", "jaxkit_name"]

JAX_VERSION = "0.10.2"

# ``jax`` modules whose jaxkit counterpart is not ``jaxkit`` + the same tail: JAX's private
# modules, and public ones whose jaxkit module of the same name is internal, with another
# interface (see ``jaxkit._src_compat``).
_RENAMED = {
    "jax.core": "jaxkit._src_compat.core",
    "jax.version": "jaxkit._src_compat.version",
    "jax.interpreters.partial_eval": "jaxkit._src_compat.partial_eval",
    "jax.experimental.hijax": "jaxkit._src_compat.hijax",
    # Orbax imports these two (Pathways-only code uses them; see each module)
    "jax.interpreters.pxla": "jaxkit._src_compat.interpreters.pxla",
    "jax.experimental.colocated_python.serialization":
        "jaxkit._src_compat.colocated_python_serialization",
}
_RENAMED_PREFIXES = (
    ("jax._src", "jaxkit._src_compat"),
)


def jaxkit_name(jax_name: str) -> str:
    """The jaxkit module that stands for the ``jax`` module ``jax_name``."""
    if jax_name in _RENAMED:
        return _RENAMED[jax_name]
    for prefix, target in _RENAMED_PREFIXES:
        if jax_name == prefix or jax_name.startswith(prefix + "."):
            return target + jax_name[len(prefix):]
    return "jaxkit" + jax_name[len("jax"):]


def _is_jax_name(name: str) -> bool:
    return name == "jax" or name.startswith("jax.")


class _AliasLoader(importlib.abc.Loader):
    """Loads a ``jax`` name as the already-importable jaxkit module."""

    def __init__(self, target: str):
        self.target = target
        self._target_spec = None

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self._target_spec = module.__spec__
        return module

    def exec_module(self, module) -> None:
        # The import system stamped the alias spec on the module; jaxkit's own name stays the
        # module's identity (reload, pickling by module name, error messages).
        module.__spec__ = self._target_spec


# ``jax`` packages with a child in ``_RENAMED``: they are thin modules over jaxkit's package
# rather than the package itself, because ``from jax.experimental import hijax`` looks the
# child up by the parent's own name.
_FACADES = {"jax"} | {n.rsplit(".", 1)[0] for n in _RENAMED if n.count(".") > 1}


def _make_facade(jax_name: str) -> types.ModuleType:
    """A package ``jax_name`` whose attributes are those of jaxkit's package of the same role,
    its renamed children resolving to their compatibility modules."""
    target = importlib.import_module(jaxkit_name(jax_name))
    module = types.ModuleType(jax_name, target.__doc__)
    module.__path__ = []  # a package, so that its children's imports come to the finder
    module.__all__ = list(getattr(target, "__all__", ()))
    module.__jaxkit_module__ = target.__name__

    def __getattr__(name: str):
        child = f"{jax_name}.{name}"
        if child in _RENAMED:
            return importlib.import_module(child)
        try:
            return getattr(target, name)
        except AttributeError as err:
            if name in getattr(target, "_deprecations", ()):  # JAX's word on a removed name
                raise AttributeError(str(err)) from None
        if not name.startswith("__"):
            try:
                return importlib.import_module(child)
            except ModuleNotFoundError:
                pass
        raise AttributeError(f"module '{jax_name}' has no attribute '{name}' (jaxkit does not "
                             "provide it)")

    def __dir__():
        return sorted(set(dir(target)) | set(vars(module)))

    module.__getattr__ = __getattr__
    module.__dir__ = __dir__
    if jax_name == "jax":
        module.__version__ = JAX_VERSION
        module.__version_info__ = tuple(int(p) for p in JAX_VERSION.split("."))
        module.__jaxkit_version__ = target.__version__
    return module


class _FacadeLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return _make_facade(spec.name)

    def exec_module(self, module) -> None:
        pass


class JaxkitAsJaxFinder(importlib.abc.MetaPathFinder):
    """Resolves ``jax`` and ``jax.*`` imports to jaxkit's modules (see the module docstring)."""

    def find_spec(self, fullname, path=None, target=None):
        if not _is_jax_name(fullname):
            return None
        if fullname in _FACADES:
            return importlib.machinery.ModuleSpec(fullname, _FacadeLoader(), is_package=True)
        name = jaxkit_name(fullname)
        try:
            found = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            found = None
        if found is None:
            raise ModuleNotFoundError(
                f"No module named '{fullname}': jaxkit.install_as_jax() is active and jaxkit "
                f"has no '{name}' to stand for it. The real jax package is not used alongside "
                "jaxkit; run this code without install_as_jax() to use JAX itself.",
                name=fullname)
        is_package = found.submodule_search_locations is not None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(name), is_package=is_package)


_finder = JaxkitAsJaxFinder()


def is_installed() -> bool:
    """Whether ``import jax`` currently resolves to jaxkit."""
    return _finder in sys.meta_path


def install_as_jax() -> None:
    """Make ``import jax`` (and every ``jax.X.Y``) import jaxkit's modules from now on.

    Call it before anything imports the real ``jax`` (first thing in a script, or use
    ``python -m jaxkit run script.py``, or ``%load_ext jaxkit.magics.as_jax`` in a notebook).
    Calling it again is harmless.
    """
    if is_installed():
        return
    real = sorted(n for n, m in sys.modules.items()
                  if _is_jax_name(n) and m is not None
                  and not getattr(m, "__name__", "").startswith("jaxkit")
                  and not getattr(m, "__jaxkit_module__", None))
    if real:
        raise RuntimeError(
            f"install_as_jax(): the real jax package is already imported ({', '.join(real[:3])}"
            f"{', ...' if len(real) > 3 else ''}); jaxkit cannot stand in for it in this "
            "process, and the two are never mixed. Call jaxkit.install_as_jax() before "
            "anything imports jax (first line of the script, or `python -m jaxkit run "
            "script.py`), or restart the kernel.")
    sys.meta_path.insert(0, _finder)
