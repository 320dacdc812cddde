"""Label readout: the minimal Moore machine compiled, the label read out of its state
(compiler/pipeline.py, constructions/labels.py), checked by the verifier against the source."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import compiler
from compiler.automata.errors import CheckpointError, ShortcutError
from compiler.automata.formats import from_regex
from compiler.automata.load import load_spec
from compiler.cli import main
from compiler.automata.representation import natural
from constructions import scan
from constructions.checkpoint import load, save
from constructions.labels import LabelReadoutError, label_lookup, label_unembedding
from constructions.program import Program
from constructions.workspace import Workspace
from verify.check import verify

FIXTURES = Path(__file__).resolve().parents[2] / "examples" / "aalpy"
QUICK = {"samples": 8, "exhaustive_budget": 1024, "family_limit": 2}


def labelled(spec: str, f):
    a = load_spec(spec)
    return dataclasses.replace(a, outputs=tuple(f(s) for s in a.states))


# --- the unembedding forms ------------------------------------------------------------------------


def test_one_hot_readout_sums_each_labels_states() -> None:
    W, b = np.zeros((5, 3)), np.zeros(3)
    W[[1, 2, 4], [0, 1, 2]] = 1.0
    W2, b2, notes = label_unembedding(W, b, [0, 1, 0], 2)
    x = np.zeros(5)
    x[4] = 1.0  # state 2, label 0
    assert notes["form"] == "one-hot sum" and (x @ W2 + b2).tolist() == [1.0, 0.0]


def test_scalar_code_readout_needs_runs_and_keeps_margin_one() -> None:
    n = 7
    W, b = np.zeros((3, n)), -np.arange(n, dtype=float) ** 2
    W[1] = 2.0 * np.arange(n)
    lab = [0, 0, 2, 2, 2, 1, 1]
    W2, b2, notes = label_unembedding(W, b, lab, 3)
    for q in range(n):
        logits = np.array([0.0, q, 0.0]) @ W2 + b2
        top = np.sort(logits)
        assert int(np.argmax(logits)) == lab[q] and top[-1] - top[-2] >= 1.0
    with pytest.raises(LabelReadoutError, match="not runs"):
        label_unembedding(W, b, [0, 1, 0, 1, 0, 1, 0], 2)


def test_multi_dim_readout_with_shared_labels_is_refused() -> None:
    W, b = np.array([[2.0, 0.0, 2.0], [0.0, 2.0, 2.0]]), np.array([-1.0, -1.0, -2.0])
    with pytest.raises(LabelReadoutError):
        label_unembedding(W, b, [0, 0, 1], 2)
    assert label_unembedding(W, b, [2, 0, 1], 3)[2]["form"] == "one state per label"


# --- compiled label models -----------------------------------------------------------------------


def test_permutation_automaton_labelled_by_where_1_goes_is_smaller() -> None:
    """S4 on its 24 elements, labelled by the image of 1: the minimal Moore machine is S4 on 4 points."""
    a = labelled("symmetric:4", lambda s: s[0])
    states = compiler.compile_automaton(a, max_len=32)
    labels = compiler.compile_automaton(a, max_len=32, readout="labels")
    r = labels.info()["readout"]
    assert (r["states_before"], r["states_after"]) == (24, 4)
    assert labels.info()["n_params"] < states.info()["n_params"]
    result = verify(labels, **QUICK)
    assert result.exact and result.margins["readout_min_logit_margin"] > 0.5
    word = ["(1,2)", "(1,2,3,4)", "(1,2,3,4)"]
    assert labels.simulate([word]) == [[a.outputs[q] for q in a.run(a.symbol_ids(word))]]


@pytest.mark.parametrize("spec", ["parity", FIXTURES / "div5.dot", FIXTURES / "counter6.dot"])
def test_label_model_is_exact_and_never_larger(spec) -> None:
    pytest.importorskip("pydot") if str(spec).endswith(".dot") else None
    a = load_spec(spec)
    states = compiler.compile_automaton(a, max_len=16)
    labels = compiler.compile_automaton(a, max_len=16, readout="labels")
    assert labels.info()["n_params"] <= states.info()["n_params"]
    assert verify(labels, **QUICK).exact


def _params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def _last_resort_params(model, max_len: int) -> int:
    """Exact size of the planner's last resort for this label model: the scan on the natural
    action of the minimised machine (its estimate is exact, the registry contract)."""
    return scan.estimated_params(natural(model.automaton), max_len)


def test_multi_axis_readout_keeps_the_construction_with_a_label_lookup() -> None:
    """grid:6 labelled 'at a wall': the gridworld's coordinate cannot separate {0, 5} from the rest
    by one linear logit per label, so an exact lookup of the coordinate, fused into the last MLP,
    reads them: still the gridworld in 2 layers, exact, and far below the last resort."""
    a = labelled("grid:6", lambda s: "wall" if s in ("0", "5") else "inside")
    states = compiler.compile_automaton(a, max_len=32)
    m = compiler.compile_automaton(a, max_len=32, readout="labels")
    assert m.info()["method"] == states.info()["method"] == "gridworld"
    assert len(m.config.blocks) == len(states.config.blocks) == 2
    assert m.meta["readout"]["form"].startswith("exact lookup")
    assert _params(m) <= _last_resort_params(m, 32)
    result = verify(m, **QUICK)
    assert result.exact and result.margins["readout_min_logit_margin"] > 0.5
    explicit = compiler.compile_automaton(a, max_len=32, readout="labels", method="gridworld")
    assert _params(explicit) == _params(m)


def _in_three(s: str) -> str:
    return "in" if s in ("12345", "21345", "23145") else "out"


@pytest.mark.parametrize("spec, label, lookup", [
    ("parity", lambda s: s, False),
    ("grid:6", lambda s: "wall" if s in ("0", "5") else "inside", True),
    ("grid2d:3,3", lambda s: "corner" if s in ("0,0", "0,2", "2,0", "2,2") else "no", True),
    ("symmetric:5", _in_three, True),  # no smaller Moore machine: the scan's element readout, looked up
])
def test_label_readout_keeps_the_chosen_construction_and_layers(spec, label, lookup) -> None:
    """Where the minimised machine is the automaton, the label model is the state model's
    construction and depth, with a linear label unembedding or an exact lookup in its last MLP,
    never the larger last resort; exact."""
    a = labelled(spec, label)
    states = compiler.compile_automaton(a, max_len=16)
    m = compiler.compile_automaton(a, max_len=16, readout="labels")
    assert m.info()["method"] == states.info()["method"]
    assert len(m.config.blocks) == len(states.config.blocks)
    assert m.meta["readout"]["form"].startswith("exact lookup") == lookup
    assert _params(m) <= _last_resort_params(m, 16)
    assert verify(m, **QUICK).exact


def test_label_lookup_refuses_a_readout_that_is_not_a_nearest_point() -> None:
    ws = Workspace()
    ws.add("x", 2)
    W, b = np.array([[2.0, 0.0, 2.0], [0.0, 2.0, 2.0]]), np.array([-1.0, -1.0, -3.0])  # b of state 2 is off
    program = Program(ws, np.zeros((2, 2)), np.zeros((2, 2)), [], W, b)
    with pytest.raises(LabelReadoutError, match="nearest integer point"):
        label_lookup(program, [0, 0, 1], 2)


def test_verifier_catches_a_wrong_label_and_names_labels(tmp_path: Path) -> None:
    m = compiler.compile_automaton(labelled("dihedral:4", lambda s: s[-1]), max_len=16, readout="labels")
    with torch.no_grad():
        m.W_U.copy_(m.W_U.flip(-1))
        m.b_U.copy_(m.b_U.flip(-1))
    result = verify(m, **QUICK)
    assert not result.exact and result.counterexample.expected in m.meta["readout"]["labels"]


def test_checkpoint_round_trip_and_header_checks(tmp_path: Path) -> None:
    m = compiler.compile_automaton(labelled("dihedral:4", lambda s: s[-1]), max_len=16, readout="labels")
    save(m, tmp_path / "d.safetensors")
    back = load(tmp_path / "d.safetensors")
    assert back.simulate([["advance", "reverse"]]) == m.simulate([["advance", "reverse"]])
    assert back.info()["readout"]["states_after"] == 2
    with pytest.raises(ShortcutError, match="another start"):
        compiler.with_start(back, back.automaton.states[1])
    back.meta = {**back.meta, "readout": {**back.meta["readout"], "labels": ["x"]}}
    back._automaton = None
    from constructions.checkpoint import check_header
    with pytest.raises(CheckpointError, match="label names"):
        check_header(back)


def test_no_outputs_or_unknown_readout_is_bad_input() -> None:
    with pytest.raises(ShortcutError, match="no outputs"):
        compiler.compile_automaton("cyclic:3", max_len=8, readout="labels")
    with pytest.raises(ShortcutError, match="unknown readout"):
        compiler.compile_automaton("parity", max_len=8, readout="both")


def test_cli_compile_and_run_print_labels(tmp_path: Path, capsys) -> None:
    pytest.importorskip("pydot")
    out = tmp_path / "c.safetensors"
    assert main(["compile", str(FIXTURES / "counter6.dot"), "--readout", "labels", "-o", str(out),
                 "--max-len", "16", "--verify-samples", "4", "--verify-budget", "256"]) == 0
    assert "6 -> 3 states" in capsys.readouterr().out
    assert main(["run", str(out), "--input", "inc inc inc reset inc", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"labels": ["mid", "high", "low", "low", "mid"]}
    assert main(["verify", str(out), "--samples", "4", "--exhaustive-budget", "256", "--family-limit", "2"]) == 0


# --- quotient or original: the label model never larger than the state model --------------------


def _both(a, max_len: int = 16):
    return compiler.compile_automaton(a, max_len=max_len), compiler.compile_automaton(a, max_len=max_len,
                                                                                      readout="labels")


def test_permutation_labelled_by_where_point_0_goes_is_strictly_smaller() -> None:
    """symmetric:5 labelled by the image of its first point (a letter moves it wherever it sends
    that point): the minimal Moore machine is S5 on 5 points, compiled in fewer parameters than
    the 120-state model; the automaton as given, its image of point 0 read by one unit linear in
    that code (labels in code order), is smaller still and taken (the record says so)."""
    a = labelled("symmetric:5", lambda s: s[0])
    states, labels = _both(a)
    r = labels.meta["readout"]
    assert (r["states"], r["states_before"], r["states_after"]) == ("original", 120, 5)
    variant = {v["states"]: v["params"] for v in r["variants"]}
    assert _params(labels) == variant["original"] < variant["quotient"] < _params(states) == r["state_model_params"]
    assert r["notes"]["lookup"] == "interpolated code function"
    assert "label readout on the automaton as given" in r["why"] and "not the minimal Moore machine (5 states)" in r["why"]
    assert verify(labels, **QUICK).exact


@pytest.mark.parametrize("spec", ["parity", "repeat:2", "blocks:4", "regex"])
def test_label_model_of_catalog_and_regex_automata_is_never_larger_and_exact(spec) -> None:
    if spec == "regex":
        pytest.importorskip("automata")

        a = from_regex("(ab|ba)*a", "a,b")
    else:
        a = load_spec(spec)
    states, labels = _both(a)
    assert _params(labels) <= _params(states)
    assert labels.meta["readout"]["states"] in ("quotient", "original")
    assert verify(labels, **QUICK).exact


def _wall(s: str) -> str:
    return "wall" if s in ("0", "5") else "inside"


def _lt(s: str) -> str:
    return "lt" if s[0] < s[1] else "ge"


@pytest.mark.parametrize("spec, label", [("grid:6", _wall), ("symmetric:5", _lt)])
def test_labels_that_need_a_lookup_take_the_automaton_as_given(spec, label) -> None:
    """grid:6 at a wall (no smaller machine) and symmetric:5 by s[0] < s[1] (120 -> 20 states, whose
    quotient no small construction takes): the state model's construction on the automaton as
    given with an exact lookup of the label (only the code dims that decide it), far below the
    quotient's model, exact; the state -> label map is the one recorded, read by run."""
    a = labelled(spec, label)
    states, labels = _both(a)
    r = labels.meta["readout"]
    assert labels.info()["method"] == states.info()["method"]
    assert len(labels.config.blocks) == len(states.config.blocks)
    assert r["states"] == "original" or r["states_after"] == r["states_before"]  # grid:6: the same machine
    assert r["state_label"] == [r["labels"].index(label(s)) for s in labels.automaton.states]
    assert labels.info()["readout"]["states"] == r["states"]
    assert _params(labels) == min(v["params"] for v in r["variants"]) < 2 * _params(states)
    assert verify(labels, **QUICK).exact
    word = list(a.alphabet[:2]) * 3
    assert labels.simulate([word]) == [[label(a.states[q]) for q in a.run(a.symbol_ids(word))]]
    with pytest.raises(ShortcutError, match="another start"):
        compiler.with_start(labels, a.states[1])


