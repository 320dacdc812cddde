"""Named automata with parameters: ``cyclic:5``, ``dihedral:4``, ``dyck:4,2``, ...

A catalog name is ``family`` or ``family:p1,p2,...``.  :func:`build` parses it,
checks the parameters (with upper bounds so that nothing explodes) and returns a
:class:`~compiler.spec.Semiautomaton` whose ``name`` is the canonical spelling
(lower case, no spaces, no leading zeros).  Every problem raises
:class:`~compiler.errors.SpecError` with a one-line message.

Conventions shared by all entries:

* Group automata are canonical group semiautomata (Definition 9 of the
  reference): states = group elements, start = the identity, and
  ``delta(g, s) = g·s`` -- right multiplication, so the state after a word is
  the product of its letters *in reading order*.  For permutation groups the
  product ``g·s`` means "apply g, then s" (sympy's ``p*q`` convention and
  :func:`compiler.semigroup.then`), i.e. the composite map ``s ∘ g``; this is
  exactly Definition 9's ``delta(g, h) = h·g`` written with maps composed
  right-to-left.  For the quaternions it is the Hamilton product ``g·s``, the
  mirror image of Definition 9 (the two are isomorphic via ``g -> g^-1``).
* Permutations of {1..n} are named in one-line notation: state ``"2314"`` maps
  1->2, 2->3, 3->1, 4->4 (the identity is ``"1234"``).  Letters are named in
  cycle notation with commas and no spaces, e.g. ``"(1,2,3)"``, so that a
  word is a whitespace-separated line (``shortcut run``); the identity letter
  is ``"e"``.
* No state or letter name contains whitespace.
* States are ordered deterministically, and the start state is always first.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence, TypeVar

from .errors import SpecError
from .promise import drop_state
from .spec import Semiautomaton

S = TypeVar("S", bound=Hashable)  # a state (or group element) object
L = TypeVar("L")  # a letter's meaning

MAX_GROUP_ORDER = 1000
"""Largest cyclic / cyclic-product group: its alphabet is the whole group."""
MAX_STATES = 2000
"""Largest state count for families with a small alphabet (dihedral, grids, dyck)."""
MAX_MEMORY_STATES = 1000
"""Largest memory:n (its alphabet has n + 1 letters)."""
MAX_PERMUTATION_DEGREE = 6
"""Largest n for symmetric:n / alternating:n (S6 has 720 elements)."""


@dataclass(frozen=True)
class CatalogEntry:
    """One family of the catalog, as ``shortcut catalog`` prints it."""

    pattern: str  # e.g. "cyclic:n"
    description: str  # one line
    example: str  # a buildable name, e.g. "cyclic:5"


# ---------------------------------------------------------------------------
# Generic builders


def _from_function(
    states: Sequence[S],
    state_name: Callable[[S], str],
    letters: Sequence[tuple[str, L]],
    delta: Callable[[S, L], S],
    start: S,
    output: Callable[[S], str] | None = None,
) -> Semiautomaton:
    """A :class:`Semiautomaton` from state objects and a transition function.

    ``letters`` pairs each symbol name with the value handed to ``delta``.
    The ``name`` is left empty; :func:`build` fills in the canonical name.
    """
    index = {q: i for i, q in enumerate(states)}
    maps = tuple(tuple(index[delta(q, value)] for q in states) for _, value in letters)
    outputs = None if output is None else tuple(output(q) for q in states)
    return Semiautomaton(
        name="",
        states=tuple(state_name(q) for q in states),
        alphabet=tuple(sym for sym, _ in letters),
        maps=maps,
        start=index[start],
        outputs=outputs,
    )


def _group_automaton(
    elements: Sequence[S],
    product: Callable[[S, S], S],
    element_name: Callable[[S], str],
    letters: Sequence[tuple[str, S]] | None = None,
) -> Semiautomaton:
    """The canonical group semiautomaton (Definition 9), right-multiplying.

    ``elements[0]`` must be the identity (it is the start state);
    ``delta(g, s) = product(g, s)``.  ``letters`` defaults to every element,
    named like the states (Definition 9's Sigma = G); pass a generating set
    to use fewer letters.
    """
    if letters is None:
        letters = [(element_name(g), g) for g in elements]
    return _from_function(elements, element_name, letters, product, elements[0])


def _permutations(n: int, even_only: bool) -> list[tuple[int, ...]]:
    """Permutations of {1..n} as image tuples, lexicographic (identity first)."""
    perms = itertools.permutations(range(1, n + 1))
    return [p for p in perms if not even_only or _is_even(p)]


def _is_even(p: tuple[int, ...]) -> bool:
    """Whether a permutation (image tuple of {1..n}) has an even number of inversions."""
    inversions = sum(1 for i, j in itertools.combinations(range(len(p)), 2) if p[i] > p[j])
    return inversions % 2 == 0


def _then(p: tuple[int, ...], q: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation "apply p, then q" (image tuples of {1..n})."""
    return tuple(q[x - 1] for x in p)


def _cycle(n: int, cycle: Sequence[int]) -> tuple[str, tuple[int, ...]]:
    """A cycle on {1..n}: its name in cycle notation and its image tuple."""
    image = list(range(1, n + 1))
    for a, b in zip(cycle, list(cycle[1:]) + [cycle[0]]):
        image[a - 1] = b
    return "(" + ",".join(map(str, cycle)) + ")", tuple(image)


def _one_line(p: tuple[int, ...]) -> str:
    """One-line notation of a permutation, e.g. ``"2314"`` (n <= 9 here)."""
    return "".join(map(str, p))


# ---------------------------------------------------------------------------
# Parameter checks


def _at_least(pattern: str, var: str, value: int, low: int) -> None:
    """Raise "cyclic:n needs n >= 2, got 1" unless ``value >= low``."""
    if value < low:
        raise SpecError(f"{pattern} needs {var} >= {low}, got {value}")


def _at_most(pattern: str, var: str, value: int, high: int, why: str = "") -> None:
    """Raise "symmetric:n needs n <= 6 (why), got 7" unless ``value <= high``."""
    if value > high:
        raise SpecError(f"{pattern} needs {var} <= {high}{why}, got {value}")


# ---------------------------------------------------------------------------
# The families (each takes parsed parameters, returns an unnamed automaton)


def _cyclic(n: int) -> Semiautomaton:
    """C_n as the mod-n counter of Definition 4: Q = Sigma = Z_n, delta = addition."""
    _at_least("cyclic:n", "n", n, 2)
    _at_most("cyclic:n", "n", n, MAX_GROUP_ORDER)
    return _group_automaton(range(n), lambda a, b: (a + b) % n, str)


def _cyclic_product(*ns: int) -> Semiautomaton:
    """C_n1 x ... x C_nk (direct product, Section 3.3.1): every element is a letter.

    States and letters are tuples written ``"0.1.1"``; delta adds componentwise.
    """
    pattern = "cyclic-product:n1,n2,..."
    if len(ns) < 2:
        raise SpecError(f"{pattern} needs at least two factors (use cyclic:n for one), got {len(ns)}")
    for i, n in enumerate(ns, 1):
        _at_least(pattern, f"n{i}", n, 2)
    order = 1
    for n in ns:
        order *= n
    _at_most(pattern, "n1*n2*...", order, MAX_GROUP_ORDER)
    elements = list(itertools.product(*(range(n) for n in ns)))

    def add(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
        return tuple((x + y) % n for x, y, n in zip(a, b, ns))

    return _group_automaton(elements, add, lambda g: ".".join(map(str, g)))


def _dihedral(n: int) -> Semiautomaton:
    """D_2n as the "reversible car on a circular world" (Section 3.4.4.3.3).

    A state (p, o) is a position p in Z_n and an orientation o in {+1, -1},
    named ``"r<p>+"`` / ``"r<p>-"``.  ``advance`` moves p by o, ``reverse``
    flips o.  These are the group elements (1, +) and (0, -) of
    Z_n ⋊ {±1} with (p, o)·(p', o') = (p + o·p', o·o'), so this is the
    canonical group semiautomaton for those two generators; order 2n.
    """
    _at_least("dihedral:n", "n", n, 2)
    _at_most("dihedral:n", "n", n, MAX_STATES // 2)
    elements = [(p, o) for o in (1, -1) for p in range(n)]

    def mul(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return ((a[0] + a[1] * b[0]) % n, a[1] * b[1])

    letters = [("advance", (1, 1)), ("reverse", (0, -1))]
    return _group_automaton(elements, mul, lambda g: f"r{g[0]}{'+' if g[1] > 0 else '-'}", letters)


_QUATERNION_UNITS = ("1", "i", "j", "k")


def _hamilton(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The Hamilton product of quaternions given as (real, i, j, k) coefficients."""
    a1, b1, c1, d1 = a
    a2, b2, c2, d2 = b
    return (
        a1 * a2 - b1 * b2 - c1 * c2 - d1 * d2,
        a1 * b2 + b1 * a2 + c1 * d2 - d1 * c2,
        a1 * c2 - b1 * d2 + c1 * a2 + d1 * b2,
        a1 * d2 + b1 * c2 - c1 * b2 + d1 * a2,
    )


def _quaternion_name(q: tuple[int, ...]) -> str:
    """``"1"``, ``"-1"``, ``"i"``, ``"-i"``, ... for a unit quaternion of Q8."""
    axis = next(i for i, c in enumerate(q) if c)
    return ("" if q[axis] > 0 else "-") + _QUATERNION_UNITS[axis]


def _quaternion() -> Semiautomaton:
    """Q8 = {±1, ±i, ±j, ±k} under the Hamilton product; letters 1, i, j, k."""
    units = [tuple(int(i == axis) for i in range(4)) for axis in range(4)]
    elements = [tuple(s * c for c in u) for u in units for s in (1, -1)]
    letters = [(_quaternion_name(u), u) for u in units]
    return _group_automaton(elements, _hamilton, _quaternion_name, letters)


def _alternating(n: int) -> Semiautomaton:
    """A_n on its even permutations, letters the 3-cycles (1,2,i), i = 3..n (Section 3.4.5.1.1)."""
    _at_least("alternating:n", "n", n, 3)
    _at_most("alternating:n", "n", n, MAX_PERMUTATION_DEGREE, " (A_n has n!/2 states)")
    letters = [_cycle(n, (1, 2, i)) for i in range(3, n + 1)]
    return _group_automaton(_permutations(n, even_only=True), _then, _one_line, letters)


def _symmetric(n: int) -> Semiautomaton:
    """S_n on all permutations, letters (1,2), (1,2,...,n) and the identity e.

    The reference's experiments (Section 3.4.5.1.1) add 6 more permutations to
    speed up mixing; they do not change the group, and are left out here.
    """
    _at_least("symmetric:n", "n", n, 3)
    _at_most("symmetric:n", "n", n, MAX_PERMUTATION_DEGREE, " (S_n has n! states)")
    elements = _permutations(n, even_only=False)
    letters = [_cycle(n, (1, 2)), _cycle(n, tuple(range(1, n + 1))), ("e", elements[0])]
    return _group_automaton(elements, _then, _one_line, letters)


_BRACKETS = ("()", "[]", "{}", "<>")


def _dyck(n: int, k: int) -> Semiautomaton:
    """Dyck_{n,k}: the stack of a depth-<=n, k-type bracket recogniser (Section 3.4.5.1.1).

    States are stacks (bottom to top) -- sum_{i<=n} k^i of them -- plus an
    absorbing ``error`` (push past depth n, pop of an empty stack, or a
    mismatched close).  For k <= 4 a stack is written with its open brackets,
    e.g. ``"(["`` (``"ε"`` when empty) and the letters are ``( ) [ ] { } < >``;
    otherwise stacks are type indices joined by ``.`` and the letters are
    ``open0``/``close0``, ...  Outputs: ``accept`` on the empty stack, else ``reject``.
    """
    pattern = "dyck:n,k"
    _at_least(pattern, "n", n, 1)
    _at_least(pattern, "k", k, 1)
    total, level = 1, 1  # error state + stacks of depth 0..n, stopping once over the limit
    for _ in range(n + 1):
        total += level
        level *= k
        if total > MAX_STATES:
            raise SpecError(
                f"{pattern} with n={n}, k={k} has more than {MAX_STATES} states "
                f"(sum of k^i for i <= n, plus error); choose a smaller n or k"
            )
    stacks: list[tuple[int, ...] | None] = [
        s for depth in range(n + 1) for s in itertools.product(range(k), repeat=depth)
    ]
    stacks.append(None)  # error

    def step(stack: tuple[int, ...] | None, letter: tuple[bool, int]) -> tuple[int, ...] | None:
        is_open, t = letter
        if stack is None:
            return None
        if is_open:
            return stack + (t,) if len(stack) < n else None
        return stack[:-1] if stack and stack[-1] == t else None

    def name(stack: tuple[int, ...] | None) -> str:
        if stack is None:
            return "error"
        if not stack:
            return "ε"
        if k <= len(_BRACKETS):
            return "".join(_BRACKETS[t][0] for t in stack)
        return ".".join(map(str, stack))

    if k <= len(_BRACKETS):
        symbols = [(_BRACKETS[t][0], _BRACKETS[t][1]) for t in range(k)]
    else:
        symbols = [(f"open{t}", f"close{t}") for t in range(k)]
    letters = [(sym, (is_open, t)) for t in range(k) for sym, is_open in zip(symbols[t], (True, False))]
    return _from_function(stacks, name, letters, step, (), lambda s: "accept" if s == () else "reject")


def _dyck_legal(n: int, k: int) -> Semiautomaton:
    """The paper's Dyck_{n,k}: the stacks of :func:`_dyck` and no error state -- pushing onto a
    full stack, popping an empty one and a mismatched close are undefined, a promise that legal
    inputs never do them (sum_{i<=n} k^i states; 31 for n = 4, k = 2)."""
    full = _dyck(n, k)
    return drop_state(full, full.states.index("error"))


def _clamp(value: int, size: int) -> int:
    """``value`` clamped to 0..size-1 (a gridworld wall)."""
    return min(max(value, 0), size - 1)


def _grid(n: int, noop: str | None = None) -> Semiautomaton:
    """Grid_n (Example 3 / Section 3.4.5.1.1): L and R move on 0..n-1, clamped at the walls.

    ``grid:n,noop`` adds the do-nothing letter ``N`` (Example 3's ⊥).
    """
    _at_least("grid:n", "n", n, 2)
    _at_most("grid:n", "n", n, MAX_GRID, " (gridworld's parameters grow as n^2: beyond, over the parameter budget, and "
             "no other construction compiles a long line world)")
    letters = [("L", -1), ("R", 1)] + ([("N", 0)] if noop else [])
    return _from_function(range(n), str, letters, lambda q, d: _clamp(q + d, n), 0)


def _grid2d(w: int, h: int) -> Semiautomaton:
    """A w x h gridworld (Example 5): L/R move x, D/U move y, clamped; states ``"x,y"``."""
    pattern = "grid2d:w,h"
    _at_least(pattern, "w", w, 2)
    _at_least(pattern, "h", h, 2)
    _at_most(pattern, "w*h", w * h, MAX_STATES)
    cells = [(x, y) for x in range(w) for y in range(h)]
    letters = [("L", (-1, 0)), ("R", (1, 0)), ("D", (0, -1)), ("U", (0, 1))]

    def move(c: tuple[int, int], d: tuple[int, int]) -> tuple[int, int]:
        return (_clamp(c[0] + d[0], w), _clamp(c[1] + d[1], h))

    return _from_function(cells, lambda c: f"{c[0]},{c[1]}", letters, move, (0, 0))


def _parity() -> Semiautomaton:
    """Parity (Example 1): states even/odd, letter 1 toggles, 0 keeps; even accepts."""
    letters = [("0", 0), ("1", 1)]
    return _from_function(
        [0, 1], ("even", "odd").__getitem__, letters, lambda q, b: q ^ b, 0,
        lambda q: "accept" if q == 0 else "reject",
    )


def _write(q: int, value: int | None) -> int:
    """A memory letter: write ``value``, or keep ``q`` when the letter is a no-op (None)."""
    return q if value is None else value


def _flipflop() -> Semiautomaton:
    """The flip-flop (Example 2): w0 / w1 write the bit, r (read/ignore) keeps it."""
    letters = [("w0", 0), ("w1", 1), ("r", None)]
    return _from_function([0, 1], str, letters, _write, 0)


def _memory(n: int) -> Semiautomaton:
    """The memory semiautomaton of Definition 5 on Q = {0..n-1}.

    Sigma = Q ∪ {⊥}: the letter ``"q"`` sets the state to q (delta(., q) = q) and
    ``"noop"`` (the ⊥ of Definition 5) keeps it.  Start ``"0"``.
    """
    _at_least("memory:n", "n", n, 2)
    _at_most("memory:n", "n", n, MAX_MEMORY_STATES)
    letters = [(str(q), q) for q in range(n)] + [("noop", None)]
    return _from_function(range(n), str, letters, _write, 0)


MAX_ADDENDS = 4
"""Largest adder:n (its alphabet has 2^n letters)."""
MAX_BLOCKS = 64
"""Largest repeat:n / blocks:n."""
MAX_GRID = 626
"""Largest grid:n that compiles: gridworld's parameter count grows as n^2 and passes the
parameter budget at n = 627 (at every max_len); krohn-rhodes passes its image budget from
n = 300 on and the scan is far larger."""
MAX_NTH_LAST = 11
"""Largest nth-last:n that compiles (2^n states; lookback stops at k = 8, krohn-rhodes takes
9..11 -- 91 million parameters at n = 11, max_len 16 --, and at n = 12 nothing fits the
parameter budget: no construction compiles it)."""


def _adder(n: int) -> Semiautomaton:
    """Binary addition of n addends read least significant bit first: a letter is the n bits
    of one column (``"011"``: addend 1 has 0, addends 2 and 3 have 1), the state is
    (digit written, carry), named ``d1c0``; the carry stays in 0..n-1."""
    _at_least("adder:n", "n", n, 2)
    _at_most("adder:n", "n", n, MAX_ADDENDS)
    states = [(d, c) for c in range(n) for d in (0, 1)]
    letters = [("".join(map(str, bits)), sum(bits)) for bits in itertools.product((0, 1), repeat=n)]
    return _from_function(states, lambda s: f"d{s[0]}c{s[1]}", letters,
                          lambda s, total: ((total + s[1]) % 2, (total + s[1]) // 2), (0, 0))


def _repeat(n: int) -> Semiautomaton:
    """The recogniser of (0 1 ... n-1)* over letters 0..n-1 with a failure sink: state i
    expects letter i next; any other letter enters ``sink``; state 0 accepts."""
    _at_least("repeat:n", "n", n, 2)
    _at_most("repeat:n", "n", n, MAX_BLOCKS)
    letters = [(str(i), i) for i in range(n)]
    return _from_function(list(range(n)) + [None], lambda q: "sink" if q is None else str(q), letters,
                          lambda q, a: None if q is None or a != q else (q + 1) % n, 0,
                          lambda q: "accept" if q == 0 else "reject")


def _blocks(n: int) -> Semiautomaton:
    """The recogniser of 0*1*0*1*... (n blocks, alternating, starting with 0) over {0, 1}
    with a failure sink: state ``bi`` is inside block i; a letter that starts block n
    enters ``sink``.  ``blocks:4`` is 0*1*0*1*."""
    _at_least("blocks:n", "n", n, 1)
    _at_most("blocks:n", "n", n, MAX_BLOCKS)
    letters = [("0", 0), ("1", 1)]

    def step(q: int | None, a: int) -> int | None:
        if q is None or a == q % 2:
            return q
        return q + 1 if q + 1 < n else None

    return _from_function(list(range(n)) + [None], lambda q: "sink" if q is None else f"b{q}", letters, step, 0,
                          lambda q: "reject" if q is None else "accept")


def _nth_last(n: int) -> Semiautomaton:
    """The minimal DFA of "the n-th letter from the end is a" over {a, b} (n-definite): a state
    is the last n letters (``b`` before the start), named by them, oldest first."""
    _at_least("nth-last:n", "n", n, 1)
    _at_most("nth-last:n", "n", n, MAX_NTH_LAST, " (2^n states: beyond, no construction fits the parameter budget)")
    bits = list(itertools.product((0, 1), repeat=n))
    idx = {w: i for i, w in enumerate(bits)}
    maps = tuple(tuple(idx[w[1:] + (bit,)] for w in bits) for bit in (1, 0))
    return Semiautomaton(f"nth-last:{n}", tuple("".join("ba"[x] for x in w) for w in bits), ("a", "b"), maps,
                         start=idx[(0,) * n])


# ---------------------------------------------------------------------------
# The registry and the parser


@dataclass(frozen=True)
class _Family:
    entry: CatalogEntry
    make: Callable[..., Semiautomaton]
    arity: int | None  # number of integer parameters; None = one or more
    flags: tuple[str, ...] = ()  # optional trailing word parameters, e.g. "noop"


def _family(pattern: str, description: str, example: str, make: Callable[..., Semiautomaton],
            arity: int | None, flags: tuple[str, ...] = ()) -> tuple[str, _Family]:
    """A registry item: the family's key (the pattern before ':') and its record."""
    return pattern.split(":")[0], _Family(CatalogEntry(pattern, description, example), make, arity, flags)


_FAMILIES: dict[str, _Family] = dict([
    _family("cyclic:n", "cyclic group C_n: mod-n counter, every element a letter", "cyclic:5", _cyclic, 1),
    _family("cyclic-product:n1,n2,...", "direct product C_n1 x C_n2 x ..., states like 0.1.1",
            "cyclic-product:2,2,2", _cyclic_product, None),
    _family("dihedral:n", "dihedral group D_2n: car on a circle, letters advance/reverse",
            "dihedral:4", _dihedral, 1),
    _family("quaternion", "quaternion group Q8, letters 1 i j k", "quaternion", _quaternion, 0),
    _family("alternating:n", "alternating group A_n (n <= 6), letters (1,2,i)", "alternating:4",
            _alternating, 1),
    _family("symmetric:n", "symmetric group S_n (n <= 6), letters (1,2), (1,2,...,n), e",
            "symmetric:4", _symmetric, 1),
    _family("dyck:n,k", "bounded Dyck stack: depth <= n, k bracket types, plus error",
            "dyck:4,2", _dyck, 2),
    _family("dyck-legal:n,k", "the paper's Dyck: the stacks of dyck:n,k, no error state; inputs promised legal",
            "dyck-legal:4,2", _dyck_legal, 2),
    _family("grid:n[,noop]", "1-D gridworld on 0..n-1 with walls, letters L R (noop adds N)",
            "grid:9", _grid, 1, ("noop",)),
    _family("grid2d:w,h", "2-D gridworld w x h with walls, letters L R D U", "grid2d:3,4", _grid2d, 2),
    _family("parity", "parity of the 1s: states even/odd, even accepts", "parity", _parity, 0),
    _family("flipflop", "flip-flop: w0/w1 write the bit, r keeps it", "flipflop", _flipflop, 0),
    _family("memory:n", "memory unit (Definition 5): letter q sets state q, noop keeps",
            "memory:3", _memory, 1),
    _family("adder:n", "binary adder of n addends, LSB first: letters are columns of bits, state (digit, carry)",
            "adder:2", _adder, 1),
    _family("repeat:n", "recogniser of (0 1 ... n-1)* with a failure sink", "repeat:2", _repeat, 1),
    _family("blocks:n", "recogniser of 0*1*0*1*... (n blocks) with a failure sink", "blocks:4", _blocks, 1),
    _family("nth-last:n", "the n-th letter from the end is a, over {a, b} (2^n states, n-definite)",
            "nth-last:3", _nth_last, 1),
])


def entries() -> list[CatalogEntry]:
    """Every catalog family, in a fixed order (for ``shortcut catalog``)."""
    return [f.entry for f in _FAMILIES.values()]


def paper_suite() -> list[str]:
    """The 19 automata of the reference's experiments (Section 3.4.5.1.1), in order."""
    return (
        [f"cyclic:{n}" for n in range(2, 9)]
        + ["cyclic-product:2,2", "cyclic-product:2,2,2", "dihedral:3", "dihedral:4", "quaternion",
           "alternating:4", "symmetric:4", "alternating:5", "symmetric:5", "dyck:4,2", "grid:4", "grid:9"]
    )


def _parse_int(pattern: str, text: str) -> int:
    """A decimal integer parameter (range checks are the family's), or a SpecError."""
    digits = text[1:] if text.startswith("-") else text
    if not (digits.isascii() and digits.isdigit()):
        raise SpecError(f"{pattern} needs integer parameters, got {text!r}")
    return int(text)


def _parse_params(family: _Family, args: list[str]) -> list[int | str]:
    """Split a family's raw parameters into integers and trailing flags."""
    pattern = family.entry.pattern
    flags: list[str] = []
    while args and args[-1] in family.flags:
        flag = args.pop()
        if flag in flags:
            raise SpecError(f"{pattern}: flag {flag!r} given twice")
        flags.insert(0, flag)
    if family.arity == 0 and args:
        raise SpecError(f"{pattern} takes no parameters, got {','.join(args)!r}")
    numbers = [_parse_int(pattern, a) for a in args]
    if family.arity is not None and len(args) != family.arity:
        raise SpecError(
            f"{pattern} takes {family.arity} integer parameter{'s' if family.arity > 1 else ''}, "
            f"got {len(args)}; e.g. {family.entry.example}"
        )
    if family.arity is None and not args:
        raise SpecError(f"{pattern} needs parameters; e.g. {family.entry.example}")
    return numbers + flags


def build(name: str) -> Semiautomaton:
    """Build the catalog automaton called ``name`` (e.g. ``"dyck:4,2"``).

    The result's ``name`` is the canonical spelling.  Raises :class:`SpecError`
    for an unknown family or bad / missing / out-of-range parameters.
    """
    if not isinstance(name, str):
        raise SpecError(f"a catalog name must be a string, got {type(name).__name__}")
    text = "".join(name.split()).lower()
    family_name, _, rest = text.partition(":")
    family = _FAMILIES.get(family_name)
    if family is None:
        raise SpecError(f"unknown catalog automaton {name!r}; run `shortcut catalog` to list them")
    args = rest.split(",") if rest else []
    if ":" in text and not rest:
        raise SpecError(f"{name!r} has an empty parameter list; e.g. {family.entry.example}")
    if any(a == "" for a in args):
        raise SpecError(f"{name!r} has an empty parameter; e.g. {family.entry.example}")
    params = _parse_params(family, args)
    canonical = family_name + (":" + ",".join(map(str, params)) if params else "")
    return dataclasses.replace(family.make(*params), name=canonical)


def random_maps(rng: "random.Random", n_states: int, n_letters: int, family: str = "mixed") -> list[tuple[int, ...]]:
    """Random transition maps: ``mixed`` makes each letter a permutation (30%), a reset (15%)
    or an arbitrary map; ``uniform`` makes every letter an arbitrary map."""
    maps = []
    for _ in range(n_letters):
        r = rng.random() if family == "mixed" else 1.0
        if r < 0.3:
            m = list(range(n_states))
            rng.shuffle(m)
        elif r < 0.45:
            m = [rng.randrange(n_states)] * n_states
        else:
            m = [rng.randrange(n_states) for _ in range(n_states)]
        maps.append(tuple(m))
    return maps


def random_automaton(rng: "random.Random", n_states: int, n_letters: int, family: str = "mixed",
                     start: int = 0, name: str = "random") -> Semiautomaton:
    """A random automaton (see :func:`random_maps`) with states "0".. and letters "a0".. -- used by
    property tests and benchmarks."""
    return Semiautomaton(name, tuple(map(str, range(n_states))), tuple(f"a{j}" for j in range(n_letters)),
                         tuple(random_maps(rng, n_states, n_letters, family)), start)
