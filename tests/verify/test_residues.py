"""The residue lemmas (verify/certify/residues.py) against the heads' own semantics: a tier's
nearest-value heads forget their dead slots and the codes no key goes on to read, and the memory
is rotated to residue 0, yet the readout agrees with the full memory's at every position of every
input up to a length; a read of a dead slot, or a forgotten code a key reads, is refused, never a
value."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.automata.subregular_families import random_language
from compiler.pipeline import compile_automaton
from constructions import factors
from constructions.obligations import Match, SuffixLookup
from verify.certify import program as program_module
from verify.certify.certificate import obligations_of
from verify.certify.program import _fixed_values, build, step
from verify.certify.residues import DEAD, FORGOTTEN, NAN, Residues, live_heads
from verify.certify.semantics import NotCovered, read, run_mlp


def test_the_lemmas_memory_reads_out_as_the_full_memory():
    """TSL_3 on 4 letters (a tier, 3 match heads' worth of residues): every input of length <= 6,
    the readout under the lemmas (dead slots forgotten, residue rotated to 0) and under the heads'
    own semantics, position by position; the lemmas' memory is the smaller."""
    model = compile_automaton(random_language("tsl", k=3, letters=4, seed=0), max_len=16, method=factors.NAME)
    ob = obligations_of(model)
    lemma = build(ob, model.max_len, _fixed_values(model))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(program_module, "residue_groups", lambda ob, ctx: [])
        full = build(ob, model.max_len, _fixed_values(model))
    assert lemma.canonical is not None and full.canonical is None
    pairs = side_by_side(lemma, full, " + ".join(ob.readout.reads), model.automaton.n_symbols, 6)
    dead = sum(any(v is DEAD for part in nl if isinstance(part, tuple) for v in part) for nl, _ in pairs)
    forgot = sum(any(v == FORGOTTEN for part in nl if isinstance(part, tuple) for v in part) for nl, _ in pairs)
    assert len(pairs) == sum(4**i for i in range(1, 7)) and dead > 0 and forgot > 0
    assert len({nl for nl, _ in pairs}) < len(pairs) // 4


def side_by_side(lemma, full, out: str, letters: int, depth: int) -> list:
    """Every input of length <= ``depth``, run by two builds of one program (under some lemma, and
    under the heads' own semantics): the readouts ``out`` agree at every position; returns the
    (lemma's, full) memories after each input."""
    stack, pairs = [(lemma.start, full.start, 0)], []
    while stack:
        ml, mf, t = stack.pop()
        if t == depth:
            continue
        for x in range(letters):
            nl, el = step(lemma, ml, x, t + 1)
            nl = lemma.canonical(nl)
            nf, ef = step(full, mf, x, t + 1)
            assert read(el, out) == read(ef, out), (t + 1, x)
            pairs.append((nl, nf))
            stack.append((nl, nf, t + 1))
    return pairs


def _head(j: int, M: int = 3):
    f = Match(f"back{j}", "key", "key", np.eye(M), (np.arange(M) - j) % M, "src", "dst")
    group = Residues("key", {tuple(float(v) for v in row): c for c, row in enumerate(np.eye(M))}, tuple(range(M)),
                     (f,), ((-j) % M,))
    return live_heads([group])[id(f)]


def test_a_read_of_a_forgotten_slot_is_refused():
    """The live-slots lemma holds while the key moves 0 or +1 along its cycle: head 1 of 3 residues
    keeps the last two slots; a key that steps back reads the forgotten one -- NotCovered."""
    h = _head(1)
    env = lambda label, value: {"key": tuple(float(v) for v in np.eye(3)[label]), "src": (value,)}  # noqa: E731
    m = h.start(env(0, 0.0))
    m, _ = h.step(m, env(0, 1.0), 1)
    m, got = h.step(m, env(1, 2.0), 2)
    assert got == (1.0,)  # the tier letter one back
    m, got = h.step(m, env(2, 3.0), 3)
    assert got == (2.0,) and m[0] is DEAD  # label 0 is two behind: head 1 never reads it again
    m2, got = h.step(m, env(0, 4.0), 4)  # forward, around the cycle: label 0 rewritten first
    assert got == (3.0,)
    with pytest.raises(NotCovered, match="forgot"):
        h.step(m, env(1, 5.0), 4)  # back one step: it would read label 0


def test_a_forgotten_code_is_read_only_where_no_key_reads_it():
    """The matches lemma's check (semantics of a suffix lookup): a NaN code after the prefix (1,)
    passes where no key longer than 1 starts with it, and is refused where one does."""
    o = SuffixLookup("first", ("a", "b"), "out", {(1,): np.array([2.0]), (2, 3): np.array([5.0])})
    env = {"a": (1.0,), "b": (NAN,), "out": (0.0,)}
    run_mlp(o, env, {})
    assert env["out"] == (2.0,)
    with pytest.raises(NotCovered, match="forgot"):
        run_mlp(o, {"a": (2.0,), "b": (NAN,), "out": (0.0,)}, {})