@pytest.mark.parametrize("spec, label, max_len", [("grid:6", _wall, 16), ("symmetric:5", _in_three, 64)])
def test_labels_read_by_a_lookup_are_within_the_state_model(spec, label, max_len) -> None:
    """The lookup reads only the code dims that decide the label, keys only the labels other than
    the commonest, writes into the BOS flag's dim (0 at every input position) and, for one code
    dim, is one hidden layer: within the state model it replaces the unembedding of."""
    states, labels = _both(labelled(spec, label), max_len)
    assert _params(labels) <= _params(states)
    assert labels.meta["readout"]["notes"]["label_dim"] == "bos"


@pytest.mark.parametrize("spec, label", [("symmetric:5", _in_three),
                                         ("grid2d:3,3", lambda s: "c" if s in ("0,0", "0,2", "2,0", "2,2") else "n")])
def test_labels_over_several_code_dims_are_cut_off_by_halfspaces_within_the_state_model(spec, label) -> None:
    """Three permutations (vertices of the
    code set: a cap each) and a 3x3 grid's corners (a cap each): one hidden layer fused after the
    last MLP, the coordinates it reads taken from that MLP's output alone (written by it only), so
    the label model is smaller than the state model (it was 1-2% larger with Lemma 11's two-layer
    lookup); exact."""
    states, labels = _both(labelled(spec, label))
    assert labels.meta["readout"]["notes"]["lookup"] == "halfspace lookup"
    assert _params(labels) < _params(states)
    assert len(labels.config.blocks) == len(states.config.blocks)
    assert verify(labels, **QUICK).exact


