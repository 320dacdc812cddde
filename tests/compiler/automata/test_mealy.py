"""Mealy machines: the JSON key, the DOT forms, AALpy objects, minimisation by outputs and the
Moore machine over transitions (compiler/automata/mealy.py, mealy_dot.py)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from compiler.automata.errors import SpecError
from compiler.automata.formats import dot_to_dict
from compiler.automata.load import load_spec
from compiler.automata.mealy import (mealy_moore, mealy_outputs, minimise_mealy, moore_disagreement, output_ids,
                                     transitions_moore)
from compiler.automata.spec import from_dict
from compiler.automata.transitions import transition_plan


def random_mealy(n: int, k: int, o: int, seed: int, partial: bool = False) -> dict:
    """A random Mealy spec: n states, k inputs, o outputs (some transitions left out when ``partial``)."""
    r = random.Random(seed)
    S, A, O = [f"s{i}" for i in range(n)], [f"i{j}" for j in range(k)], [f"o{j}" for j in range(o)]
    keep = {(q, a) for q in S for a in A if not partial or (q, a) == (S[0], A[0]) or r.random() < 0.8}
    spec = {"name": f"mealy{n}.{k}.{o}", "states": S, "alphabet": A,
            "transitions": {q: {a: r.choice(S) for a in A if (q, a) in keep} for q in S},
            "transition_outputs": {q: {a: r.choice(O) for a in A if (q, a) in keep} for q in S}}
    return {**spec, "promise": "legal"} if partial else spec


TCP_LIKE = {"name": "tcp", "states": ["listen", "rcvd", "est"], "alphabet": ["SYN", "ACK"],
            "transitions": {"listen": {"SYN": "rcvd", "ACK": "listen"}, "rcvd": {"SYN": "rcvd", "ACK": "est"},
                            "est": {"SYN": "est", "ACK": "est"}},
            "transition_outputs": {"listen": {"SYN": "SYN+ACK", "ACK": "RST"}, "rcvd": {"SYN": "SYN+ACK", "ACK": "NIL"},
                                   "est": {"SYN": "ACK", "ACK": "NIL"}}}


def test_the_json_key_round_trips_and_outputs_are_the_transitions():
    a = from_dict(TCP_LIKE)
    assert a.outputs is None and a.transition_outputs is not None
    assert from_dict(a.to_dict()) == a
    assert mealy_outputs(a, a.symbol_ids(["ACK", "SYN", "SYN", "ACK", "SYN"])) == ["RST", "SYN+ACK", "SYN+ACK", "NIL",
                                                                                   "ACK"]


@pytest.mark.parametrize("change, message", [
    (lambda s: s["transition_outputs"]["est"].pop("ACK"), "has no output"),
    (lambda s: s["transition_outputs"]["est"].update(FIN="x"), "does not give"),
    (lambda s: s.update(outputs={"listen": "a", "rcvd": "b", "est": "c"}), "use one"),
    (lambda s: s["transition_outputs"].update(nowhere={}), "unknown state"),
    (lambda s: s["transition_outputs"]["est"].update(SYN=1.5), "must be a string"),
])
def test_bad_transition_outputs_are_refused(change, message):
    spec = {**TCP_LIKE, "transition_outputs": {q: dict(r) for q, r in TCP_LIKE["transition_outputs"].items()}}
    change(spec)
    with pytest.raises(SpecError, match=message):
        from_dict(spec)


@pytest.mark.parametrize("seed", range(6))
def test_the_moore_machine_over_transitions_says_what_the_mealy_machine_says(seed):
    """On every input (a product walk) and on random words, for complete and partial machines."""
    spec = random_mealy(3 + seed, 2 + seed % 3, 2 + seed, seed, partial=seed % 2 == 1)
    a = from_dict(spec)
    mm = mealy_moore(a)
    assert moore_disagreement(a.to_dict(), mm.moore) is None
    assert mm.states_after <= mm.reachable <= a.n_states
    rng = np.random.default_rng(seed)
    for _ in range(20):
        word, q = [], a.start
        for _ in range(12):  # legal words only
            ok = [x for x in range(a.n_symbols) if a.defined[x][q]]
            word.append(int(rng.choice(ok)))
            q = a.maps[word[-1]][q]
        said = mealy_outputs(a, word)
        assert [mm.moore.outputs[s] for s in mm.moore.run(word)] == said
        index = {x: i for i, x in enumerate(sorted(set(said)))}
        assert output_ids(a, np.array([word]), index)[0].tolist() == [index[x] for x in said]


def test_a_wrong_moore_machine_is_caught_by_the_product_walk():
    a = from_dict(TCP_LIKE)
    m = transitions_moore(a)
    wrong = m.__class__(**{**m.__dict__, "outputs": tuple("NIL" if x == "ACK" else x for x in m.outputs)})
    assert "outputs 'ACK'" in moore_disagreement(a.to_dict(), wrong)


def test_minimising_by_outputs_merges_states_that_say_the_same():
    spec = {"states": ["a", "b", "c"], "alphabet": ["x"], "transitions": {"a": {"x": "b"}, "b": {"x": "c"},
                                                                          "c": {"x": "b"}},
            "transition_outputs": {"a": {"x": "1"}, "b": {"x": "1"}, "c": {"x": "1"}}}
    small, reachable = minimise_mealy(from_dict(spec))
    assert (small.n_states, reachable) == (1, 3)


def test_the_one_step_quotient_of_the_moore_machine_over_transitions_is_the_mealy_machine():
    a = from_dict(random_mealy(6, 3, 4, 1))
    small, _ = minimise_mealy(a)
    plan = transition_plan(transitions_moore(small))
    assert plan is not None and plan.quotient.n_states == small.n_states


QUOTED = 'digraph g { s0 [label="s0"]; s1; s0 -> s1 [label="a/x"]; s0 -> s0 [label="b/y"]; ' \
         's1 -> s0 [label="a / z"]; s1 -> s1 [label="b/z/w"]; __start0 [label="", shape=none]; __start0 -> s0; }'
HTML = 'digraph g { s0 [shape="circle" label="0"]; s1 [shape="circle" label="1"]; ' \
       's0 -> s1 [label=<a<br />x>]; s0 -> s0 [label=<b<br />y>]; s1 -> s0 [label=<a<br />z>]; ' \
       's1 -> s1 [label=<b<br />z/w>]; __start0 [label="" shape="none"]; __start0 -> s0; }'
MERGED = 'digraph g { s1 -> s0 [label=<a<br />z>]; s0 -> s1 [label="a/x"]; s0 -> s0 [label="b/y"]; ' \
         's1 -> s1 [label=<b<br />z/w>]; __start0 -> s0; }'
NO_MARKER = 'digraph g { s0 -> s1 [label="a/x"]; s0 -> s0 [label="b/y"]; s1 -> s0 [label=<a<br />z>]; ' \
            's1 -> s1 [label="b/z/w"]; }'


@pytest.mark.parametrize("text", [QUOTED, HTML, MERGED, NO_MARKER])
def test_the_three_label_forms_and_the_start(text):
    pytest.importorskip("pydot")
    a = from_dict(dot_to_dict(text))
    assert a.states[a.start] == "s0" and set(a.alphabet) == {"a", "b"}
    assert mealy_outputs(a, a.symbol_ids(["b", "a", "b", "a"])) == ["y", "x", "z/w", "z"]


def test_merged_inputs_share_an_edge():
    pytest.importorskip("pydot")
    a = from_dict(dot_to_dict('digraph g { s0 -> s1 [label=<a | b<br />x &amp; y>]; s1 -> s0 [label="a | b/z"]; }'))
    assert mealy_outputs(a, a.symbol_ids(["b", "a", "a"])) == ["x & y", "z", "x & y"]


@pytest.mark.parametrize("text, message", [
    ('digraph g { s0 -> s1 [label="a/x"]; s1 -> s0 [label="a"]; }', "edge s1 -> s0 .*no '/'"),
    ('digraph g { s0 -> s1 [label="a/x"]; s0 -> s1 [label="a/y"]; }', "edge s0 -> s1 .*two outputs for state 's0'"),
    ('digraph g { s0 -> s1 [label="a/x"]; s0 -> s0 [label="a/x"]; }', "edge s0 -> s0 .*two targets"),
    ('digraph g { __start0; s0 -> s1 [label="a/x"]; }', "start marker __start0 has no edge"),
    ('digraph g { __start0 -> s0; __start1 -> s1; s0 -> s1 [label="a/x"]; }', "one start state"),
    ('digraph g { s0 -> s1 [label="a/"]; }', "edge s0 -> s1 .*empty output"),
    ('digraph g { s0 -> s1 [label="a | /x"]; }', "empty input"),
    ('digraph g { s0 -> __start0 [label="a/x"]; }', "into the start marker"),
])
def test_malformed_mealy_dot_names_the_edge(text, message):
    pytest.importorskip("pydot")
    with pytest.raises(SpecError, match=message):
        dot_to_dict(text)


def test_aalpy_mealy_objects_and_their_dot_files(tmp_path):
    pytest.importorskip("pydot")
    utils = pytest.importorskip("aalpy.utils")
    for seed in range(3):
        random.seed(seed)
        m = utils.generate_random_mealy_machine(5, ["a", "b", "c"], ["x", "y", "z"])
        utils.save_automaton_to_file(m, str(tmp_path / f"m{seed}"), file_type="dot")
        for a in (load_spec(m), load_spec(tmp_path / f"m{seed}.dot")):
            rng = random.Random(seed)
            for _ in range(10):
                word = [rng.choice("abc") for _ in range(8)]
                m.reset_to_initial()
                assert mealy_outputs(a, a.symbol_ids(word)) == [m.step(x) for x in word]


def _as_dot(spec: dict, form: str) -> str:
    """``spec`` written as a Mealy DOT file: ``quoted`` "in/out" labels (the Automata Wiki's),
    ``html`` <in<br />out> labels, or ``merged`` inputs that share a target and output on one
    edge (LearnLib's), with the ``__start0`` edge."""
    lines = ["digraph g {", '__start0 [label="" shape="none"];']
    for q, row in spec["transitions"].items():
        groups: dict[tuple[str, str], list[str]] = {}
        for a, t in row.items():
            groups.setdefault((t, spec["transition_outputs"][q][a]), []).append(a)
        for (t, out), letters in groups.items():
            pairs = [(" | ".join(letters), out)] if form == "merged" else [(a, out) for a in letters]
            for a, o in pairs:
                label = f'"{a}/{o}"' if form == "quoted" else f"<{a}<br />{o}>"
                lines.append(f"{q} -> {t} [label={label}];")
    lines += [f"__start0 -> {spec['states'][0]};", "}"]
    return "\n".join(lines)


def test_a_64_state_machine_reads_the_same_from_json_every_dot_form_and_aalpy():
    """The issue's largest size (64 states, 16 inputs, 32 outputs) in every input form: the same
    outputs on random words (the compile sweep, ``-m slow``, compiles it from JSON)."""
    pytest.importorskip("pydot")
    automata = pytest.importorskip("aalpy.automata")
    spec = random_mealy(64, 16, 32, 64)
    states = {q: automata.MealyState(q) for q in spec["states"]}
    for q, row in spec["transitions"].items():
        for a, t in row.items():
            states[q].transitions[a] = states[t]
            states[q].output_fun[a] = spec["transition_outputs"][q][a]
    learned = automata.MealyMachine(states[spec["states"][0]], list(states.values()))
    want = from_dict(spec)
    rng = random.Random(0)
    words = [[rng.choice(spec["alphabet"]) for _ in range(64)] for _ in range(20)]
    for source in (*(dot_to_dict(_as_dot(spec, form)) for form in ("quoted", "html", "merged")), learned):
        a = load_spec(source)
        assert (a.n_states, len(a.alphabet)) == (64, 16)
        for w in words:
            assert mealy_outputs(a, a.symbol_ids(w)) == mealy_outputs(want, want.symbol_ids(w))
