"""The subregular generator: every class's minimal DFA agrees with the class's definition."""

from __future__ import annotations

import itertools
import random

import pytest

from compiler.automata.errors import SpecError
from compiler.automata.moore import minimise
from compiler.automata.spec import Semiautomaton
from compiler.automata.subregular_families import (CLASSES, COMBINATIONS, END, START, FactorLanguage, Language,
                                                   PiecewiseLocalLanguage, depth, draw, random_language)


def _disagreement(lang: Language, dfa: Semiautomaton, words: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    """The first prefix (of one of ``words``) on which the DFA's output and the definition differ."""
    assert dfa.outputs is not None
    for w in words:
        if (dfa.outputs[dfa.start] == "accept") != lang.accepts(()):
            return ()
        for t, q in enumerate(dfa.run(w)):
            if (dfa.outputs[q] == "accept") != lang.accepts(w[:t + 1]):
                return w[:t + 1]
    return None


def _words(letters: int, seed: int) -> list[tuple[int, ...]]:
    """Every word up to length 4 over the first three letters, and random words up to length 14."""
    rng = random.Random(seed)
    short = [w for n in range(5) for w in itertools.product(range(min(letters, 3)), repeat=n)]
    return short + [tuple(rng.randrange(letters) for _ in range(rng.randint(5, 14))) for _ in range(150)]


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("k,letters", [(2, 3), (3, 4), (4, 6)])
def test_dfa_agrees_with_the_definition(cls: str, k: int, letters: int) -> None:
    for seed in range(2):
        lang, dfa = draw(cls, k=k, letters=letters, seed=seed)
        assert _disagreement(lang, dfa, _words(letters, seed)) is None
        assert set(dfa.outputs or ()) == {"accept", "reject"}


def test_the_comparison_catches_a_wrong_state() -> None:
    """The agreement check can fail: one state's output flipped is found."""
    lang, dfa = draw("ltt", k=3, letters=4, seed=0)
    assert dfa.outputs is not None
    flip = dfa.run(_words(4, 0)[-1])[-1]  # a state the sample visits
    outputs = tuple(("reject" if x == "accept" else "accept") if q == flip else x for q, x in enumerate(dfa.outputs))
    broken = Semiautomaton(dfa.name, dfa.states, dfa.alphabet, dfa.maps, dfa.start, outputs)
    assert _disagreement(lang, broken, _words(4, 0)) is not None


@pytest.mark.parametrize("cls", CLASSES)
def test_minimal_breadth_first_and_deterministic(cls: str) -> None:
    a = random_language(cls, k=3, letters=5, seed=7)
    assert a == random_language(cls, k=3, letters=5, seed=7)
    assert minimise(a).states_after == a.n_states
    assert a.start == 0 and a.states[0] == "q0" and a.alphabet == tuple(f"a{j}" for j in range(5))
    # breadth first: a state's first visit comes after its parent's
    seen = [0]
    for q in range(a.n_states):
        for m in a.maps:
            if m[q] not in seen:
                assert m[q] == len(seen)
                seen.append(m[q])


def test_tier_letters_are_invisible() -> None:
    lang, dfa = draw("tsl", k=2, letters=6, seed=3, tier=2)
    assert isinstance(lang, FactorLanguage) and len(lang.tier) == 2
    for a in range(6):
        if a not in lang.tier:
            assert dfa.maps[a] == tuple(range(dfa.n_states))


def test_sl_forbids_its_factors() -> None:
    lang, dfa = draw("sl", k=3, letters=4, seed=1)
    assert isinstance(lang, FactorLanguage)
    for p in lang.patterns:
        inner = tuple(x for x in p if x not in (START, END))
        assert not lang.accepts(inner)


def test_star_free_is_aperiodic() -> None:
    """Every letter's map and sampled word maps m satisfy m^n = m^(n+1): no counter."""
    rng = random.Random(0)
    for seed in range(3):
        lang, a = draw("sf", k=4, letters=4, seed=seed)
        assert depth(lang.formula) == 4  # type: ignore[union-attr]
        n = a.n_states
        for _ in range(30):
            m = tuple(range(n))
            for letter in (rng.randrange(4) for _ in range(rng.randint(1, 5))):
                m = tuple(a.maps[letter][q] for q in m)
            power = m
            for _ in range(n):
                power = tuple(m[q] for q in power)
            assert power == tuple(m[q] for q in power)


def test_plt_combines_an_lt_and_a_pt_condition() -> None:
    """Each of the ten combinations depends on both conditions, and a drawn PLT language's
    membership is its combination of its LT part's and its PT part's."""
    assert len(COMBINATIONS) == 10
    for comb in COMBINATIONS:
        assert any(((x, y) in comb) != ((not x, y) in comb) for x in (False, True) for y in (False, True))
        assert any(((x, y) in comb) != ((x, not y) in comb) for x in (False, True) for y in (False, True))
    rng = random.Random(1)
    for seed in range(3):
        lang, dfa = draw("plt", k=3, letters=4, seed=seed)
        assert isinstance(lang, PiecewiseLocalLanguage)
        for _ in range(50):
            w = tuple(rng.randrange(4) for _ in range(rng.randint(0, 9)))
            both = (lang.local.accepts(w), lang.piecewise.accepts(w))
            assert lang.accepts(w) == (both in lang.combination)
            assert (dfa.outputs[dfa.run(w)[-1] if w else dfa.start] == "accept") == lang.accepts(w)


def test_zp_counts_modulo_k() -> None:
    a = random_language("zp", k=5, letters=3, seed=0)
    assert a.n_states in (5,)


def test_sizes_reach_the_issue_table() -> None:
    """A strictly 6-piecewise language on 64 letters with a few hundred states."""
    a = random_language("sp", k=6, letters=64, seed=1)
    assert 500 <= a.n_states <= 1400


@pytest.mark.parametrize("kwargs,message", [
    ({"cls": "xx", "k": 2, "letters": 2}, "unknown subregular class"),
    ({"cls": "sl", "k": 0, "letters": 2}, "k must be"),
    ({"cls": "zp", "k": 1, "letters": 2}, "k must be"),
    ({"cls": "sl", "k": 2, "letters": 0}, "letters must be"),
    ({"cls": "sl", "k": 2, "letters": 3, "tier": 2}, "tier applies"),
    ({"cls": "tsl", "k": 2, "letters": 3, "tier": 4}, "tier applies"),
    ({"cls": "sp", "k": 2, "letters": 3, "factors": 0}, "factors must be"),
])
def test_bad_arguments_are_refused(kwargs: dict, message: str) -> None:
    cls = kwargs.pop("cls")
    with pytest.raises(SpecError, match=message):
        random_language(cls, seed=0, **kwargs)
