"""Recognise bounded-stack automata up to renaming of states and symbols.

A *bounded-stack automaton* with depth bound D >= 1 and k >= 1 stack symbols has as
states the stacks over {0..k-1} of depth <= D (bottom to top) and one absorbing error
sink; each letter pushes a symbol b (to the sink when the stack is full), pops a
symbol a (to the sink when the stack is empty or its top is not a), or does nothing.
``dyck:D,k`` is the case with one push and one pop letter per bracket type.

Recognition is structural and complete, and sound by a final check:

1. the sink is the unique state every letter fixes (besides stacks, which no
   push or pop letter fixes);
2. a letter fixing every state is a no-op;
3. for a candidate empty stack r (the start state first, then every other non-sink
   state): letters sending r to the sink are pops, the others pushes; each push
   letter gets its own symbol, and each pop letter the symbol of the push it undoes
   at r (delta(delta(r, push b), pop) = r);
4. the stacks are named by walking the push letters from r (breadth first); they must
   be every non-sink state exactly once, with depths 0..D, they must be *every* stack
   over the k symbols of depth <= D (1 + k + ... + k^D of them), and every transition of
   every letter is checked against the push/pop semantics above (a step to a stack the
   walk never created is a refusal, never an error: detection refuses, it does not raise).

A partial automaton under the promise of legal inputs (compiler/automata/promise.py) is a
*legal* bounded stack when its sink completion is a bounded stack whose sink is the added
state: its states are the stacks alone, and overflow, underflow and mismatches are undefined
(the paper's Dyck_{n,k}).  Its plan has no sink (``stacks`` holds no None).

Step 4 makes the answer sound.  For a genuine bounded-stack automaton the empty
stack is among the candidates, and from it steps 3-4 recover the push/pop roles and
the stacks up to renaming the symbols, so it is also complete.  (Some automata have
two readings, e.g. depth-1 Dyck with one bracket type read from either end; the one
rooted at the start state wins.)
"""

from __future__ import annotations

from dataclasses import dataclass

from .promise import add_sink
from .spec import Semiautomaton

PUSH, POP, NOOP = "push", "pop", "noop"


@dataclass(frozen=True)
class BoundedStack:
    """An automaton recognised as a bounded stack.

    ``depth`` is the bound D, ``symbols`` the number k of stack symbols;
    ``stacks[q]`` is state q's stack (bottom to top) or None for the sink;
    ``letters[s]`` is ``(kind, symbol)`` with kind push/pop/noop (symbol -1 for a no-op).
    A *legal* stack (:attr:`legal`) has no sink: its errors are undefined, promised never to occur.
    """

    depth: int
    symbols: int
    stacks: tuple[tuple[int, ...] | None, ...]
    letters: tuple[tuple[str, int], ...]

    @property
    def sink(self) -> int:
        return self.stacks.index(None)

    @property
    def legal(self) -> bool:
        """No error sink: the automaton is partial and its inputs are promised legal."""
        return None not in self.stacks

    def step(self, stack: tuple[int, ...] | None, letter: int) -> tuple[int, ...] | None:
        """The reference semantics: one letter on a stack (None: the sink)."""
        kind, b = self.letters[letter]
        if stack is None or kind == NOOP:
            return stack
        if kind == PUSH:
            return stack + (b,) if len(stack) < self.depth else None
        return stack[:-1] if stack and stack[-1] == b else None

    def describe(self, automaton: Semiautomaton) -> str:
        """One line: depth, symbols and what each letter does."""
        parts = [f"{sym}: {kind}" + ("" if kind == NOOP else f" {b}")
                 for sym, (kind, b) in zip(automaton.alphabet, self.letters)]
        errors = "on legal inputs only (no error state)" if self.legal else "with an error sink"
        return (f"bounded stack of depth <= {self.depth} over {self.symbols} symbol{'s' * (self.symbols > 1)} "
                f"{errors} ({', '.join(parts)})")

    def to_dict(self) -> dict:
        return {"depth": self.depth, "symbols": self.symbols,
                "stacks": [None if s is None else list(s) for s in self.stacks],
                "letters": [[kind, b] for kind, b in self.letters]}

    @staticmethod
    def from_dict(d: dict) -> BoundedStack:
        return BoundedStack(int(d["depth"]), int(d["symbols"]),
                            tuple(None if s is None else tuple(int(x) for x in s) for s in d["stacks"]),
                            tuple((str(kind), int(b)) for kind, b in d["letters"]))


