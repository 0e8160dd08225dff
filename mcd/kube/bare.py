"""Packages registered without running their `__init__`, completed on first use of a name only
it defines. Used by `mcd.kube.client` (the one importer of `kubernetes`) before it imports
the few submodules it needs: importing any part of a package runs the package's `__init__`
first, and `kubernetes/__init__.py` imports all of the client (see there).
"""

from __future__ import annotations

import importlib.util
import sys
import threading

_COMPLETING = threading.Lock()


def register_bare(name: str) -> None:
    """Put package `name` in `sys.modules` (and on its parent) unexecuted, unless imported already.

    Its submodules then import without it. Asking the package itself for a name it does not
    hold yet (`from name import x`, `name.x`) runs its `__init__` then, so code that imports
    the whole package later in the same process still gets all of it.
    """
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return  # not installed: the importer's own imports say so
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def complete(attr: str) -> object:
        with _COMPLETING:
            if module.__dict__.get("__getattr__") is complete:
                del module.__dict__["__getattr__"]
                loader.exec_module(module)
        try:
            return module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    module.__dict__["__getattr__"] = complete  # PEP 562: asked only for names not there
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)  # as the import system does for a submodule
