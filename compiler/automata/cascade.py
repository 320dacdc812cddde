"""The cascade a decomposition produces: prime components wired feed-forward.

A :class:`Cascade` is what the Krohn–Rhodes construction compiles (one
attention layer per level).  Everything is an explicit
finite table, so a compiler never has to re-derive algebra:

* a **component** is a modular counter (``kind="counter"``, values 0..n-1, an
  input adds an integer mod n), a reset/memory unit (``kind="reset"``, values
  0..k-1, an input is ``None`` = keep or ``v`` = set to v), or -- only for a
  non-solvable group -- a whole group (``kind="group"``, values are indices into
  ``elements``, an input h moves g to g·h, "apply g then h").
* a component's input at step t is ``table[(values, letter)]``, where
  ``values`` are the **pre-update** values (at t-1) of the signals named in
  ``reads`` and ``letter`` is the letter's index in the automaton's alphabet.
  The tables list every key a reachable configuration can produce.
* a **signal** is a component's value or a **view**: a stateless lookup table
  of pre-update component values (and earlier views) -- here the tile a
  holonomy level stands for, ``tile = y·g`` from a reset unit y and its
  group's coordinates g.  Views keep lower tables small (they read one tile
  per holonomy level instead of every counter above); a compiler evaluates a
  view with an MLP lookup before the level that reads it.
* the **readout** maps signal values to the automaton's state index;
  ``encoding[q]`` are the component values standing for state q, and
  ``start`` the encoding of the start state (the initial values, e.g. what BOS
  carries in a Transformer).

Levels: a component's level is one more than the deepest component it depends
on (directly or through views), so components in one level depend only on
earlier levels and can be run in parallel.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Sequence

from .errors import ShortcutError, SpecError
from .semigroup import LetterNormalisation, SemigroupInfo
from .spec import Semiautomaton, check_name, unsafe_char
from .spec import from_dict as spec_from_dict

Perm = tuple[int, ...]
KINDS = ("counter", "reset", "group")


class CascadeError(ShortcutError):
    """A cascade was driven outside its verified domain (an internal error)."""


@dataclass
class Component:
    """One prime component of the cascade.

    Attributes:
        name: unique, e.g. ``"h2.b0.count1.0"`` (holonomy level 2, block 0, derived level 1, counter 0).
        kind: ``"counter"``, ``"reset"`` or ``"group"``.
        size: modulus of a counter, number of values of a reset unit, order of a group.
        reads: the signals (component or view names) whose pre-update values key ``table``.
        table: ``(values of reads, letter index) -> input``: counter -> increment (int mod size);
            reset -> None (keep) or int v (set to v); group -> index of the element multiplied on the right.
        initial: the value in the start state's encoding.
        holonomy_level: the holonomy level (1 = top) this component refines.
        role: one line saying what it stands for.
        elements: group components only: element i as a permutation (index 0 is the identity).
        level: the cascade level (filled in by :func:`assign_levels`).
        depends_on: the components it depends on, directly or through views.
    """

    name: str
    kind: str
    size: int
    reads: tuple[str, ...]
    table: dict[tuple[tuple[int, ...], int], int | None] = field(repr=False)
    initial: int = 0
    holonomy_level: int = 0
    role: str = ""
    elements: tuple[Perm, ...] | None = field(default=None, repr=False)
    level: int = 0
    depends_on: tuple[str, ...] = ()
    _mul: dict[tuple[int, int], int] | None = field(default=None, repr=False, compare=False)
    _index: dict[Perm, int] | None = field(default=None, repr=False, compare=False)

    def apply(self, value: int, action: int | None) -> int:
        """The new value after ``action``."""
        if self.kind == "reset":
            return value if action is None else action
        if action is None:
            raise CascadeError(f"{self.name}: a {self.kind} component's table gave no input")
        if self.kind == "counter":
            return (value + action) % self.size
        return self.multiply(value, action)

    def multiply(self, g: int, h: int) -> int:
        """Index of elements[g]·elements[h] ("apply g, then h"; group components)."""
        if self.elements is None:
            raise CascadeError(f"{self.name}: a {self.kind} component has no group elements to multiply")
        if self._mul is None or self._index is None:
            self._mul = {}
            self._index = {e: i for i, e in enumerate(self.elements)}
        key = (g, h)
        out = self._mul.get(key)
        if out is None:
            eg, eh = self.elements[g], self.elements[h]
            out = self._mul[key] = self._index[tuple(eh[x] for x in eg)]
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able and lossless: ``table`` as ``[values, letter, input]`` rows in table order."""
        return {"name": self.name, "kind": self.kind, "size": self.size, "reads": list(self.reads),
                "table": [[list(vals), letter, action] for (vals, letter), action in self.table.items()],
                "initial": self.initial, "holonomy_level": self.holonomy_level, "role": self.role,
                "elements": None if self.elements is None else [list(e) for e in self.elements],
                "level": self.level, "depends_on": list(self.depends_on)}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Component":
        """Inverse of :meth:`to_dict`."""
        return Component(d["name"], d["kind"], d["size"], tuple(d["reads"]),
                         {(tuple(vals), letter): action for vals, letter, action in d["table"]},
                         d["initial"], d["holonomy_level"], d["role"],
                         None if d["elements"] is None else tuple(tuple(e) for e in d["elements"]),
                         d["level"], tuple(d["depends_on"]))


