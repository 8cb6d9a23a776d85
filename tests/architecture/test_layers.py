"""The layers, read from the source: which module may import which (docs/architecture.md).

Every ``import`` and ``from ... import`` statement of the shipped packages is read with
``ast``, module-level and function-level alike (an import inside a function is still a
dependency). Only imports under ``if TYPE_CHECKING:`` are left out: they exist for the type
checker and never run.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("statecharts", "timers", "invocations", "routes")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if "migrations" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skipped.update(id(n) for n in ast.walk(child))
    return skipped


def imported_names(module: str, path: Path) -> Iterator[str]:
    """Every module name ``module`` imports (absolute; relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_nodes(tree)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            for alias in node.names:
                # `from package import submodule` depends on the submodule (its package's
                # __init__ runs first, as for any import, and is not counted); `from module
                # import name` on the module.
                submodule = f"{name}.{alias.name}"
                yield submodule if submodule in MODULES else name


def _project_module(name: str) -> str | None:
    """The project module ``name`` refers to (a module, or the package of an attribute)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


@functools.cache
def graph() -> dict[str, set[str]]:
    """The project's import graph, read once per process when a test first asks (not at
    collection: every xdist worker collects this module, and most never run its tests)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for module, path in MODULES.items():
        for name in imported_names(module, path):
            target = _project_module(name)
            if target is not None and target != module:
                edges[module].add(target)
    return edges



def _third_party(module: str) -> set[str]:
    return {
        name.split(".")[0]
        for name in imported_names(module, MODULES[module])
        if not name.startswith(PACKAGES) and name
    }


def test_the_graph_was_read() -> None:
    # (a guard: a reader that found nothing would pass every rule below)
    assert len(MODULES) > 50
    assert "statecharts.core.plan" in graph()["statecharts.drivers.memory"]
    assert "statecharts.stepper" in graph()["timers.firing"]


def test_the_core_imports_no_django_and_nothing_above_it() -> None:
    problems = []
    for module in MODULES:
        if not module.startswith("statecharts.core"):
            continue
        above = sorted(t for t in graph()[module] if not t.startswith("statecharts.core"))
        frameworks = sorted(_third_party(module) & {"django", "rest_framework", "django_q"})
        if above or frameworks:
            problems.append(f"{module}: {above + frameworks}")
    assert problems == []


def test_the_drivers_stand_on_the_core_alone() -> None:
    problems = []
    for module in MODULES:
        if not module.startswith("statecharts.drivers"):
            continue
        inside = ("statecharts.core", "statecharts.drivers")
        outside = sorted(t for t in graph()[module] if not t.startswith(inside))
        if outside or "django" in _third_party(module):
            problems.append(f"{module}: {outside}")
    assert problems == []


def test_statecharts_imports_none_of_the_apps_built_on_it() -> None:
    problems = [
        f"{module} -> {target}"
        for module in MODULES
        if module.split(".")[0] == "statecharts"
        for target in sorted(graph()[module])
        if target.split(".")[0] in ("timers", "invocations", "routes")
    ]
    assert problems == []


# Where the apps built on the stepper may use each other (docs/architecture.md): the timers
# app implements the routes app's TimerQueue behaviour (the default route timer queue) in one
# module, loaded only when routes is installed; the routes app's task route calls the
# invocations app's registry of task functions. Nothing else crosses, and routes never
# imports timers (it reaches its queue by the name in ROUTE_TIMER_QUEUE).
ALLOWED_BETWEEN_APPS = {
    ("timers.routequeue", "routes"),
    ("routes.builtins", "invocations"),
}


def test_the_apps_use_each_other_only_where_allowed() -> None:
    apps = ("timers", "invocations", "routes")
    problems = [
        f"{module} -> {target}"
        for module in MODULES
        if module.split(".")[0] in apps
        for target in sorted(graph()[module])
        if target.split(".")[0] in apps
        and target.split(".")[0] != module.split(".")[0]
        and (module, target.split(".")[0]) not in ALLOWED_BETWEEN_APPS
    ]
    assert problems == []


# Couplings the imports do not show: an app label written as a string (``apps.is_installed(
# "timers")``, ``apps.get_model("timers", "Timer")``), and a reverse relation another app's
# model adds to a model (``execution.route_timers``). ``statecharts`` finds the other apps
# through their declarations (statecharts.conf.Declaration) and the registries they fill;
# an app reaches another's rows through that app's interface (routes.queue.TimerQueue).
APP_LABELS = ("timers", "invocations", "routes")


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