@pytest.mark.parametrize("spec, n_labels", [("alternating:5", 2), ("symmetric:5", 3)])
def test_random_labels_of_a_permutation_scan_are_within_the_state_model(spec, n_labels) -> None:
    """A random label per permutation (the two kinds benchmarks/label_sizes.py found 5-8% larger):
    the scan's last MLP composes into the fetched map, so the lookup fused after it reads the map
    from that MLP's own units (no carry in: the fused first hidden layer is the state model's last
    MLP) and carries out only its update of scan:prev; the label model is smaller, and exact."""
    rng = np.random.default_rng(5)
    a = load_spec(spec)
    labels_of = [f"l{i}" for i in range(n_labels)] + [f"l{i}" for i in rng.integers(0, n_labels, a.n_states - n_labels)]
    rng.shuffle(labels_of)
    states, labels = _both(dataclasses.replace(a, outputs=tuple(labels_of)))
    notes = labels.meta["readout"]["notes"]
    assert notes["placed"] == "after the last MLP" and notes["code_dims"][0].startswith("scan:prev")
    assert labels.config.blocks[-1].mlp_hidden[0] == states.config.blocks[-1].mlp_hidden[0]
    assert _params(labels) < _params(states)
    assert verify(labels, **QUICK).exact


def test_bounded_stack_labels_read_its_exact_features_and_the_error_flag() -> None:
    """dyck:4,2 (accept = empty stack): the bounded stack's readout is no nearest integer point, so the
    lookup reads the exact features it declares (level one-hot, stack bits; program.StateCodes), beside
    the last MLP (which only writes st:error), and st:error outvotes it from the first error on: still
    3 layers, smaller than the state model, exact."""
    states, labels = _both(load_spec("dyck:4,2"))
    assert labels.meta["method"] == "bounded-stack" and len(labels.blocks) == 3
    assert _params(labels) < _params(states)
    notes = labels.meta["readout"]["notes"]
    assert notes["placed"] == "beside the last MLP" and notes["keys"] == 1  # the empty stack: one cap, no carry
    assert notes["code_dims"][0] == "st:level[0]"
    assert verify(labels, **QUICK).exact
    a = labels.automaton
    word = [a.alphabet[0], a.alphabet[-1], a.alphabet[0]]  # a push, a pop of another symbol (an error), a push
    want = [labels.meta["readout"]["labels"][labels.meta["readout"]["state_label"][q]]
            for q in a.run(a.symbol_ids(word))]
    assert labels.simulate([word]) == [want] and want[-1] == "reject"


