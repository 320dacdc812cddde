"""Every head and MLP declares what it reads and writes, and the declarations cannot lie:
embedded into the residual width, they name exactly the workspace subspaces whose dims
carry nonzero weights; and every local matrix has one row (column) per declared dim."""

import numpy as np
import pytest

from compiler.automata.catalog import build as catalog_build
from compiler.automata.decompose import decompose
from compiler.automata.representation import choose
from compiler.automata.spec import Semiautomaton
from constructions import gridworld, krohn_rhodes, scan
from constructions.program import MLP, Fused, Head, Program, beside, fuse
from constructions.workspace import Workspace
from constructions.construction import BuildOptions
from compiler.pipeline import compile_automaton
from verify.certify import certify

# a deep holonomy cascade whose views are evaluated in the network (see test_krohn_rhodes.py)
DEEP = Semiautomaton("deep-holonomy", ("0", "1", "2", "3", "4"), ("a0", "a1", "a2"),
                     ((1, 4, 3, 4, 0), (2, 0, 3, 1, 4), (0, 2, 3, 4, 1)), 0)


def _owner(ws: Workspace) -> dict[int, str]:
    return {d: name for name, sub in ws.subspaces.items() for d in sub.dims}


def _touched(owner: dict[int, str], mask: np.ndarray) -> set[str]:
    return {owner[int(d)] for d in np.flatnonzero(mask)}


def _actual_head(ws: Workspace, h: Head) -> tuple[dict[str, set[str]], set[str]]:
    owner = _owner(ws)
    W_Q, W_K, W_V, W_O = h.embed(ws)
    reads = {role: _touched(owner, np.any(W != 0, axis=1)) for role, W in
             (("query", W_Q), ("key", W_K), ("value", W_V))}
    return reads, _touched(owner, np.any(W_O != 0, axis=0))


def _actual_mlp(ws: Workspace, m: "MLP | Fused") -> tuple[set[str], set[str]]:
    owner = _owner(ws)
    dense = m.embed(ws)
    return (_touched(owner, np.any(dense.weights[0] != 0, axis=1)),
            _touched(owner, np.any(dense.weights[-1] != 0, axis=0) | (dense.biases[-1] != 0)))


def _dims(ws: Workspace, names) -> int:
    return sum(len(ws[n]) for n in names)


def check_local_shapes(ws: Workspace, part: "Head | MLP | Fused") -> None:
    """A head's or MLP's local matrices have exactly one row (column) per dim it declares
    (a fused MLP: its parts)."""
    if isinstance(part, Head):
        assert part.W_Q.shape[0] == _dims(ws, part.reads["query"]), part.name
        assert part.W_K.shape[0] == _dims(ws, part.reads["key"]), part.name
        assert part.W_V.shape[0] == _dims(ws, part.reads["value"]), part.name
        assert part.W_O.shape[1] == _dims(ws, part.writes), part.name
        assert part.W_Q.shape[1] == part.W_K.shape[1] and part.W_V.shape[1] == part.W_O.shape[0], part.name
    elif isinstance(part, Fused):
        check_local_shapes(ws, part.first)
        check_local_shapes(ws, part.second)
    else:
        assert part.weights[0].shape[0] == _dims(ws, part.reads), part.name
        assert part.weights[-1].shape[1] == _dims(ws, part.writes), part.name
        assert part.biases[-1].shape == (_dims(ws, part.writes),), part.name


def check_declarations(program: Program) -> int:
    """Assert every declaration; returns how many heads and MLPs were checked."""
    ws = program.workspace
    assert len(_owner(ws)) == ws.d_model  # every dim belongs to exactly one subspace
    n = 0
    for b, block in enumerate(program.blocks):
        for h in block.heads:
            check_local_shapes(ws, h)
            reads, writes = _actual_head(ws, h)
            assert set(h.reads) == {"query", "key", "value"}, h.name
            assert {r: set(v) for r, v in h.reads.items()} == reads, (b, h.name)
            assert set(h.writes) == writes, (b, h.name)
            n += 1
        if block.mlp is not None:
            check_local_shapes(ws, block.mlp)
            reads, writes = _actual_mlp(ws, block.mlp)
            assert set(block.mlp.reads) == reads, (b, block.mlp.name)
            assert set(block.mlp.writes) == writes, (b, block.mlp.name)
            n += 1
    return n


