"""Random automata by class, for the model zoo: one generator per class, seeded.

Each generator takes a ``random.Random`` and the size ranges of :class:`Sizes` and returns a
:class:`~compiler.automata.spec.Semiautomaton` of that class; the same seed gives the same
automaton.  States are relabelled by a random permutation (the start stays a random state), so
the constructions meet each class up to renaming, as they would in the wild.

Classes (:data:`CLASSES`):

* ``group``: every letter a random permutation (the group they generate is often S_n);
* ``solvable``: permutation letters generating a solvable group (rejection sampling on
  :func:`compiler.automata.groups.analyse`; S_n for n <= 4 is always solvable);
* ``aperiodic``: every letter an order-preserving map of a chain (such maps form an
  aperiodic monoid, so the automaton is counter-free: star-free languages);
* ``definite``: the minimal Moore machine of random labels on the last k letters (every
  state is decided by the last k letters: k-definite);
* ``local``: letters that reset to a state or keep it (set/reset/keep memories, flip-flops);
* ``stack``: bounded Dyck stacks (``dyck:n,k`` of the catalog);
* ``gridworld``: 1-D and 2-D gridworlds with walls (``grid:n``, ``grid:n,noop``, ``grid2d:w,h``);
* ``product``: the direct product of two small automata of other classes on one alphabet;
* ``arbitrary``: :func:`compiler.automata.catalog.random_automaton` (``mixed`` letters);
* ``subregular-sl``, ``-lt``, ``-ltt``, ``-tsl``, ``-tlt``, ``-sp``, ``-pt``, ``-plt``, ``-zp``, ``-sf``: a
  random language of that subregular class (:mod:`compiler.automata.subregular_families`; k from
  the ``states`` range, at most :data:`SUBREGULAR_MAX_K`), its minimal DFA with outputs
  accept/reject; these keep their start state when relabelled (another start would compile
  another language);
* ``mealy``: a random complete Mealy machine (:mod:`compiler.automata.mealy_families`: outputs on
  transitions, 2 to 8 of them), ``mealy-tcp``: the TCP-like server protocol of
  ``examples/tcp_server.dot`` (its own names and start; ``states`` and ``letters`` unused).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import Callable

from .catalog import build, random_automaton
from .errors import SpecError
from .groups import analyse
from .mealy_families import random_mealy, tcp_server
from .moore import minimise
from .spec import Semiautomaton
from .subregular_families import CLASSES as SUBREGULAR_CLASSES
from .subregular_families import random_language


@dataclass(frozen=True)
class Sizes:
    """Inclusive ranges a generator draws from: states (for stacks: depth; grids: width) and letters."""

    states: tuple[int, int] = (2, 6)
    letters: tuple[int, int] = (2, 3)


MAX_STATES = 64
"""Largest state count a family may ask for (the zoo is for small, readable models)."""
MAX_LETTERS = 8
"""Largest alphabet a family may ask for."""
SOLVABLE_TRIES = 32
"""Draws of permutation letters before :func:`solvable` falls back to a cyclic group."""


def _draw(rng: random.Random, bounds: tuple[int, int]) -> int:
    return rng.randint(bounds[0], bounds[1])


def relabel(a: Semiautomaton, rng: random.Random, name: str, keep_start: bool = False) -> Semiautomaton:
    """``a`` with its states renamed ``s0``.. in a random order and a random start, or its own
    start when ``keep_start`` (``name``)."""
    order = list(range(a.n_states))
    rng.shuffle(order)  # order[new] = old
    new_of = {old: new for new, old in enumerate(order)}
    maps = tuple(tuple(new_of[m[old]] for old in order) for m in a.maps)
    outputs = None if a.outputs is None else tuple(a.outputs[old] for old in order)
    said = None if a.transition_outputs is None else tuple(tuple(row[old] for old in order)
                                                              for row in a.transition_outputs)
    start = new_of[a.start] if keep_start else rng.randrange(a.n_states)
    return Semiautomaton(name, tuple(f"s{i}" for i in range(a.n_states)), a.alphabet, maps, start, outputs, (), said)


def _from_maps(maps: list[tuple[int, ...]]) -> Semiautomaton:
    n = len(maps[0])
    return Semiautomaton("random", tuple(map(str, range(n))), tuple(f"a{j}" for j in range(len(maps))),
                         tuple(maps), 0)


def group(rng: random.Random, sizes: Sizes) -> Semiautomaton:
    """Every letter a random permutation of the states."""
    n, k = _draw(rng, sizes.states), _draw(rng, sizes.letters)
    return _from_maps([tuple(rng.sample(range(n), n)) for _ in range(k)])


def solvable(rng: random.Random, sizes: Sizes) -> Semiautomaton:
    """Permutation letters generating a solvable group (the cyclic group C_n after
    :data:`SOLVABLE_TRIES` draws that were not)."""
    n, k = _draw(rng, sizes.states), _draw(rng, sizes.letters)
    for _ in range(SOLVABLE_TRIES):
        maps = [tuple(rng.sample(range(n), n)) for _ in range(k)]
        if analyse(maps, n, enumerate_non_solvable=False).solvable:
            return _from_maps(maps)
    shift = tuple((q + 1) % n for q in range(n))
    return _from_maps([shift, *(tuple(range(n)) for _ in range(k - 1))])


def aperiodic(rng: random.Random, sizes: Sizes) -> Semiautomaton:
    """Every letter an order-preserving map of 0 < 1 < ... < n-1 (an aperiodic monoid)."""
    n, k = _draw(rng, sizes.states), _draw(rng, sizes.letters)
    return _from_maps([tuple(sorted(rng.randrange(n) for _ in range(n))) for _ in range(k)])


def definite(rng: random.Random, sizes: Sizes) -> Semiautomaton:
    """The minimal Moore machine of random labels on the last k letters (k from 1 to 3, at
    most ``sizes.states[1]`` windows), as a plain automaton (labels dropped)."""
    s = _draw(rng, sizes.letters)
    k = _draw(rng, (1, 3))
    while k > 1 and s ** k > sizes.states[1]:
        k -= 1
    windows = [w for j in range(k + 1) for w in itertools.product(range(s), repeat=j)]
    index = {w: i for i, w in enumerate(windows)}
    maps = [tuple(index[(w + (a,))[-k:]] for w in windows) for a in range(s)]
    labels = tuple(str(rng.randrange(max(2, sizes.states[0]))) for _ in windows)
    windowed = Semiautomaton("random", tuple(map(str, range(len(windows)))), tuple(f"a{j}" for j in range(s)),
                             tuple(maps), 0, labels)
    q = minimise(windowed).quotient
    return Semiautomaton("random", q.states, q.alphabet, q.maps, q.start)


def local(rng: random.Random, sizes: Sizes) -> Semiautomaton:
    """Each letter resets to a random state or keeps the state (at least one reset)."""
    n, k = _draw(rng, sizes.states), _draw(rng, sizes.letters)
    maps = [tuple(range(n)) if rng.random() < 0.3 else (rng.randrange(n),) * n for _ in range(k)]
    if all(len(set(m)) == n for m in maps):
        maps[0] = (rng.randrange(n),) * n
    return _from_maps(maps)


def stack(rng: random.Random, sizes: Sizes) -> Semiautomaton:
    """A bounded Dyck stack ``dyck:depth,types`` (depth from ``states``, types from ``letters`` / 2)."""
    depth = max(1, min(_draw(rng, sizes.states), 4))
    types = max(1, min(_draw(rng, sizes.letters) // 2, 3))
    return build(f"dyck:{depth},{types}")


def gridworld(rng: random.Random, sizes: Sizes) -> Semiautomaton:
    """A 1-D gridworld (with a no-op letter half the time) or, for 4 letters and up, a 2-D one."""
    n = max(2, _draw(rng, sizes.states))
    if _draw(rng, sizes.letters) >= 4 and rng.random() < 0.5:
        return build(f"grid2d:{max(2, n // 2)},{max(2, (n + 1) // 2)}")
    return build(f"grid:{n},noop" if rng.random() < 0.5 else f"grid:{n}")


def product(rng: random.Random, sizes: Sizes) -> Semiautomaton:
    """The direct product of two automata of other classes over one alphabet (each factor's
    states from the low end of ``states``, so the product stays small)."""
    small = Sizes((sizes.states[0], max(sizes.states[0], min(sizes.states[1], 4))), sizes.letters)
    k = _draw(rng, small.letters)
    fixed = Sizes(small.states, (k, k))
    kinds = [group, aperiodic, local, solvable]
    x, y = (rng.choice(kinds)(rng, fixed) for _ in range(2))
    pairs = list(itertools.product(range(x.n_states), range(y.n_states)))
    index = {p: i for i, p in enumerate(pairs)}
    maps = [tuple(index[(x.maps[a][p], y.maps[a][q])] for p, q in pairs) for a in range(k)]
    return Semiautomaton("random", tuple(f"{p}.{q}" for p, q in pairs), x.alphabet, tuple(maps),
                         index[(x.start, y.start)])


def arbitrary(rng: random.Random, sizes: Sizes) -> Semiautomaton:
    """:func:`compiler.automata.catalog.random_automaton`: letters mixed from permutations, resets
    and arbitrary maps."""
    return random_automaton(rng, _draw(rng, sizes.states), _draw(rng, sizes.letters))


SUBREGULAR_MAX_K = 4
"""Largest factor / subsequence width (modulus, temporal depth) a subregular zoo family draws:
zoo models stay small (strictly 4-piecewise on 8 letters: about a hundred states)."""
SUBREGULAR = "subregular-"


def _subregular(cls: str) -> Callable[[random.Random, Sizes], Semiautomaton]:
    """The zoo generator of subregular class ``cls``: k from ``states`` (2 to
    :data:`SUBREGULAR_MAX_K`), the letters from ``letters``, a seed from ``rng``."""
    def generate(rng: random.Random, sizes: Sizes) -> Semiautomaton:
        k = max(2, min(_draw(rng, sizes.states), SUBREGULAR_MAX_K))
        return random_language(cls, k=k, letters=_draw(rng, sizes.letters), seed=rng.randrange(1 << 30))
    return generate


MEALY_TCP = "mealy-tcp"
"""The one fixed class: a protocol's machine, kept as written (not relabelled)."""