# Django's app registry, asked by label.
REGISTRY_CALLS = frozenset(
    {"is_installed", "get_app_config", "get_model", "get_models", "get_containing_app_config"}
)


def labels_named(path: Path, labels: tuple[str, ...]) -> list[str]:
    """Where ``path`` names one of ``labels`` as an app: given to the app registry
    (``apps.is_installed("timers")``, ``apps.get_model("timers", "Timer")``), listed among app
    labels (``("statecharts", "timers")``), or a model label or dotted path under it anywhere
    ("timers.Timer", "timers.routequeue.RouteTimerQueue"). Docstrings are prose, ``__all__``
    lists names, and a plain "timers" elsewhere is a key of some record, not an app."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and "__all__" in ast.unparse(node.targets[0]):
            skipped.update(id(n) for n in ast.walk(node.value))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in REGISTRY_CALLS:
            candidates = node.args[:1]
        elif isinstance(node, ast.Tuple | ast.List | ast.Set) and all(
            isinstance(element, ast.Constant) for element in node.elts
        ):
            candidates = node.elts  # (a list of names: ("invocations", check) is a pair)
        else:
            candidates = []
        found.extend(
            (arg.lineno, arg.value)
            for arg in candidates
            if isinstance(arg, ast.Constant) and arg.value in labels and id(arg) not in skipped
        )
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in skipped
            and "." in node.value
            and node.value.partition(".")[0] in labels
            and " " not in node.value
        ):
            found.append((node.lineno, node.value))
    return [
        f"{path.relative_to(path.parents[1])}:{line}: {value!r}"
        for line, value in sorted(set(found))
    ]


def test_statecharts_names_no_other_app_by_its_label() -> None:
    problems = [
        problem
        for module, path in MODULES.items()
        if module.split(".")[0] == "statecharts"
        for problem in labels_named(path, APP_LABELS)
    ]
    assert problems == []


def test_the_label_finder_finds_what_it_looks_for(tmp_path: Path) -> None:
    page = tmp_path / "probe.py"
    page.write_text(
        '"""A docstring naming "timers" is fine."""\n'
        'X = apps.get_model("timers", "Timer")\nY = "timers.delivery.StepperDelivery"\n'
        'STEP_APPS = ("statecharts", "invocations")\n__all__ = ["routes"]\n'
        'record = {"timers": True}\nfields = [("invocations", record)]\n'
    )
    assert labels_named(page, APP_LABELS) == [
        f"{tmp_path.name}/probe.py:2: 'timers'",
        f"{tmp_path.name}/probe.py:3: 'timers.delivery.StepperDelivery'",
        f"{tmp_path.name}/probe.py:4: 'invocations'",
    ]


def _reverse_relations() -> dict[str, str]:
    """related_name -> the app whose model declares it (``"+"``: none)."""
    found: dict[str, str] = {}
    for module, path in MODULES.items():
        if not (module.endswith(".models") or ".models." in module):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.keyword)
                and node.arg == "related_name"
                and isinstance(node.value, ast.Constant)
                and node.value.value != "+"
            ):
                found[node.value.value] = module.split(".")[0]
    return found


def test_no_app_reads_another_apps_reverse_relations() -> None:
    """``execution.route_timers`` in the routes app would read the timers app's table behind
    the back of the configured queue: a reverse relation is used by the app that declares it.
    (Read off an ``execution``: other objects have attributes of the same names.)"""
    relations = _reverse_relations()
    assert relations["route_timers"] == "timers"  # (a guard: the reader found them)
    problems = []
    for module, path in MODULES.items():
        app = module.split(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute) or relations.get(node.attr, app) == app:
                continue
            owner = node.value
            name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
            if name.endswith("execution"):
                problems.append(f"{module}:{node.lineno}: .{node.attr} ({relations[node.attr]})")
    assert problems == []


def test_the_app_config_imports_nothing_from_the_api() -> None:
    assert _arrows(("statecharts.apps",), ("statecharts.api",)) == []


# What the apps built on the stepper may use of ``statecharts``: its public surface. The
# stepper's inner modules, the compiled-chart cache and the drivers are not part of it.
PRIVATE_TO_STATECHARTS = ("statecharts.stepper.", "statecharts.runtime", "statecharts.drivers")


def test_apps_use_only_the_public_stepper_surface() -> None:
    problems = [
        f"{module} -> {target}"
        for module in MODULES
        if module.split(".")[0] in ("timers", "invocations", "routes")
        for target in sorted(graph()[module])
        if target.startswith(PRIVATE_TO_STATECHARTS)
    ]
    assert problems == []


def test_models_do_not_import_the_stepper() -> None:
    problems = [
        f"{module} -> {target}"
        for module in MODULES
        if module.startswith("statecharts.models")
        for target in sorted(graph()[module])
        if target.startswith("statecharts.stepper")
    ]
    assert problems == []


# The rooms of ``statecharts`` (docs/architecture.md, "Where things live"): the folder a
# module sits in says which layer it belongs to. A new module at the top is a decision, not an
# accident: add it to this table with its reason, or put it in a room.
TOP_OF_STATECHARTS = {
    # the pure core and the drivers (layers 1 and 2)
    "core": "parse, validate, compile, interpret (Appendix D), the planner; no Django",
    "drivers": "the in-memory driver and the pure durable step",
    # the durable engine (layer 3)
    "models": "charts, executions, history, outbox rows",
    "stepper": "one step, one transaction: the public stepper API",
    "runtime": "the compiled-chart and interpreter caches between rows and the core",
    "statuses": "the execution statuses and what each allows",
    "versions": "chart versions: their order, the next one, latest",
    "work": "pending work from every app (what the sweeper and the workbench run)",
    # shared policies and operations (layer 3, used by the engine and the surface)
    "policies": "validation, refusals, authorization, attribution, idempotency, codecs, ...",
    "operations": "read model, retention, re-encryption, transfer, chart migration, replay, health",
    "telemetry": "signals and log records, and the OpenTelemetry bridge",
    # the surface (layer 4)
    "admin": "the Django admin: a module per page group, its forms, the subject inline",
    "api": "the REST API and its OpenAPI schema",
    "management": "manage.py statechart",
    "diagram": "the chart diagram (SVG)",
    "templates": "the admin's templates",
    "static": "the admin's stylesheet (static/statecharts/admin.css: the lists fit 1280 px)",
    "migrations": "the database migrations",
    # the app itself
    "apps": "the AppConfig",
    "declaration": "what the app declares: its settings, checks, contributions",
    "conf": "the STATECHARTS settings",
    "checks": "system checks",
    "exceptions": "errors the Django layer raises on purpose",
    "signals": "the signals the stepper sends",
    "extensions": "what other apps add to the admin, the API and the read model",
    "testing": "test helpers for host projects (a clock, a workbench, assertions)",
    "fields": "StatechartField: a host model's own execution (a model field, its lookup)",
}


def test_the_top_of_statecharts_holds_only_its_rooms() -> None:
    top = {
        path.stem if path.is_file() else path.name
        for path in (ROOT / "statecharts").iterdir()
        if (path.suffix == ".py" and path.stem != "__init__")
        or (path.is_dir() and not path.name.startswith((".", "__")))
    }
    assert top == set(TOP_OF_STATECHARTS)


ENGINE = (
    "statecharts.core",
    "statecharts.drivers",
    "statecharts.models",
    "statecharts.stepper",
    "statecharts.runtime",
    "statecharts.statuses",
    "statecharts.versions",
)
SURFACE = ("statecharts.admin", "statecharts.api", "statecharts.management", "statecharts.diagram")


def _arrows(sources: tuple[str, ...], targets: tuple[str, ...]) -> list[str]:
    return [
        f"{module} -> {target}"
        for module in MODULES
        if module.startswith(sources)
        for target in sorted(graph()[module])
        if target.startswith(targets)
    ]


def test_the_engine_imports_neither_operations_nor_the_surface() -> None:
    assert _arrows(ENGINE, ("statecharts.operations", *SURFACE)) == []


def test_policies_import_neither_operations_nor_the_surface() -> None:
    assert _arrows(("statecharts.policies",), ("statecharts.operations", *SURFACE)) == []


def test_operations_do_not_import_the_surface() -> None:
    assert _arrows(("statecharts.operations",), SURFACE) == []


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(MODULES):
        if node not in index:
            visit(node)
    return found


def test_there_is_no_import_cycle() -> None:
    assert _cycles(graph()) == []


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}}, []),
    ],
)
def test_the_cycle_finder_finds_cycles(
    edges: dict[str, set[str]], expected: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(f"{__name__}.MODULES", {name: Path(name) for name in ("a", "b", "c")})
    assert _cycles(edges) == expected
