"""How far a reader travels to follow one value through the operator: a static walk of the
calls, in source order, from one function, following a parameter and every name assigned
from it, into each callee that receives one of them.

    python bench/bench_walk.py [crimsonbench.controller.step_loop.run_steps ctx] [--show]

It prints the calls walked (function entries, in the order they run: arguments first), the rooms
(each time the next entry is in another module than the last), the distinct modules, and
the climbs back: entries into a controller function (not its pure `decisions`) right after
the walk was down in `results/`, `manifests/`, `plan/` or `spec/` (the reader went down to
parse or render and must come back up to the I/O layer to go on). Issue 40 took its
figures by hand (25 rooms / 11 climbs from run_steps); this makes them repeatable. Prints,
never asserts.

Two things are not climbs: constructing a controller class (a value: `Again(view)` is the
interpreter's word, not I/O to read), and the first entry of a branch after the last entry
of another (an `if`'s else, a `match`'s next case, an `except`: they never run one after the
other). `--rule 1` counts as the first version did (every entry, branches in source order),
for comparing with figures taken before.

What it resolves: module-level functions and classes (by import or in the same module),
and `x.method(...)` where the package defines exactly one method of that name (a logger's
methods excepted). A callee
is walked once per walk (a second call to it is a room, not a second walk); nested
functions (a closure the loop hands to carry_out) are walked where they are defined, when
they stand in the function's own body. A compound statement's bodies are walked as bodies:
a name assigned in a loop's body is followed from there on.
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


@dataclass(frozen=True)
class Room:
    level: int
    module: str
    name: str
    is_class: bool
    after: int  # the index of the room it follows (-1: none): a branch follows its fork


class Walk:
    def __init__(self, index: Index, depth: int, *, branches: bool = True) -> None:
        self.index, self.depth, self.branches = index, depth, branches
        self.rooms: list[Room] = []
        self.walked: set[tuple[str, str]] = set()
        self._fork: int | None = None  # a branch begins: its first room follows this one

    def enter(self, f: Func, tracked: set[str], level: int) -> None:
        after = len(self.rooms) - 1 if self._fork is None else self._fork
        self._fork = None
        is_class = isinstance(f.node, ast.ClassDef)
        self.rooms.append(Room(level, f.module, f.node.name, is_class, after))
        key = (f.module, f.node.name)
        if key in self.walked or level >= self.depth or is_class:
            return
        self.walked.add(key)
        self._body(f.module, f.node.body, set(tracked), level)

    def _calls(self, mod: str, nodes: list[ast.AST], tracked: set[str], level: int) -> None:
        for node in nodes:
            for call in _calls_in_order(node):
                callee = self.index.resolve(mod, call.func)
                if callee is not None and _mentions(call, tracked):
                    self.enter(callee, _receiving(callee.node, call, tracked), level + 1)

    def _branches(
        self, mod: str, bodies: list[list[ast.stmt]], tracked: set[str], level: int
    ) -> None:
        """Bodies of which one runs: each one's first room follows the fork, not the
        last room of the one before (with branches off: one after the other)."""
        fork = len(self.rooms) - 1
        for body in bodies:
            if self.branches:
                self._fork = fork
            self._body(mod, body, tracked, level)
        self._fork = None

    def _body(self, mod: str, body: list[ast.stmt], tracked: set[str], level: int) -> None:
        for stmt in body:
            self._statement(mod, stmt, tracked, level)
            for target, value in _assignments(stmt):
                if _mentions(value, tracked):
                    tracked |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}

    def _statement(self, mod: str, stmt: ast.stmt, tracked: set[str], level: int) -> None:
        match stmt:
            case ast.FunctionDef():  # a closure: it sees what its parent tracks
                self._body(mod, stmt.body, tracked | {a.arg for a in stmt.args.args}, level)
            case ast.If():
                self._calls(mod, [stmt.test], tracked, level)
                self._branches(mod, [stmt.body, stmt.orelse], tracked, level)
            case ast.Match():
                self._calls(mod, [stmt.subject], tracked, level)
                self._branches(mod, [c.body for c in stmt.cases], tracked, level)
            case ast.For() | ast.While():
                self._calls(mod, [stmt.iter if isinstance(stmt, ast.For) else stmt.test],
                            tracked, level)  # fmt: skip
                self._body(mod, stmt.body, tracked, level)
                self._body(mod, stmt.orelse, tracked, level)
            case ast.With():
                self._calls(mod, [i.context_expr for i in stmt.items], tracked, level)
                self._body(mod, stmt.body, tracked, level)
            case ast.Try():
                self._body(mod, stmt.body, tracked, level)
                self._branches(mod, [stmt.orelse, *(h.body for h in stmt.handlers)], tracked,
                               level)  # fmt: skip
                self._body(mod, stmt.finalbody, tracked, level)
            case _:
                self._calls(mod, [stmt], tracked, level)


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


def climbs(rooms: list[Room], *, classes: bool = False) -> list[tuple[str, str]]:
    """(from, to) for each entry into a controller function (classes too: `classes`)
    right after one down in results/..., the entry it follows as Room.after says."""
    out = []
    for b in rooms:
        if b.after < 0 or (b.is_class and not classes):
            continue
        a = rooms[b.after]
        if layer(a.module) == "down" and layer(b.module) == "controller":
            out.append((f"{a.module}.{a.name}", f"{b.module}.{b.name}"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("start", nargs="?", default="crimsonbench.controller.step_loop.run_steps")
    ap.add_argument("value", nargs="?", default="ctx")
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--show", action="store_true", help="print every room and climb")
    ap.add_argument("--rule", type=int, choices=(1, 2), default=2,
                    help="2: as above; 1: every entry, branches in source order")  # fmt: skip
    args = ap.parse_args()
    index = Index()
    mod, name = args.start.rsplit(".", 1)
    walk = Walk(index, args.depth, branches=args.rule == 2)
    walk.enter(Func(mod, index.defs[mod][name]), {args.value}, 0)
    back = climbs(walk.rooms, classes=args.rule == 1)
    if args.show:
        for r in walk.rooms:
            print(f"{'  ' * r.level}{r.module.removeprefix('crimsonbench.')}.{r.name}  "
                  f"[{layer(r.module)}]")  # fmt: skip
        for a, b in back:
            print(f"climb back: {a} -> {b}")
    modules = [r.module for r in walk.rooms]
    rooms = 1 + sum(a != b for a, b in zip(modules, modules[1:], strict=False))
    print(f"{args.start} following {args.value!r}: {len(modules)} calls walked, {rooms} rooms, "
          f"{len(set(modules))} modules, {len(back)} climbs back")  # fmt: skip


if __name__ == "__main__":
    main()