CLASSES: dict[str, Callable[[random.Random, Sizes], Semiautomaton]] = {
    **{f.__name__: f for f in (group, solvable, aperiodic, definite, local, stack, gridworld, product, arbitrary)},
    **{SUBREGULAR + c: _subregular(c) for c in SUBREGULAR_CLASSES},
    "mealy": lambda rng, sizes: random_mealy(rng, _draw(rng, sizes.states), _draw(rng, sizes.letters)),
    MEALY_TCP: lambda rng, sizes: tcp_server()}
"""The random classes, by their generator's name (``class = "..."`` in a zoo config)."""


def check_sizes(sizes: Sizes) -> None:
    """SpecError unless both ranges are ordered pairs within their limits."""
    for what, (lo, hi), top in (("states", sizes.states, MAX_STATES), ("letters", sizes.letters, MAX_LETTERS)):
        if not (type(lo) is int and type(hi) is int and 1 <= lo <= hi <= top):
            raise SpecError(f"{what} must be a range [low, high] with 1 <= low <= high <= {top}, got [{lo}, {hi}]")


def random_of_class(kind: str, rng: random.Random, sizes: Sizes, name: str) -> Semiautomaton:
    """An automaton of class ``kind`` (a key of :data:`CLASSES`) named ``name``, states relabelled."""
    if kind not in CLASSES:
        raise SpecError(f"unknown class {kind!r}; choose one of {list(CLASSES)}")
    check_sizes(sizes)
    a = CLASSES[kind](rng, sizes)
    if kind == MEALY_TCP:
        return Semiautomaton(name, a.states, a.alphabet, a.maps, a.start, a.outputs, a.undefined, a.transition_outputs)
    return relabel(a, rng, name, keep_start=kind.startswith(SUBREGULAR))

