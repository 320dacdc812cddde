"""Recognise line and box worlds up to renaming of states and symbols (Theorem 12 applies to them).

A *box world* has states ``[0, n_1) x ... x [0, n_d)`` (every n_i >= 2) and symbols
that each either move one coordinate by +1 or -1, clamped at the walls, or do
nothing.  ``grid:n`` and ``grid:n,noop`` are line worlds (d = 1), ``grid2d:w,h``
a box world with d = 2.  The gridworld construction (Theorem 12) applies to any
automaton isomorphic to one, whatever the state and symbol names or their order.

Recognition is structural and complete:

1. a symbol whose map is the identity is a no-op;
2. every other symbol must look like a clamped move: its functional graph splits Q
   into disjoint paths ``s -> f(s) -> ... -> e`` of one common length L >= 2, each
   starting at a state outside f's image and ending at a fixed point of f;
3. symbols with the same set of paths move along the same axis (the paths are the
   lines of that axis; the lines of different axes meet in at most one state),
   and the position of a state on its path is its coordinate on that axis;
4. the coordinates must be a bijection onto the box, and every transition of every
   symbol is checked against the clamped move it is taken to be.

Step 4 makes the answer sound; steps 2-3 recover the coordinates of any genuine box
world (up to reflecting an axis), so it is also complete.
"""

from __future__ import annotations

from dataclasses import dataclass

from .spec import Semiautomaton


@dataclass(frozen=True)
class BoxWorld:
    """An automaton recognised as a box world.

    ``sizes[a]`` is the number of cells on axis a; ``coords[q]`` the coordinates of
    state q; ``moves[s]`` is ``(axis, +1 or -1)`` for a move symbol and ``None`` for
    a no-op.  ``delta(q, s)`` is ``coords^-1(clamp(coords[q] + move))``.
    """

    sizes: tuple[int, ...]
    coords: tuple[tuple[int, ...], ...]
    moves: tuple[tuple[int, int] | None, ...]

    @property
    def n_axes(self) -> int:
        return len(self.sizes)

    def describe(self, automaton: Semiautomaton) -> str:
        """One line: shape and what each symbol does."""
        shape = f"line world with {self.sizes[0]} cells" if self.n_axes == 1 else \
            "box world " + " x ".join(map(str, self.sizes))
        parts = []
        for sym, mv in zip(automaton.alphabet, self.moves):
            if mv is None:
                parts.append(f"{sym}: no-op")
            else:
                axis, step = mv
                parts.append(f"{sym}: {'+' if step > 0 else '-'}1" + (f" on axis {axis}" if self.n_axes > 1 else ""))
        return f"{shape} ({', '.join(parts)})"

    def to_dict(self) -> dict:
        return {"sizes": list(self.sizes), "coords": [list(c) for c in self.coords],
                "moves": [None if m is None else list(m) for m in self.moves]}

    @staticmethod
    def from_dict(d: dict) -> "BoxWorld":
        return BoxWorld(tuple(d["sizes"]), tuple(tuple(c) for c in d["coords"]),
                        tuple(None if m is None else (int(m[0]), int(m[1])) for m in d["moves"]))


def _paths(f: tuple[int, ...]) -> list[list[int]] | None:
    """The paths of a clamped move's functional graph, or None if f is not one."""
    n = len(f)
    image = set(f)
    starts = [q for q in range(n) if q not in image]
    if not starts:
        return None  # a permutation (or has a cycle through every state): not a clamped move
    paths, seen = [], set()
    for s in starts:
        path = [s]
        while f[path[-1]] != path[-1]:
            path.append(f[path[-1]])
            if len(path) > n:
                return None  # a cycle
        paths.append(path)
        seen.update(path)
    if len(seen) != n or sum(len(p) for p in paths) != n:
        return None  # paths overlap (a merge) or miss a state (a cycle elsewhere)
    if len({len(p) for p in paths}) != 1 or len(paths[0]) < 2:
        return None
    return paths


def detect(automaton: Semiautomaton) -> tuple[BoxWorld | None, str]:
    """``(world, "")`` if ``automaton`` is a line or box world up to renaming, else ``(None, reason)``."""
    n = automaton.n_states
    if n < 2:
        return None, "it has a single state"
    identity = tuple(range(n))
    axes: dict[frozenset, list[int]] = {}  # line partition -> symbols moving along it
    lines_of: dict[frozenset, list[list[int]]] = {}
    for s, f in enumerate(automaton.maps):
        if tuple(f) == identity:
            continue
        paths = _paths(tuple(f))
        if paths is None:
            return None, f"symbol {automaton.alphabet[s]!r} is not a move clamped at a wall"
        key = frozenset(frozenset(p) for p in paths)
        axes.setdefault(key, []).append(s)
        lines_of.setdefault(key, paths)
    if not axes:
        return None, "every symbol is a no-op"
    keys = sorted(axes, key=lambda k: axes[k][0])  # axis order: first symbol in the alphabet
    sizes = tuple(len(next(iter(k))) for k in keys)
    total = 1
    for L in sizes:
        total *= L
    if total != n:
        return None, f"its moves have line lengths {list(sizes)}, whose product is not {n} states"
    # coordinates: position along the first symbol's paths; reflect so state 0 sits in the lower half
    coords = [[0] * len(keys) for _ in range(n)]
    direction = []
    for a, k in enumerate(keys):
        for path in lines_of[k]:
            for i, q in enumerate(path):
                coords[q][a] = i
        flip = coords[0][a] > sizes[a] - 1 - coords[0][a]
        if flip:
            for q in range(n):
                coords[q][a] = sizes[a] - 1 - coords[q][a]
        direction.append(-1 if flip else 1)
    index = {tuple(c): q for q, c in enumerate(coords)}
    if len(index) != n:
        return None, "its move axes do not give every state distinct coordinates"
    moves: list[tuple[int, int] | None] = []
    for s, f in enumerate(automaton.maps):
        if tuple(f) == identity:
            moves.append(None)
            continue
        a = next(i for i, k in enumerate(keys) if s in axes[k])
        ref = automaton.maps[axes[keys[a]][0]]
        moves.append((a, direction[a] if tuple(f) == tuple(ref) else -direction[a]))
    world = BoxWorld(sizes, tuple(tuple(c) for c in coords), tuple(moves))
    for s, mv in enumerate(world.moves):
        for q in range(n):
            c = list(world.coords[q])
            if mv is not None:
                a, step = mv
                c[a] = min(max(c[a] + step, 0), sizes[a] - 1)
            if index[tuple(c)] != automaton.maps[s][q]:
                return None, (f"symbol {automaton.alphabet[s]!r} from state {automaton.states[q]!r} does not "
                              f"follow the clamped move on the recovered coordinates")
    return world, ""


def box_world(automaton: Semiautomaton) -> BoxWorld | None:
    """The recognised world, or None."""
    return detect(automaton)[0]

