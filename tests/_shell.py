"""A real IPython ``InteractiveShell`` with jaxkit's magics loaded, for the magics' tests.

The shell is IPython's singleton, shared by every test module of a run; each module runs its
prelude (its imports and definitions) in it once, through a module-scoped fixture."""
from __future__ import annotations

import textwrap

from IPython.core.interactiveshell import InteractiveShell


def magic_shell(prelude: str, **user_ns) -> InteractiveShell:
    """The shell after ``%load_ext jaxkit``, ``user_ns`` and ``prelude`` (dedented): an error
    in the prelude fails the fixture rather than every test after it."""
    shell = InteractiveShell.instance()
    shell.run_cell("%load_ext jaxkit", store_history=False)
    shell.user_ns.update(user_ns)
    shell.run_cell(textwrap.dedent(prelude), store_history=False).raise_error()
    return shell


def run(shell: InteractiveShell, code: str):
    """Run one cell (not stored in the history) and return its result, raising its error."""
    result = shell.run_cell(code, store_history=False)
    result.raise_error()
    return result.result
