"""The host package's layers (docs/architecture.md): the building blocks (``stackrl.blocks``) build on the machinery,
never the reverse, and no import circle runs through the package's modules.

Every import counts: at module level, under ``TYPE_CHECKING`` and inside functions. The tests also plant a back
import and a circle in a copy of the package, and check that each is found and named.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import stackrl

PACKAGE = Path(stackrl.__file__).resolve().parent
BLOCKS = "stackrl.blocks"
# Above the machinery and the blocks alike: the test kit runs whole runs with any block.
ABOVE = ("stackrl.testing",)


def module_files(root: Path) -> dict[str, Path]:
    """Each module of the package at ``root`` by dotted name (a package by its own name)."""
    files = {}
    for path in root.rglob("*.py"):
        parts = ("stackrl", *path.relative_to(root).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def _imported(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The module an ``ImportFrom`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = module.split(".")[: len(module.split(".")) - node.level + is_package]
    return ".".join([*base, node.module] if node.module else base)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Each module -> the package's modules it imports anywhere in its source (``from stackrl import x`` counts
    as an import of ``stackrl.x`` where that is a module)."""
    files = module_files(root)

    def owner(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in files.items():
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                source = _imported(node, module, path.name == "__init__.py")
                names.update(f"{source}.{alias.name}" for alias in node.names)
        graph[module] = {found for found in map(owner, names) if found not in (None, module)}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles a depth-first walk meets, each as the modules along it, its first repeated last."""
    found, state = [], {}  # module -> "open" while on the walk's path, "done" once all it imports is walked

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for imported in sorted(graph[module]):
            if state.get(imported) == "open":
                found.append([*path[path.index(imported) :], imported])
            elif imported not in state:
                visit(imported, [*path, imported])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def back_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """``(machinery module, block)`` for each import of a block by a module outside the blocks and the test kit."""
    def block(name: str) -> bool:
        return name == BLOCKS or name.startswith(BLOCKS + ".")

    machinery = [m for m in graph if not block(m) and not m.startswith(ABOVE) and m != "stackrl"]
    return sorted((m, imported) for m in machinery for imported in graph[m] if block(imported))


def problems(root: Path) -> list[str]:
    graph = import_graph(root)
    return [f"import circle: {' -> '.join(circle)}" for circle in cycles(graph)] + [
        f"machinery module {module} imports the block {block}" for module, block in back_imports(graph)
    ]


def test_package_has_no_circle_and_no_back_import():
    found = problems(PACKAGE)
    assert not found, "\n".join(found)


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph(PACKAGE)
    assert "stackrl.trainer" in graph["stackrl.run"]  # module level
    assert "stackrl.policy" in graph["stackrl.context"]  # under TYPE_CHECKING
    assert "stackrl.tasks" in graph["stackrl.data"]  # inside a function
    assert "stackrl.context" in graph["stackrl.blocks.tokensignals.service"]  # relative imports resolved
    assert "stackrl.noise" in graph["stackrl.cli"]  # from stackrl import <module>


def _planted(tmp_path: Path, module: str, line: str) -> Path:
    root = tmp_path / "stackrl"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__", "assets"))
    path = root.joinpath(*module.split(".")[1:]).with_suffix(".py")
    source = path.read_text(encoding="utf-8")
    path.write_text(source + f"\n\ndef _planted():\n    {line}\n", encoding="utf-8")
    return root


def test_catches_a_back_import_inside_a_function(tmp_path):
    root = _planted(tmp_path, "stackrl.trainer", "from stackrl.blocks.teacher import distilled")
    assert problems(root) == ["machinery module stackrl.trainer imports the block stackrl.blocks.teacher"]


def test_catches_a_circle(tmp_path):
    root = _planted(tmp_path, "stackrl.policy", "from stackrl.trainer import StackTrainer")
    found = problems(root)
    assert found and all(problem.startswith("import circle: ") for problem in found), found
    circles = [problem.removeprefix("import circle: ").split(" -> ") for problem in found]
    assert all(circle[0] == circle[-1] for circle in circles)
    assert any({"stackrl.policy", "stackrl.trainer"} <= set(circle) for circle in circles), found