@dataclass
class View:
    """A derived signal: ``table[values of reads] -> value`` (0..size-1), all pre-update."""

    name: str
    reads: tuple[str, ...]
    table: dict[tuple[int, ...], int] = field(repr=False)
    size: int
    holonomy_level: int = 0
    role: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "reads": list(self.reads), "table": _rows(self.table), "size": self.size,
                "holonomy_level": self.holonomy_level, "role": self.role}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "View":
        return View(d["name"], tuple(d["reads"]), _table(d["table"]), d["size"], d["holonomy_level"], d["role"])


@dataclass
class Readout:
    """``table[values of reads] -> state index`` of the automaton."""

    reads: tuple[str, ...]
    table: dict[tuple[int, ...], int] = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"reads": list(self.reads), "table": _rows(self.table)}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Readout":
        return Readout(tuple(d["reads"]), _table(d["table"]))


def _rows(table: dict[tuple[int, ...], int]) -> list[list[Any]]:
    """A values-keyed table as ``[values, value]`` rows (JSON has no tuple keys)."""
    return [[list(k), v] for k, v in table.items()]


def _table(rows: list[list[Any]]) -> dict[tuple[int, ...], int]:
    return {tuple(k): v for k, v in rows}


@dataclass
class HolonomyGroupInfo:
    """One subduction class of the holonomy decomposition (before refinement)."""

    holonomy_level: int
    representative: tuple[int, ...]
    members: int
    tiles: int
    order: int
    name: str
    solvable: bool
    derived_length: int | None


@dataclass
class Verification:
    """How the cascade was checked (``decompose`` never returns one with ``verified`` False).

    ``holonomy_checks``: (reachable coordinate tuple, letter) pairs of the
    holonomy cascade checked against delta; ``group_checks``: (element, input)
    pairs of counter coordinates; ``action_checks``: (holonomy input, local
    state) pairs of the group-then-reset refinement; ``level_checks``:
    (reachable upper prefix, letter, local state) triples of the final tables
    checked per level against the holonomy cascade -- all of them when
    ``final_tables_exhaustive`` (together an exhaustive proof over every
    reachable configuration, by induction on time); ``direct_configurations``: configurations of the
    final cascade checked directly by breadth-first search (``direct_complete``:
    all of them); ``random_steps``: steps of random words compared with the automaton;
    ``notes``: checks that were narrowed to stay within their budgets.
    """

    verified: bool = False
    round_trips: int = 0
    holonomy_checks: int = 0
    group_checks: int = 0
    action_checks: int = 0
    level_checks: int = 0
    final_tables_exhaustive: bool = False
    direct_configurations: int = 0
    direct_complete: bool = False
    random_steps: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass
class Cascade:
    """A verified cascade emulating ``automaton`` (see the module docstring).

    ``components`` are listed level by level; ``views`` in evaluation order.
    """

    automaton: Semiautomaton
    components: list[Component]
    views: list[View]
    readout: Readout
    encoding: tuple[tuple[int, ...], ...]
    semigroup: SemigroupInfo
    letters: LetterNormalisation
    holonomy_levels: int
    holonomy_groups: list[HolonomyGroupInfo]
    verification: Verification = field(default_factory=Verification)
    _plan: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    # -- structure ----------------------------------------------------------

    @property
    def start(self) -> tuple[int, ...]:
        """Component values of the start state (the initial values)."""
        return self.encoding[self.automaton.start]

    @property
    def levels(self) -> list[list[Component]]:
        """Components grouped by cascade level (level 1 first)."""
        n = max((c.level for c in self.components), default=0)
        out: list[list[Component]] = [[] for _ in range(n)]
        for c in self.components:
            out[c.level - 1].append(c)
        return out

    @property
    def solvable(self) -> bool:
        return all(g.solvable for g in self.holonomy_groups)

    @property
    def non_solvable_groups(self) -> list[str]:
        return sorted({g.name for g in self.holonomy_groups if not g.solvable})

    @property
    def counter_levels(self) -> int:
        """Number of levels that contain a counter."""
        return sum(1 for lvl in self.levels if any(c.kind == "counter" for c in lvl))

    def component(self, name: str) -> Component:
        return self.components[self._compiled()["index"][name]]

    # -- serialisation (the plan a krohn-rhodes checkpoint carries) -------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-able and lossless: :meth:`from_dict` gives back an equal cascade."""
        ln = self.letters
        return {
            "automaton": self.automaton.to_dict(),
            "components": [c.to_dict() for c in self.components],
            "views": [v.to_dict() for v in self.views],
            "readout": self.readout.to_dict(),
            "encoding": [list(e) for e in self.encoding],
            "semigroup": asdict(self.semigroup),
            "letters": {"maps": [list(m) for m in ln.maps], "map_of_letter": list(ln.map_of_letter),
                        "identity_letters": list(ln.identity_letters), "merged": [list(g) for g in ln.merged]},
            "holonomy_levels": self.holonomy_levels,
            "holonomy_groups": [{**asdict(g), "representative": list(g.representative)}
                                for g in self.holonomy_groups],
            "verification": asdict(self.verification),
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Cascade":
        """Inverse of :meth:`to_dict` (no decomposition is run)."""
        ln = d["letters"]
        letters = LetterNormalisation(tuple(tuple(m) for m in ln["maps"]), tuple(ln["map_of_letter"]),
                                      tuple(ln["identity_letters"]), tuple(tuple(g) for g in ln["merged"]))
        groups = [HolonomyGroupInfo(**{**g, "representative": tuple(g["representative"])})
                  for g in d["holonomy_groups"]]
        cascade = Cascade(spec_from_dict(d["automaton"]), [Component.from_dict(c) for c in d["components"]],
                          [View.from_dict(v) for v in d["views"]], Readout.from_dict(d["readout"]),
                          tuple(tuple(e) for e in d["encoding"]), SemigroupInfo(**d["semigroup"]), letters,
                          d["holonomy_levels"], groups,
                          Verification(**{**d["verification"], "notes": list(d["verification"]["notes"])}))
        cascade.check_signals()
        return cascade

    def check_signals(self) -> None:
        """A decoded cascade's signals are well formed (a cheap check before a report draws or
        names them): every component and view name a unique string :func:`check_name` accepts,
        and every ``reads`` one of them.  SpecError otherwise (a checkpoint's plan is data)."""
        names: set[str] = set()
        signals: list[Component | View] = [*self.components, *self.views]
        for x in signals:
            if not isinstance(x.name, str) or x.name in names:
                raise SpecError(f"the cascade names a signal {x.name!r:.60} twice or not as a string")
            names.add(check_name(x.name, "cascade signal"))
        for reader in [*signals, self.readout]:
            unknown = [r for r in reader.reads if r not in names]
            if unknown:
                raise SpecError(f"the cascade reads unknown signal(s) {unknown[:3]!r:.120}")

    def with_start(self, automaton: Semiautomaton) -> "Cascade":
        """The same cascade for ``automaton`` = this one's automaton with another start state
        (the decomposition does not depend on the start: only the initial values change)."""
        start = self.encoding[automaton.start]
        return replace(self, automaton=automaton,
                       components=[replace(c, initial=v) for c, v in zip(self.components, start)])

    # -- running --------------------------------------------------------------

    def _compiled(self) -> dict[str, Any]:
        cached = self._plan
        if cached is None:
            index = {c.name: i for i, c in enumerate(self.components)}
            slot = dict(index)
            for j, v in enumerate(self.views):
                slot[v.name] = len(self.components) + j
            cached = {
                "index": index,
                "views": [(tuple(slot[r] for r in v.reads), v.table, v.name) for v in self.views],
                "comps": [(tuple(slot[r] for r in c.reads), c.table, c) for c in self.components],
                "readout": tuple(slot[r] for r in self.readout.reads),
            }
            self._plan = cached
        return cached

    def signals(self, coords: Sequence[int]) -> list[int]:
        """Component values followed by view values."""
        plan = self._compiled()
        vals = list(coords)
        for reads, table, name in plan["views"]:
            key = tuple(vals[i] for i in reads)
            try:
                vals.append(table[key])
            except KeyError:
                raise CascadeError(f"view {name} has no entry for {key}: configuration outside the "
                                   f"verified domain") from None
        return vals

    def step(self, coords: Sequence[int], letter: int) -> tuple[int, ...]:
        """One letter: every component reads pre-update signals, then all update at once."""
        plan = self._compiled()
        vals = self.signals(coords)
        out = []
        for (reads, table, comp), v in zip(plan["comps"], coords):
            key = (tuple(vals[i] for i in reads), letter)
            try:
                action = table[key]
            except KeyError:
                raise CascadeError(f"component {comp.name} has no input for {key}: configuration "
                                   f"outside the verified domain") from None
            out.append(comp.apply(v, action))
        return tuple(out)

    def decode(self, coords: Sequence[int]) -> int:
        """The automaton state (index) a configuration stands for."""
        vals = self.signals(coords)
        key = tuple(vals[i] for i in self._compiled()["readout"])
        try:
            return self.readout.table[key]
        except KeyError:
            raise CascadeError(f"readout has no entry for {key}: configuration outside the verified "
                               f"domain") from None

    def encode(self, state: int | str) -> tuple[int, ...]:
        """Component values standing for a state (index or name)."""
        if isinstance(state, str):
            state = self.automaton.state_index[state]
        return self.encoding[state]

    def simulate(self, word: Sequence[int] | Sequence[str], start: int | str | None = None) -> list[int]:
        """State indices after each letter (like ``Semiautomaton.run``), computed by the cascade."""
        letters = (self.automaton.symbol_ids([str(a) for a in word]) if word and isinstance(word[0], str)
                   else [int(a) for a in word])
        coords = self.start if start is None else self.encode(start)
        out = []
        for a in letters:
            coords = self.step(coords, a)
            out.append(self.decode(coords))
        return out


def assign_levels(components: list[Component], views: list[View]) -> None:
    """Fill ``depends_on`` (through views) and ``level`` (1 + deepest dependency) in place."""
    comp_names = {c.name for c in components}
    view_deps: dict[str, set[str]] = {}
    for v in views:
        deps: set[str] = set()
        for r in v.reads:
            deps |= {r} if r in comp_names else view_deps[r]
        view_deps[v.name] = deps
    level: dict[str, int] = {}
    order = {x.name: i for i, x in enumerate(components)}
    for c in components:
        deps = set()
        for r in c.reads:
            deps |= {r} if r in comp_names else view_deps[r]
        c.depends_on = tuple(sorted(deps, key=order.__getitem__))
        missing = [d for d in c.depends_on if d not in level]
        if missing:
            raise CascadeError(f"component {c.name} reads {missing[0]}, which is not above it")
        c.level = 1 + max((level[d] for d in c.depends_on), default=0)
        level[c.name] = c.level
    components.sort(key=lambda c: c.level)


# ---------------------------------------------------------------------------
# Reports


def summary_json(cascade: Cascade) -> dict[str, Any]:
    """The decomposition as a JSON-able dict (``shortcut decompose --json``)."""
    a = cascade.automaton
    sg = cascade.semigroup
    levels = []
    for lvl in cascade.levels:
        levels.append([{
            "name": c.name,
            "kind": c.kind,
            "size": c.size,
            "reads": list(c.reads),
            "depends_on": list(c.depends_on),
            "initial": c.initial,
            "holonomy_level": c.holonomy_level,
            "role": c.role,
            "table_rows": len(c.table),
        } for c in lvl])
    ver = cascade.verification
    return {
        "automaton": a.name,
        "states": a.n_states,
        "letters": a.n_symbols,
        "semigroup_size": sg.size,
        "semigroup_size_exceeds": None if sg.size is not None else sg.budget,
        "is_group": sg.is_group,
        "is_permutation": sg.is_permutation,
        "identity_letters": [a.alphabet[i] for i in cascade.letters.identity_letters],
        "merged_letters": [[a.alphabet[i] for i in g] for g in cascade.letters.merged],
        "solvable": cascade.solvable,
        "counter_free": all(g.order == 1 for g in cascade.holonomy_groups),
        "non_solvable_groups": cascade.non_solvable_groups,
        "holonomy_levels": cascade.holonomy_levels,
        "holonomy_groups": [{
            "holonomy_level": g.holonomy_level,
            "representative": [a.states[q] for q in g.representative],
            "members": g.members,
            "tiles": g.tiles,
            "order": g.order,
            "name": g.name,
            "solvable": g.solvable,
            "derived_length": g.derived_length,
        } for g in cascade.holonomy_groups],
        "n_levels": len(levels),
        "counter_levels": cascade.counter_levels,
        "n_components": len(cascade.components),
        "levels": levels,
        "views": [{"name": v.name, "reads": list(v.reads), "size": v.size, "role": v.role,
                   "table_rows": len(v.table)} for v in cascade.views],
        "readout": {"reads": list(cascade.readout.reads), "table_rows": len(cascade.readout.table)},
        "start": list(cascade.start),
        "verified": ver.verified,
        "verification": {
            "round_trips": ver.round_trips,
            "holonomy_checks": ver.holonomy_checks,
            "group_checks": ver.group_checks,
            "action_checks": ver.action_checks,
            "level_checks": ver.level_checks,
            "final_tables_exhaustive": ver.final_tables_exhaustive,
            "direct_configurations": ver.direct_configurations,
            "direct_complete": ver.direct_complete,
            "random_steps": ver.random_steps,
            "notes": list(ver.notes),
        },
    }


def _kind_label(c: Component) -> str:
    if c.kind == "counter":
        return f"counter mod {c.size}"
    if c.kind == "reset":
        return f"reset ({c.size} values)"
    return f"group of order {c.size}"


def summary_text(cascade: Cascade) -> str:
    """A human-readable summary (``shortcut decompose`` without flags)."""
    s = summary_json(cascade)
    lines = [f"automaton {s['automaton']}: {s['states']} states, {s['letters']} letters"]
    size = s["semigroup_size"] if s["semigroup_size"] is not None else f"> {s['semigroup_size_exceeds']}"
    kind = "group" if s["is_group"] else "semigroup"
    lines.append(f"transformation {kind} of size {size}"
                 + (" (every letter a permutation)" if s["is_permutation"] else ""))
    if s["identity_letters"]:
        lines.append(f"identity letters: {' '.join(s['identity_letters'])}")
    for g in s["merged_letters"]:
        lines.append(f"letters with the same map: {' '.join(g)}")
    if s["solvable"]:
        verdict = "counter-free (resets only)" if s["counter_free"] else "solvable"
    else:
        verdict = "NOT solvable: contains " + ", ".join(s["non_solvable_groups"])
    lines.append(f"{verdict}; {s['holonomy_levels']} holonomy level(s)")
    for g in s["holonomy_groups"]:
        if g["order"] > 1:
            dl = f", derived length {g['derived_length']}" if g["solvable"] else ""
            lines.append(f"  holonomy level {g['holonomy_level']}: {g['name']} (order {g['order']}{dl}) "
                         f"on {g['tiles']} tiles")
    lines.append(f"cascade: {s['n_levels']} level(s), {s['n_components']} component(s), "
                 f"{s['counter_levels']} with counters")
    for i, lvl in enumerate(cascade.levels, 1):
        parts = []
        for c in lvl:
            parts.append(f"{c.name} [{_kind_label(c)}]" + (f" <- {', '.join(c.depends_on)}" if c.depends_on
                                                           else " <- letter"))
        lines.append(f"  level {i}: " + "; ".join(parts))
    v = s["verification"]
    how = (f"{v['holonomy_checks']} holonomy checks, {v['level_checks']} level checks, "
           f"{v['direct_configurations']} configurations checked directly"
           + (" (all)" if v["direct_complete"] else "") + f", {v['random_steps']} random steps")
    lines.append(("verified: " if s["verified"] else "NOT verified: ") + how)
    return "\n".join(lines)


def dot_quote(*lines: str) -> str:
    """A DOT double-quoted string (an ID or a label) that shows ``lines`` as text, one per line.

    Names are data, never DOT: ``&``, ``"`` and ``\\`` become character entities (``\\`` doubled, so
    that Graphviz's escapes such as ``\\N`` or ``\\l`` never fire), so no name can close the string
    and add an attribute (a ``URL="javascript:..."``); characters :func:`unsafe_char` names become
    U+FFFD.  No backslash but the line breaks this function writes reaches the DOT text (a
    backslash before the closing quote would escape it).  Every ID and label :func:`to_dot`
    writes goes through here."""
    def text(line: str) -> str:
        safe = "".join("\ufffd" if unsafe_char(c) else c for c in str(line))
        return safe.replace("&", "&amp;").replace('"', "&#34;").replace("\\", "&#92;&#92;")

    return '"' + "\\n".join(text(line) for line in lines) + '"'


def to_dot(cascade: Cascade) -> str:
    """The cascade as a Graphviz DOT graph: one cluster per level, an edge per dependency (every
    name quoted by :func:`dot_quote`)."""
    q = dot_quote

    def node(name: str) -> str:  # a signal's node ID: never "letter" or "readout", whatever its name
        return q(f"signal {name}")

    lines = ["digraph cascade {", "  rankdir=TB;", "  node [shape=box, fontname=Helvetica];",
             f"  label={q(cascade.automaton.name + ': cascade')};", f"  letter [shape=plaintext, label={q('letter')}];"]
    for i, lvl in enumerate(cascade.levels, 1):
        lines.append(f"  subgraph cluster_{i} {{")
        lines.append(f"    label={q(f'level {i}')};")
        for c in lvl:
            lines.append(f"    {node(c.name)} [label={q(c.name, _kind_label(c))}];")
        lines.append("  }")
    for v in cascade.views:
        lines.append(f"  {node(v.name)} [shape=ellipse, label={q(v.name, f'view ({v.size} values)')}];")
        for r in v.reads:
            lines.append(f"  {node(r)} -> {node(v.name)} [style=dashed];")
    for c in cascade.components:
        lines.append(f"  letter -> {node(c.name)} [color=gray];")
        for r in c.reads:
            lines.append(f"  {node(r)} -> {node(c.name)};")
    lines.append(f"  readout [shape=doublecircle, label={q('state')}];")
    for r in cascade.readout.reads:
        lines.append(f"  {node(r)} -> readout;")
    lines.append("}")
    return "\n".join(lines) + "\n"