def test_forced_method_chooses_between_quotient_and_original_too() -> None:
    a = labelled("symmetric:5", lambda s: s[0])
    m = compiler.compile_automaton(a, max_len=16, readout="labels", method="scan")
    r = m.meta["readout"]
    assert {v["method"] for v in r["variants"]} == {"scan"} and len(r["variants"]) == 2
    size = {v["states"]: v["params"] for v in r["variants"]}
    assert size[r["states"]] == min(size.values()) == sum(p.numel() for p in m.parameters())
    assert size["original"] != size["quotient"] and verify(m, **QUICK).exact


def test_the_quotient_is_compiled_within_the_state_model_when_a_construction_fits() -> None:
    """4 states, 3 labels, 3 states after minimisation: auto's pick for the quotient (krohn-rhodes,
    5 layers, at max_len 64) is larger than the state model (scan, 6 layers), so the quotient is compiled with
    the shallowest construction within the state model's parameters (a scan on 3 states).  State 1,
    unreachable, alone carries l0, which the quotient's labels lack: the verifier expects it nowhere."""
    from compiler.automata.spec import from_dict

    a = from_dict({"name": "r", "states": ["0", "1", "2", "3"], "alphabet": ["a0", "a1", "a2"], "start": "0",
                   "transitions": {"0": {"a0": "2", "a1": "0", "a2": "3"}, "1": {"a0": "2", "a1": "2", "a2": "1"},
                                   "2": {"a0": "2", "a1": "0", "a2": "0"}, "3": {"a0": "2", "a1": "3", "a2": "2"}},
                   "outputs": {"0": "l1", "1": "l0", "2": "l2", "3": "l1"}})
    states, labels = _both(a, 64)
    r = labels.meta["readout"]
    assert (r["states"], r["states_after"], labels.meta["method"]) == ("quotient", 3, "scan")
    from compiler.automata.moore import minimise

    assert compiler.compile_automaton(minimise(a).quotient, max_len=64).meta["method"] == "krohn-rhodes"
    assert _params(labels) < _params(states)
    assert verify(labels, **QUICK).exact


