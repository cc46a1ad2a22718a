"""How far a reader travels to follow one value through the operator: a static walk of the
calls, in source order, from one function, following a parameter and every name assigned
from it, into each callee that receives one of them.

    python bench/bench_walk.py [crimsonbench.controller.step_loop.run_steps ctx] [--show]

It prints the calls walked (function entries, in the order they run: arguments first), the rooms
(each time the next entry is in another module than the last), the distinct modules, and
the climbs back: entries into the controller (not its pure
`decisions`) right after the walk was down in `results/`, `manifests/`, `plan/` or `spec/`
(the reader went down to parse or render and must come back up to the I/O layer to go
on). Issue 40 took its figures by hand (25 rooms / 11 climbs from run_steps); this makes
them repeatable. Prints, never asserts.

What it resolves: module-level functions and classes (by import or in the same module),
and `x.method(...)` where the package defines exactly one method of that name (a logger's
methods excepted). A callee
is walked once per walk (a second call to it is a room, not a second walk); nested
functions (a closure the loop hands to carry_out) are walked where they are defined, when
they stand in the function's own body. Names assigned inside a compound statement (a
loop's body) are followed from the statement after it on.
"""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "operator" / "crimsonbench"
DOWN = ("results", "manifests", "plan", "spec")
# a logger's methods: `ctx.logger.info` is not the package's one `info` method
LOGGING = {"debug", "info", "warning", "error", "exception", "critical", "log"}


@dataclass(frozen=True)
class Func:
    module: str
    node: ast.FunctionDef | ast.ClassDef


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class Index:
    """Every module's top-level functions/classes, its imports, and the package's methods."""

    def __init__(self) -> None:
        self.defs: dict[str, dict[str, ast.FunctionDef | ast.ClassDef]] = {}
        self.imports: dict[str, dict[str, tuple[str, str | None]]] = {}
        methods: dict[str, list[Func]] = defaultdict(list)
        for path in sorted(PACKAGE.rglob("*.py")):
            mod, tree = _module_name(path), ast.parse(path.read_text())
            self.defs[mod], self.imports[mod] = {}, {}
            for node in tree.body:
                if isinstance(node, ast.FunctionDef | ast.ClassDef):
                    self.defs[mod][node.name] = node
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef) and not item.name.startswith("__"):
                            methods[item.name].append(Func(mod, item))
                if isinstance(node, ast.ImportFrom) and node.module:
                    for alias in node.names:
                        self.imports[mod][alias.asname or alias.name] = (node.module, alias.name)
        self.methods = {name: fs[0] for name, fs in methods.items() if len(fs) == 1}

    def resolve(self, mod: str, func: ast.expr) -> Func | None:
        if isinstance(func, ast.Name):
            if func.id in self.defs[mod]:
                return Func(mod, self.defs[mod][func.id])
            source, name = self.imports[mod].get(func.id, ("", None))
            if name in self.defs.get(source, {}):
                return Func(source, self.defs[source][name])
        if isinstance(func, ast.Attribute):
            owner = func.value
            if isinstance(owner, ast.Name) and owner.id in self.imports[mod]:
                source, name = self.imports[mod][owner.id]
                target = f"{source}.{name}"  # `from pkg import module` then module.f(...)
                if func.attr in self.defs.get(target, {}):
                    return Func(target, self.defs[target][func.attr])
            return None if func.attr in LOGGING else self.methods.get(func.attr)
        return None


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _receiving(callee: ast.FunctionDef | ast.ClassDef, call: ast.Call, names: set[str]) -> set[str]:
    """The callee's parameters that get a tracked value ("self" skipped for methods)."""
    if isinstance(callee, ast.ClassDef):
        return set()  # a constructed record: the walk stops at its class
    params = [a.arg for a in callee.args.posonlyargs + callee.args.args if a.arg != "self"]
    got = {params[i] for i, a in enumerate(call.args) if i < len(params) and _mentions(a, names)}
    return got | {k.arg for k in call.keywords if k.arg and _mentions(k.value, names)}


