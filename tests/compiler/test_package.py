"""``import compiler``: every public name is found before anything mounted on ``object``, the
heavy ones import their module on first use, and nnsight (which mounts ``.save`` on every
object) shadows none of them.  The nnsight checks run in a child interpreter, so the mount does
not leak into the other tests."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import pytest

import compiler
from compiler.automata.formats import from_table


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


def test_every_public_name_is_found_before_object_attributes():
    for name in compiler.__all__:
        found_first = name in vars(compiler) or isinstance(vars(type(compiler)).get(name), property)
        assert found_first, f"compiler.{name} would lose to an attribute mounted on object"
    assert compiler.save.__module__ == "constructions.checkpoint"
    assert compiler.from_table is from_table
    with pytest.raises(AttributeError):
        compiler.no_such_name  # noqa: B018


def test_import_compiler_loads_neither_numpy_sympy_nor_torch():
    r = _python("""
        import sys
        import compiler
        print(sorted(m for m in ("numpy", "torch", "sympy", "constructions") if m in sys.modules))
        compiler.compile_automaton
        print("torch" in sys.modules)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["[]", "True"]


def test_compiling_running_and_certifying_never_import_sympy(tmp_path):
    """sympy (half a second per process) serves only a group past the enumeration budget."""
    path = tmp_path / "q.safetensors"
    r = _python(f"""
        import contextlib, io, sys
        from compiler.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["compile", "quaternion", "--max-len", "8", "-o", {str(path)!r}]) == 0
        assert "constructions.krohn_rhodes" in sys.modules and "sympy" not in sys.modules  # the survey decomposed
    """)
    assert r.returncode == 0, r.stderr
    for command in (["info", str(path)], ["certify", str(path)], ["run", str(path), "--input", "i j"]):
        r = _python(f"""
            import contextlib, io, sys
            from compiler.cli import main
            with contextlib.redirect_stdout(io.StringIO()):
                status = main({command!r})
            print(status, "sympy" in sys.modules)
        """)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ["0", "False"], (command, r.stdout)


@pytest.mark.integration
@pytest.mark.skipif(importlib.util.find_spec("nnsight") is None, reason="nnsight is not installed")
def test_nnsight_imported_first_shadows_nothing_and_traces_the_default_model(tmp_path):
    r = _python(f"""
        import nnsight
        import torch
        import compiler
        from constructions import checkpoint

        assert hasattr(object(), "save")  # nnsight's mount is active
        shadowed = [n for n in compiler.__all__ if getattr(compiler, n) is getattr(object, n, None)]
        assert not shadowed, shadowed
        model = compiler.compile_automaton("grid:5", max_len=16)
        assert all(block.attn.fused for block in model.blocks)
        compiler.save(model, {str(tmp_path / "g.safetensors")!r})
        assert compiler.load({str(tmp_path / "g.safetensors")!r}).automaton.name == "grid:5"
        tokens = torch.tensor([model.automaton.symbol_ids("L L R R R R R R L".split())])
        with torch.no_grad():
            ours = model(tokens)
        traced = nnsight.NNsight(model)
        with traced.trace(tokens):
            pattern = traced.blocks[1].attn.hook_pattern.output.save()
            hidden = traced.blocks[1].mlp.hook_post[0].output.save()
            logits = traced.output.save()
        assert pattern.shape == (1, model.config.blocks[1].n_heads, 10, 10), pattern.shape
        assert torch.allclose(pattern.sum(-1), torch.ones(1)), "a pattern row does not sum to 1"
        assert hidden.shape[:2] == (1, 10) and hidden.ge(0).all()
        assert torch.equal(logits.argmax(-1), ours.argmax(-1))
        print("ok")
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "ok"


def test_a_public_name_can_be_replaced_and_restored(monkeypatch):
    original = compiler.load
    monkeypatch.setattr(compiler, "load", print)
    assert compiler.load is print and "load" in vars(compiler)
    monkeypatch.undo()
    assert compiler.load is original