# Two of the 8 random labellings (of 1,019, max_len 256) whose label model was larger than the state
# model before the halfspace unembedding and the interpolated code function (5,524 > 5,476 and
# 13,440 > 13,430 parameters).
_PRODUCT_3 = {"name": "random720", "states": ["0", "1", "2"], "alphabet": ["a0", "a1", "a2"], "start": "0",
              "transitions": {"0": {"a0": "0", "a1": "0", "a2": "2"}, "1": {"a0": "1", "a1": "1", "a2": "2"},
                              "2": {"a0": "2", "a1": "1", "a2": "2"}},
              "outputs": {"0": "l0", "1": "l1", "2": "l0"}}
_LINE_3 = {"name": "random636", "states": ["0", "1", "2"], "alphabet": ["a0", "a1", "a2"], "start": "0",
           "transitions": {"0": {"a0": "0", "a1": "2", "a2": "0"}, "1": {"a0": "2", "a1": "1", "a2": "1"},
                           "2": {"a0": "0", "a1": "1", "a2": "2"}},
           "outputs": {"0": "l1", "1": "l1", "2": "l0"}}


@pytest.mark.parametrize("spec, method, form, lookup", [
    (_PRODUCT_3, "product", "halfspaces of the state codes in the unembedding", "halfspaces"),
    (_LINE_3, "gridworld", "exact lookup of the state codes in the last MLP", "interpolated code function"),
])
def test_random_labellings_once_larger_are_within_the_state_model(spec, method, form, lookup) -> None:
    """A product of two 2-state factors labelled by a halfspace of its codes (now scored in the
    unembedding, where a lookup MLP cost more than the column it saved) and a 3-cell line labelled
    by its middle cell (now a bump of 2 units linear between the codes, where steps took 4): at
    max_len 256 each label model is smaller than its state model, in the state model's layers,
    and exact."""
    a = load_spec(spec)
    states, labels = _both(a, 256)
    r = labels.meta["readout"]
    assert states.meta["method"] == labels.meta["method"] == method
    assert (r["form"], r["notes"]["lookup"]) == (form, lookup)
    assert len(labels.config.blocks) == len(states.config.blocks)
    assert _params(labels) < _params(states)
    assert verify(labels, **QUICK).exact


