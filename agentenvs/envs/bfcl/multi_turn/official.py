"""The official BFCL backends, loaded from an installed ``bfcl-eval`` without importing it.

Importing the ``bfcl_eval`` package creates result directories and imports every model
SDK; the backend classes themselves are plain modules under
``bfcl_eval/eval_checker/multi_turn_eval/func_source_code/``. This module finds the
package folder with ``importlib.util.find_spec`` (which runs no package code) and
executes only the backend module a class lives in, by file path. A backend's own
``from bfcl_eval.eval_checker...func_source_code.long_context import ...`` is served by
placeholder package entries that exist only while the module executes, so no
``__init__.py`` of the package runs and nothing named ``bfcl_eval`` is left behind.

Loaded modules are kept in ``sys.modules`` under ``_agentenvs_bfcl_official_<module>``,
so instances of their classes pickle (snapshots) in any process that loaded them.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path

from agentenvs.core.errors import MissingExtraError

#: the pip extra that installs ``bfcl-eval``
EXTRA = "bfcl"
PACKAGE = "bfcl_eval"
#: overrides where the ``bfcl_eval`` package folder is (its ``__init__.py`` folder)
PACKAGE_DIR_ENV = "AGENTENVS_BFCL_EVAL_DIR"
BACKEND_SUBDIR = ("eval_checker", "multi_turn_eval", "func_source_code")
DOC_SUBDIR = ("data", "multi_turn_func_doc")
MODULE_PREFIX = "_agentenvs_bfcl_official_"


@dataclass(frozen=True)
class OfficialClass:
    module: str
    doc_file: str
    stateless: bool = False


OFFICIAL_CLASSES: dict[str, OfficialClass] = {
    "GorillaFileSystem": OfficialClass("gorilla_file_system", "gorilla_file_system.json"),
    "MathAPI": OfficialClass("math_api", "math_api.json", stateless=True),
    "MessageAPI": OfficialClass("message_api", "message_api.json"),
    "TwitterAPI": OfficialClass("posting_api", "posting_api.json"),
    "TicketAPI": OfficialClass("ticket_api", "ticket_api.json"),
    "TradingBot": OfficialClass("trading_bot", "trading_bot.json"),
    "TravelAPI": OfficialClass("travel_booking", "travel_booking.json"),
    "VehicleControlAPI": OfficialClass("vehicle_control", "vehicle_control.json"),
}


def package_dir(override: str | Path | None = None) -> Path:
    """The installed ``bfcl_eval`` package folder; MissingExtraError when there is none."""
    chosen = override or os.environ.get(PACKAGE_DIR_ENV)
    if chosen:
        path = Path(chosen)
        if not path.is_dir():
            raise FileNotFoundError(f"bfcl_eval package folder {path} does not exist")
        return path
    loaded = sys.modules.get(PACKAGE)
    locations = getattr(getattr(loaded, "__spec__", None), "submodule_search_locations", None)
    if not locations:
        try:
            # a top-level find_spec locates the package without running its __init__
            spec = importlib.util.find_spec(PACKAGE)
        except (ImportError, ValueError):
            spec = None
        locations = spec.submodule_search_locations if spec is not None else None
    if not locations:
        raise MissingExtraError("bfcl-eval (import name bfcl_eval)", EXTRA)
    return Path(next(iter(locations)))


def _official(class_name: str) -> OfficialClass:
    try:
        return OFFICIAL_CLASSES[class_name]
    except KeyError:
        raise KeyError(
            f"{class_name!r} is not an official BFCL backend class; known: {sorted(OFFICIAL_CLASSES)}"
        ) from None


def doc_path(class_name: str, override: str | Path | None = None) -> Path:
    """The official function-doc file of ``class_name`` in the installed package."""
    return package_dir(override).joinpath(*DOC_SUBDIR, _official(class_name).doc_file)


def _placeholders(root: Path) -> dict[str, types.ModuleType]:
    """Empty package modules from ``bfcl_eval`` down to the backend folder."""
    made: dict[str, types.ModuleType] = {}
    name, folder = PACKAGE, root
    for part in ("", *BACKEND_SUBDIR):
        if part:
            name, folder = f"{name}.{part}", folder / part
        module = types.ModuleType(name)
        module.__path__ = [str(folder)]  # a package, so submodules import from its folder
        module.__package__ = name
        made[name] = module
    return made


def load_module(module: str, override: str | Path | None = None) -> types.ModuleType:
    """Execute one backend module of the installed package by file path (cached)."""
    qualified = MODULE_PREFIX + module
    cached = sys.modules.get(qualified)
    if cached is not None and override is None:
        return cached
    root = package_dir(override)
    path = root.joinpath(*BACKEND_SUBDIR, f"{module}.py")
    if cached is not None and cached.__file__ == str(path):
        return cached
    if not path.is_file():
        raise FileNotFoundError(f"official backend module {path} not found in {root}")
    spec = importlib.util.spec_from_file_location(qualified, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    loaded = importlib.util.module_from_spec(spec)
    before = set(sys.modules)
    # with the real package already imported, its own modules serve the backend's imports
    stubs = {} if PACKAGE in sys.modules else _placeholders(root)
    sys.modules.update(stubs)
    sys.modules[qualified] = loaded
    try:
        spec.loader.exec_module(loaded)
    except BaseException:
        sys.modules.pop(qualified, None)
        raise
    finally:
        for name in set(sys.modules) - before:
            if name == PACKAGE or name.startswith(PACKAGE + "."):
                del sys.modules[name]
    return loaded


def official_class(class_name: str, override: str | Path | None = None) -> type:
    """The official backend class ``class_name`` (e.g. ``GorillaFileSystem``)."""
    module = load_module(_official(class_name).module, override)
    try:
        return getattr(module, class_name)
    except AttributeError:
        raise ImportError(f"{module.__file__} defines no class {class_name!r}") from None


def is_stateless(class_name: str) -> bool:
    """Stateless official classes get no ``_load_scenario`` call, as in the official executor."""
    return class_name in OFFICIAL_CLASSES and OFFICIAL_CLASSES[class_name].stateless