class Walk:
    def __init__(self, index: Index, depth: int) -> None:
        self.index, self.depth = index, depth
        self.rooms: list[tuple[int, str, str]] = []  # (depth, module, function)
        self.walked: set[tuple[str, str]] = set()

    def enter(self, f: Func, tracked: set[str], level: int) -> None:
        self.rooms.append((level, f.module, f.node.name))
        key = (f.module, f.node.name)
        if key in self.walked or level >= self.depth or isinstance(f.node, ast.ClassDef):
            return
        self.walked.add(key)
        self._body(f.module, f.node.body, set(tracked), level)

    def _body(self, mod: str, body: list[ast.stmt], tracked: set[str], level: int) -> None:
        for stmt in body:
            for call in _calls_in_order(stmt):
                callee = self.index.resolve(mod, call.func)
                if callee is not None and _mentions(call, tracked):
                    self.enter(callee, _receiving(callee.node, call, tracked), level + 1)
            if isinstance(stmt, ast.FunctionDef):  # a closure: it sees what its parent tracks
                self._body(mod, stmt.body, tracked | {a.arg for a in stmt.args.args}, level)
            for target, value in _assignments(stmt):
                if _mentions(value, tracked):
                    tracked |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _calls_in_order(stmt: ast.stmt) -> list[ast.Call]:
    """The calls of one statement (not of a nested def) in the order they run: a call's
    arguments before the call (`parse(read(...))` reads first)."""
    out: list[ast.Call] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.Lambda):
            return
        if isinstance(node, ast.Assign):  # the value runs before the targets are bound
            visit(node.value)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)
        if isinstance(node, ast.Call):
            out.append(node)

    visit(stmt)
    return out


def _assignments(stmt: ast.stmt) -> list[tuple[ast.AST, ast.AST]]:
    out: list[tuple[ast.AST, ast.AST]] = []
    for node in ast.walk(stmt):
        if isinstance(node, ast.Assign):
            out += [(t, node.value) for t in node.targets]
        elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr) and node.value:
            out.append((node.target, node.value))
        elif isinstance(node, ast.For | ast.comprehension):
            out.append((node.target, node.iter))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            out.append((node.optional_vars, node.context_expr))
    return out


def layer(module: str) -> str:
    parts = module.split(".")
    if parts[1] == "controller":
        return "decisions" if len(parts) > 2 and parts[2] == "decisions" else "controller"
    return "down" if parts[1] in DOWN else parts[1]


def climbs(rooms: list[tuple[int, str, str]]) -> list[tuple[str, str]]:
    """(from, to) for each entry into the controller right after one down in results/..."""
    out = []
    for (_, a, fa), (_, b, fb) in zip(rooms, rooms[1:], strict=False):
        if layer(a) == "down" and layer(b) == "controller":
            out.append((f"{a}.{fa}", f"{b}.{fb}"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("start", nargs="?", default="crimsonbench.controller.step_loop.run_steps")
    ap.add_argument("value", nargs="?", default="ctx")
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--show", action="store_true", help="print every room and climb")
    args = ap.parse_args()
    index = Index()
    mod, name = args.start.rsplit(".", 1)
    walk = Walk(index, args.depth)
    walk.enter(Func(mod, index.defs[mod][name]), {args.value}, 0)
    back = climbs(walk.rooms)
    if args.show:
        for level, m, f in walk.rooms:
            print(f"{'  ' * level}{m.removeprefix('crimsonbench.')}.{f}  [{layer(m)}]")
        for a, b in back:
            print(f"climb back: {a} -> {b}")
    modules = [m for _, m, _ in walk.rooms]
    rooms = 1 + sum(a != b for a, b in zip(modules, modules[1:], strict=False))
    print(f"{args.start} following {args.value!r}: {len(modules)} calls walked, {rooms} rooms, "
          f"{len(set(modules))} modules, {len(back)} climbs back")  # fmt: skip


if __name__ == "__main__":
    main()