def _rooted(automaton: Semiautomaton, sink: int, root: int, noops: set[int]) -> tuple[BoundedStack | None, str]:
    """Steps 3-4 from the candidate empty stack ``root``."""
    maps = automaton.maps
    moving = [s for s in range(automaton.n_symbols) if s not in noops]
    pushes = [s for s in moving if maps[s][root] != sink]
    pops = [s for s in moving if maps[s][root] == sink]
    if not pushes:
        return None, "no letter leaves the empty stack"
    letters: list[tuple[str, int]] = [(NOOP, -1)] * automaton.n_symbols
    for b, s in enumerate(pushes):
        letters[s] = (PUSH, b)
    for s in pops:
        undone = [b for b, p in enumerate(pushes) if maps[s][maps[p][root]] == root]
        if len(undone) != 1:
            return None, f"letter {automaton.alphabet[s]!r} undoes {len(undone)} pushes, not one"
        letters[s] = (POP, undone[0])
    stacks: list[tuple[int, ...] | None] = [None] * automaton.n_states
    stacks[root] = ()
    frontier, depth = [root], 0
    while frontier:
        nxt = []
        for q in frontier:
            for b, s in enumerate(pushes):
                r = maps[s][q]
                if r == sink:
                    continue
                if stacks[r] is not None or r == root:
                    return None, f"state {automaton.states[r]!r} is reached by two different pushes"
                stacks[r] = (stacks[q] or ()) + (b,)  # q is in the frontier: its stack is set
                nxt.append(r)
        if nxt:
            depth += 1
        frontier = nxt
    if any(stacks[q] is None for q in range(automaton.n_states) if q != sink):
        return None, "some states are not stacks reachable by pushes"
    full = sum(len(pushes) ** i for i in range(depth + 1))
    if automaton.n_states - 1 != full:
        return None, (f"the pushes reach {automaton.n_states - 1} stacks, not all {full} stacks of depth <= {depth} "
                      f"over {len(pushes)} symbols")
    plan = BoundedStack(depth, len(pushes), tuple(stacks), tuple(letters))
    index = {s: q for q, s in enumerate(plan.stacks)}
    for s in range(automaton.n_symbols):
        for q in range(automaton.n_states):
            if index.get(plan.step(plan.stacks[q], s), -1) != maps[s][q]:
                return None, (f"letter {automaton.alphabet[s]!r} from state {automaton.states[q]!r} does not "
                              f"push or pop as the recovered stacks say")
    return plan, ""


def detect(automaton: Semiautomaton) -> tuple[BoundedStack | None, str]:
    """``(plan, "")`` if ``automaton`` is a bounded stack up to renaming, else ``(None, reason)``."""
    n = automaton.n_states
    fixed = [q for q in range(n) if all(f[q] == q for f in automaton.maps)]
    noops = {s for s, f in enumerate(automaton.maps) if all(f[q] == q for q in range(n))}
    if len(noops) == automaton.n_symbols:
        return None, "every symbol is a no-op"
    if len(fixed) != 1:
        return None, f"it has {len(fixed)} states every letter fixes, not one error sink"
    sink = fixed[0]
    candidates = ([automaton.start] if automaton.start != sink else []) + \
        [q for q in range(n) if q not in (sink, automaton.start)]
    reason = "it has no state besides the sink"
    for root in candidates:
        plan, why = _rooted(automaton, sink, root, noops)
        if plan is not None:
            return plan, ""
        if root == candidates[0]:
            reason = f"from {automaton.states[root]!r} as the empty stack: {why}"
    return None, reason


def detect_legal(automaton: Semiautomaton) -> tuple[BoundedStack | None, str]:
    """``(plan, "")`` if the partial ``automaton`` is a legal bounded stack up to renaming (its sink
    completion is a bounded stack whose sink is the added state), else ``(None, reason)``."""
    if not automaton.partial:
        return None, "it is complete (a legal stack leaves its errors undefined)"
    completed = add_sink(automaton)
    plan, reason = detect(completed)
    if plan is None:
        return None, f"its completion with a sink is not a bounded stack: {reason}"
    if plan.sink != automaton.n_states:
        return None, "its completion's error sink is not the added state"
    return BoundedStack(plan.depth, plan.symbols, plan.stacks[:-1], plan.letters), ""


def detect_any(automaton: Semiautomaton) -> tuple[BoundedStack | None, str]:
    """:func:`detect_legal` for a partial automaton, :func:`detect` for a complete one."""
    return detect_legal(automaton) if automaton.partial else detect(automaton)


def bounded_stack(automaton: Semiautomaton) -> BoundedStack | None:
    """The recognised stack, or None."""
    return detect(automaton)[0]
