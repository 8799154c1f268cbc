"""The layout shows the architecture: each package imports only the packages under it, and no
module of the project imports itself back through others.

The site (`mosaic`) sits on top and may import the transports and the domain core; the
transports (`chat`, and `tester` over it) import the domain core (`broker`), never the site;
the core imports none of them. A module belongs to the longest name of `ALLOWED_IMPORTS` that
it is or sits under, and may import its own package and the packages listed for it there.
"""

from __future__ import annotations

import ast
import functools
import graphlib
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What each package of the project may import of the project, besides itself.
ALLOWED_IMPORTS: dict[str, frozenset[str]] = {
    # The domain core: Django and its own modules.
    "broker": frozenset(),
    # The assistant runner, a client of the core like the transports: it answers turns
    # through the core's verbs, and `runassistant` starts it; the core never imports it.
    "runner": frozenset({"broker"}),
    # The chat API and its streams, served by both listeners.
    "chat": frozenset({"broker"}),
    # What runs in front of Django on every listener: the handler, the body cap, probes,
    # sockets' guards, the request log and metrics; each listener is built of these.
    "mosaic.edge": frozenset({"broker", "chat"}),
    # The human listener: its routes, gates (L2, L9) and ASGI build (L1).
    "human": frozenset({"broker", "chat", "mosaic.edge"}),
    # The tester listener: the chat API's views and shared gates under its own gates (L3, L4,
    # L5) and ASGI build (L8), and its suite runs' routes.
    "tester": frozenset({"broker", "chat", "mosaic.edge"}),
    # The conversation-test client, installed alone as `mosaic_test`.
    "tester.suites": frozenset(),
    # `testassistant` runs that client, which speaks only to the tester listener.
    "tester.management": frozenset({"tester.suites"}),
    # The site: settings, the ASGI entry points, middleware, ops; `serve` starts runners.
    "mosaic": frozenset(
        {"broker", "runner", "chat", "human", "tester", "tester.suites", "mosaic.edge"}
    ),
    # The benchmarks seed through the core and start the site's and the baseline's servers.
    "bench": frozenset({"broker", "mosaic", "bench.baseline"}),
    # The plain Channels app the benchmarks compare against.
    "bench.baseline": frozenset(),
}

# Top-level packages of the checkout: an import of any of them is an import of the project.
PROJECT_PACKAGES = frozenset(path.parent.name for path in ROOT.glob("*/__init__.py"))
# Tests may import anything, and nothing may import them.
TESTS = "tests"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    """Every module of the project but the tests, by dotted name."""
    tops = sorted(PROJECT_PACKAGES - {TESTS})
    return {module_name(path): path for top in tops for path in (ROOT / top).rglob("*.py")}


MODULES = project_modules()


def package_of(module: str) -> str:
    """The table's package `module` belongs to, or its top-level package when the table has
    none (`tests`, or a package missing from the table)."""
    owners = [p for p in ALLOWED_IMPORTS if module == p or module.startswith(f"{p}.")]
    return max(owners, key=len) if owners else module.split(".")[0]


def names_a_module(text: str) -> bool:
    """Whether `text` names a module of the project (`mosaic.asgi`, `mosaic.asgi:application`),
    as an import string would; a logger's name (`mosaic.security`) names none."""
    dotted = text.split(":", 1)[0]
    # A dotted path: a lone package name is also a word (the `tester` role).
    if "." not in dotted or not dotted.replace(".", "").replace("_", "").isalnum():
        return False
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


@functools.cache
def tree_of(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(), filename=str(MODULES[module]))


def imported_names(module: str) -> Iterator[str]:
    """The dotted names `module` imports, relative imports resolved: `from a import b` is `a.b`
    when that is a module, else `a`. Imports inside functions and under TYPE_CHECKING count."""
    is_package = MODULES[module].name == "__init__.py"
    for node in ast.walk(tree_of(module)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[: None if is_package else -1]
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base


def project_imports(module: str) -> Iterator[str]:
    """The project's modules and packages that `module` imports, or names in an import string
    (`"mosaic.settings"`, `"bench.baseline.asgi:application"`)."""
    for name in imported_names(module):
        if name.split(".")[0] in PROJECT_PACKAGES:
            yield name
    for node in ast.walk(tree_of(module)):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.split(".")[0] in PROJECT_PACKAGES
            and names_a_module(node.value)
        ):
            yield node.value.split(":", 1)[0]


def test_every_package_imports_only_what_the_table_allows() -> None:
    """STYLE §1 and §19: the domain core imports no transport and names none of their modules
    in an import string either (`serve`, which names the site's ASGI application, is the site's
    command); the transports never import the site; the client imports nothing of the
    project, so it proves what the tester listener serves rather than what the broker does."""
    offenders = [
        f"{module} ({package_of(module)}) imports {name}"
        for module in sorted(MODULES)
        for name in project_imports(module)
        if package_of(name) != package_of(module)
        and package_of(name) not in ALLOWED_IMPORTS[package_of(module)]
    ]
    assert offenders == []


def test_the_table_names_every_package_that_has_modules() -> None:
    """The walk reads what the table names: a new or renamed package is not let through
    unchecked."""
    assert {package_of(module) for module in MODULES} == set(ALLOWED_IMPORTS)
    assert set().union(*ALLOWED_IMPORTS.values()) <= set(ALLOWED_IMPORTS)


def module_of(name: str) -> str | None:
    """The project's module that an imported name loads, if any (tests aside): the name itself,
    or the module it is an attribute of."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def test_no_module_imports_itself_back() -> None:
    """The project's modules import each other without a cycle. Imports inside functions and
    under TYPE_CHECKING count: deferring an import only hides a cycle until the first call, and
    the two modules still cannot be read, tested or moved apart. Import strings do not: they
    are resolved by name at run time (settings, `serve`), long after both modules are loaded."""
    graph = {
        module: {
            imported
            for name in imported_names(module)
            if (imported := module_of(name)) is not None and imported != module
        }
        for module in MODULES
    }
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as cycle:
        raise AssertionError(f"import cycle: {' -> '.join(cycle.args[1])}") from None


def imported_packages(path: Path) -> list[str]:
    """The top-level packages `path` imports, relative imports left out."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module.split(".")[0])
    return names


def test_client_package_imports_only_the_standard_library_and_its_dependencies() -> None:
    """`tester/suites` is installed alone as `mosaic_test` (pyproject.toml), into an
    environment without Django or this project: its modules import each other relatively, and
    otherwise only the standard library, its declared dependencies and pytest (the plugin)."""
    suites = ROOT / "tester" / "suites"
    allowed = set(sys.stdlib_module_names) | {"websockets", "jsonschema", "pytest"}
    offenders = [
        f"{path.name}: {name}"
        for path in sorted(suites.rglob("*.py"))
        for name in imported_packages(path)
        if name not in allowed
    ]
    assert offenders == []