@pytest.mark.parametrize("name", ["parity", "cyclic:5", "dihedral:3", "symmetric:4", "grid:4", "memory:3"])
def test_scan_declarations(name):
    program, _ = scan.build(catalog_build(name), choose(catalog_build(name)), BuildOptions(20))
    assert check_declarations(program) == 2 * len(program.blocks)


def test_scan_covers_element_readout():
    program, meta = scan.build(catalog_build("dihedral:3"), choose(catalog_build("dihedral:3")), BuildOptions(9))
    assert not meta["scan"]["natural"]  # read out by group element, linearly: no extra units
    m = meta["scan"]["n_points"]  # (the last MLP composes into the fetched map: m units fewer)
    assert program.blocks[-1].mlp.hidden_sizes == [program.blocks[0].mlp.hidden_sizes[0] - m]
    assert check_declarations(program) == 2 * len(program.blocks)


@pytest.mark.parametrize("name", ["parity", "flipflop", "memory:3", "quaternion", "symmetric:4", "grid:4",
                                  "dyck:4,2"])
def test_krohn_rhodes_declarations(name):
    program, _ = krohn_rhodes.build(catalog_build(name), decompose(catalog_build(name)), BuildOptions(24))
    assert check_declarations(program) >= len(program.blocks)


def test_krohn_rhodes_declarations_with_offset_heads_and_views():
    program, _ = krohn_rhodes.build(catalog_build("grid:4"), decompose(catalog_build("grid:4")), BuildOptions(16))
    assert any(h.name.endswith(".previous") for b in program.blocks for h in b.heads)
    check_declarations(program)
    program, meta = krohn_rhodes.build(DEEP, decompose(DEEP), BuildOptions(16))
    views = meta["krohn_rhodes"]["views"]
    assert any(v["old"] for v in views) and any(v["new"] for v in views)
    check_declarations(program)
    assert all(p.obligation is not None for b in program.blocks for p in [*b.heads, b.mlp])  # one declaration
    assert {f"{v['name']}.{w}" for v in views for w in ("old", "new") if v[w]} <= {
        getattr(st, "mlp", None) for layer in program.obligations().layers for st in layer.mlp.steps}


def test_a_krohn_rhodes_model_is_certified_against_the_program_its_gadgets_declare():
    """One declaration: the certificate checks the model against exactly the program its gadgets
    declare (here with an offset-1 fetch and resets), rebuilt from the spec and the cascade."""
    model = compile_automaton("grid:4", max_len=8, method="krohn-rhodes")
    program, _ = krohn_rhodes.build(model.automaton, decompose(model.automaton), BuildOptions.of_model(model))
    cert = certify(model)
    assert cert.certified is True and cert.obligations_sha256 == program.obligations().digest(), cert


@pytest.mark.parametrize("name", ["grid:4", "grid:9", "grid2d:3,4"])
def test_gridworld_declarations(name):
    program, _ = gridworld.build(catalog_build(name), gridworld.applies(catalog_build(name)), BuildOptions(30))
    assert check_declarations(program) == sum(len(b.heads) + 1 for b in program.blocks)


def test_fuse_and_parallel_combine_declarations():
    ws = Workspace()
    a, b, c = ws.add("a"), ws.add("b"), ws.add("c")

    def copy(name, src, dst):  # local: one row (src), one column (dst)
        return MLP(name, [np.ones((1, 1)), np.ones((1, 1))], [np.zeros(1), np.zeros(1)],
                   reads=(src.name,), writes=(dst.name,))

    first, second = copy("ab", a, b), copy("bc", b, c)
    fused = fuse(first, second)
    assert fused.reads == ("a", "b") and fused.writes == ("b", "c")
    both = beside([first, second], "p", ws)
    assert both.reads == ("a", "b") and both.writes == ("b", "c")
    check_local_shapes(ws, both)
    assert _actual_mlp(ws, fused) == ({"a", "b"}, {"b", "c"})
    assert _actual_mlp(ws, both) == ({"a", "b"}, {"b", "c"})
