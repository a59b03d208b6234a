"""The code's own imports keep the architecture: no import cycle (module-level or inside a
function), three floors (scripts and benchmarks -> offchain -> repops; repops never imports
offchain), offchain/ made of packages, and the dispute's levels as peers: a level imports
its predecessor's hand-off, never a later level."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in ("repops", "offchain"):
        for f in (ROOT / pkg).rglob("*.py"):
            rel = f.relative_to(ROOT).with_suffix("")
            mods[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = f
    return mods


def _graph() -> dict[str, set]:
    """module -> the project modules it imports (anywhere in its body)."""
    mods = _modules()
    edges = {m: set() for m in mods}
    for m, f in mods.items():
        pkg = m.split(".") if f.name == "__init__.py" else m.split(".")[:-1]
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = ".".join(pkg[:len(pkg) - node.level + 1] if node.level else [])
                target = ".".join(x for x in (base, node.module or "") if x) if node.level else node.module
                names = [f"{target}.{a.name}" for a in node.names] or [target]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for t in names:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != m:
                    edges[m].add(t)
    return edges


def _cycles(edges) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_repops_never_imports_offchain():
    bad = {(m, t) for m, ts in _graph().items() if m.startswith("repops") for t in ts if t.startswith("offchain")}
    assert not bad


def test_offchain_is_made_of_packages():
    loose = sorted(p.name for p in (ROOT / "offchain").glob("*.py"))
    assert loose == ["__init__.py"], loose


def test_each_dispute_level_imports_only_earlier_levels():
    edges = _graph()
    level = re.compile(r"offchain\.dispute\.level(\d)_")
    for m, ts in edges.items():
        mine = level.match(m)
        if not mine:
            continue
        later = [t for t in ts if level.match(t) and int(level.match(t).group(1)) > int(mine.group(1))]
        assert not later, f"{m} reaches into {later}"
