"""Mealy machines for the model zoo: random ones (class ``mealy``) and a protocol (``mealy-tcp``).

* :func:`random_mealy`: a complete Mealy machine, every transition's target and output uniform
  (states and inputs from the zoo's ranges; 2 to :data:`MAX_OUTPUTS` outputs, at most one per state);
* :func:`tcp_server`: the TCP-like server of ``examples/tcp_server.dot`` (written by the shortcut
  team from the server side of RFC 793's connection state diagram, section 3.2, figure 6,
  simplified: no sequence numbers, no simultaneous open or close, no TIME-WAIT), the same machine
  (a test reads the example and compares).

Both are :class:`.spec.Semiautomaton` with ``transition_outputs``; the zoo compiles their outputs
(the label readout of :mod:`.mealy`).
"""

from __future__ import annotations

import random

from .spec import Semiautomaton

MAX_OUTPUTS = 8
"""Most distinct outputs a random zoo Mealy machine draws (protocol models have a few dozen at most;
a zoo model stays readable)."""

TCP_SERVER = {
    "LISTEN": "SYN_RCVD/SYN+ACK LISTEN/RST LISTEN/RST LISTEN/NIL LISTEN/RST CLOSED/NIL",
    "SYN_RCVD": "SYN_RCVD/SYN+ACK ESTABLISHED/NIL LISTEN/RST LISTEN/NIL LISTEN/RST FIN_WAIT/FIN",
    "ESTABLISHED": "ESTABLISHED/ACK ESTABLISHED/NIL CLOSE_WAIT/ACK LISTEN/NIL ESTABLISHED/ACK FIN_WAIT/FIN",
    "CLOSE_WAIT": "CLOSE_WAIT/ACK CLOSE_WAIT/NIL CLOSE_WAIT/ACK LISTEN/NIL CLOSE_WAIT/NIL LAST_ACK/FIN",
    "LAST_ACK": "LAST_ACK/NIL CLOSED/NIL LAST_ACK/ACK CLOSED/NIL LAST_ACK/NIL LAST_ACK/NIL",
    "FIN_WAIT": "FIN_WAIT/RST FIN_WAIT/NIL CLOSED/ACK CLOSED/NIL FIN_WAIT/ACK FIN_WAIT/NIL",
    "CLOSED": "CLOSED/RST CLOSED/RST CLOSED/RST CLOSED/NIL CLOSED/RST CLOSED/NIL",
}
"""The TCP-like server: per state (LISTEN the start), ``target/output`` on each input in
:data:`TCP_INPUTS` order."""
TCP_INPUTS = ("SYN", "ACK", "FIN", "RST", "DATA", "CLOSE")
"""Segments from the client (SYN, ACK, FIN, RST, DATA) and the application's CLOSE."""


def _machine(name: str, states: tuple[str, ...], alphabet: tuple[str, ...], targets: list[list[int]],
             outputs: list[list[str]], start: int = 0) -> Semiautomaton:
    """A complete Mealy machine from per-state rows of targets and outputs (``[state][input]``)."""
    maps = tuple(tuple(targets[q][x] for q in range(len(states))) for x in range(len(alphabet)))
    said = tuple(tuple(outputs[q][x] for q in range(len(states))) for x in range(len(alphabet)))
    return Semiautomaton(name, states, alphabet, maps, start, None, (), said)


def tcp_server() -> Semiautomaton:
    """The TCP-like server (module docstring)."""
    states = tuple(TCP_SERVER)
    rows = [[edge.split("/", 1) for edge in TCP_SERVER[q].split()] for q in states]
    return _machine("tcp_server", states, TCP_INPUTS, [[states.index(t) for t, _ in row] for row in rows],
                    [[o for _, o in row] for row in rows])


def random_mealy(rng: random.Random, n: int, k: int) -> Semiautomaton:
    """A complete Mealy machine on n states and k inputs, targets and outputs uniform, with 2 to
    min(:data:`MAX_OUTPUTS`, n) outputs (start ``s0``)."""
    o = rng.randint(2, max(2, min(MAX_OUTPUTS, n)))
    targets = [[rng.randrange(n) for _ in range(k)] for _ in range(n)]
    outputs = [[f"o{rng.randrange(o)}" for _ in range(k)] for _ in range(n)]
    return _machine("mealy", tuple(f"s{i}" for i in range(n)), tuple(f"i{j}" for j in range(k)), targets, outputs)