@pytest.mark.parametrize("max_len", [16, 256])
def test_labels_cut_off_by_halfspaces_are_scored_in_the_unembedding(max_len) -> None:
    """A product of two 2-state factors labelled by a halfspace of its factor codes: integer
    weights on the code dims in the unembedding (margin 1) and the state model's own blocks, so
    smaller by exactly the unembedding column it drops; exact, the codes it reads checked by the
    verifier within the recorded tolerance."""
    states, labels = _both(load_spec(_PRODUCT_3), max_len)
    notes = labels.meta["readout"]["notes"]
    assert notes["lookup"] == "halfspaces" and notes["reader"] == "unembedding"
    assert labels.config.blocks == states.config.blocks
    assert _params(labels) == _params(states) - (states.config.n_out - 2) * (labels.config.d_model + 1)
    W_U = labels.W_U.detach().numpy()
    assert set(np.flatnonzero(np.any(W_U != 0, axis=1))) <= set(notes["code_dim_indices"])
    assert np.array_equal(W_U, np.round(W_U))
    r = verify(labels, **QUICK)
    assert r.exact
    entry = [m for m in r.margins["mlps"] if m["mlp"] == "unembedding (halfspaces)"]
    assert entry and 0 <= entry[0]["worst_input_noise"] < entry[0]["input_tolerance"]


@pytest.mark.parametrize("spec, label", [("symmetric:5", _lt),
                                         ("grid2d:4,4", lambda s: "far" if sum(map(int, s.split(","))) >= 4 else "near")])
def test_a_lookup_that_narrows_the_last_layer_beats_halfspaces_in_the_unembedding(spec, label) -> None:
    """x < y of a permutation's first two images, a 4x4 grid's far half: one halfspace cuts each off,
    but the lookup fused after the last MLP (funneled) leaves fewer rows in its residual-wide output
    matrix than the construction's own last hidden layer has, so it is smaller than the unembedding
    form (the state model less one column) and is kept; exact."""
    states, labels = _both(labelled(spec, label))
    assert labels.meta["readout"]["notes"]["lookup"] == "halfspace lookup"
    halfspaces = _params(states) - (states.config.n_out - 2) * (states.config.d_model + 1)
    assert _params(labels) < halfspaces
    assert verify(labels, **QUICK).exact
