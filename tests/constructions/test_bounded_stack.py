"""The stack construction (bounded stacks / Dyck in three layers): exactness, sizes, start states."""

import dataclasses

import numpy as np
import pytest
import torch

import compiler
from compiler.automata.catalog import build
from compiler.automata.load import load_spec
from compiler.automata.spec import from_dict
from compiler.cli import main
from compiler.pipeline import with_start
from constructions import bounded_stack as stack
from constructions import bounded_stack_families as stack_families
from constructions import registry
from constructions.construction import BuildOptions
from tests.compiler.automata.test_stack_detect import as_spec, renamed
from verify.check import verify
from verify.layerwise import invariants

SPECS = ["dyck:4,2", "dyck:2,2", "dyck:3,3", "dyck:6,1"]


def automaton(name):
    return from_dict(renamed(as_spec(load_spec("dyck:4,2")), 7)) if name == "renamed" else load_spec(name)


def run(model, rows):
    with torch.no_grad():
        return model(torch.from_numpy(np.asarray(rows, dtype=np.int64))).argmax(-1).numpy()


def legal_rows(model, n, T, seed, p_error=None):
    """n sequences of length T that stay inside the depth bound most of the time."""
    _, plan = registry.plan_of(model)
    rng = np.random.default_rng(seed)
    start = plan.stacks[model.automaton.start]
    return np.array([stack_families.legal_walk(plan, start, T, rng, p_error=1.0 / T if p_error is None else p_error)
                     for _ in range(n)])


@pytest.fixture(scope="module")
def models():
    return {name: compiler.compile_automaton(automaton(name), max_len=100) for name in [*SPECS, "renamed"]}


@pytest.mark.parametrize("name", [*SPECS, "renamed"])
def test_auto_picks_three_layers_and_the_estimate_is_the_built_size(models, name):
    m = models[name]
    info = m.info()
    assert info["method"] == stack.NAME and info["n_layers"] == 3
    c, plan = registry.plan_of(m)
    assert c.estimate(plan, 100, "sinusoidal") == registry.Cost(3, info["n_params"])
    assert m.meta["warnings"] == []


@pytest.mark.parametrize("name", ["dyck:3,3", "renamed"])  # the others: families and errors below, slow sweep
def test_verify_is_exact_with_invariants_and_families(models, name):
    r = verify(models[name], samples=4, exhaustive_budget=100, family_limit=1)
    assert r.exact, (r.counterexample, r.invariant_failures)
    assert r.invariants.failures == [] and r.invariants.sequences > 0
    assert {"in-bounds", "deep-cycles", "error-at-end"} <= set(r.checked["adversarial_families"])


def test_1000_in_bounds_sequences_at_full_length_match_the_reference(models):
    m = models["dyck:4,2"]
    rows = legal_rows(m, 1000, 100, seed=3)
    ref = np.array([m.automaton.run(r) for r in rows.tolist()])
    sink = registry.plan_of(m)[1].sink
    assert 0.2 < (ref[:, -1] == sink).mean() < 0.8  # both outcomes well represented
    assert (run(m, rows) == ref).all()


@pytest.mark.parametrize("name", SPECS)
def test_each_error_kind_at_the_very_end(models, name):
    m = models[name]
    _, plan = registry.plan_of(m)
    ends = stack_families.error_at_end(plan, plan.stacks[m.automaton.start], 100, np.random.default_rng(0))
    assert set(ends) == ({"overflow", "underflow"} | ({"mismatch"} if plan.symbols > 1 else set()))
    rows = np.array(list(ends.values()))
    ref = np.array([m.automaton.run(r) for r in rows.tolist()])
    assert (ref[:, -1] == plan.sink).all() and (ref[:, -3] != plan.sink).all()
    assert (run(m, rows) == ref).all()


def test_deep_cycles_reach_depth_d_and_back(models):
    m = models["dyck:3,3"]
    _, plan = registry.plan_of(m)
    rows = stack_families.families(m, plan, 100, 0)["deep-cycles"]
    ref = np.array([m.automaton.run(r) for r in rows.tolist()])
    depths = np.array([[len(plan.stacks[q]) for q in r] for r in ref])
    assert depths.max() == 3 and (depths == 0).sum() >= 100 // 6 - 1
    assert (run(m, rows) == ref).all()


@pytest.mark.parametrize("start", ["([", "[[[[", "error"])
def test_any_start_state(models, start):
    m = with_start(models["dyck:4,2"], start)
    assert m.automaton.states[m.automaton.start] == start
    rows = legal_rows(m, 64, 100, seed=5)
    ref = np.array([m.automaton.run(r) for r in rows.tolist()])
    assert (run(m, rows) == ref).all()
    _, plan = registry.plan_of(m)
    inv = invariants(m, np.concatenate([rows[:2], *stack_families.families(m, plan, 100, 0).values()]))
    assert inv.failures == [] and inv.sequences >= 6


def test_sizes_at_1024_and_the_precision_warning():
    a = load_spec("dyck:4,2")
    plan = stack.applies(a)
    cost = stack.estimate(plan, 1024)
    assert cost.layers == 3 and cost.params < 1_000_000
    eps32 = float(np.finfo(np.float32).eps)
    assert stack.precision(plan, 4096, eps32)["margin"] >= 1
    assert stack.precision(plan, stack.MEASURED_REACH + 1, eps32)["margin"] < 1
    assert stack.precision(plan, 4 * stack.MEASURED_REACH, float(np.finfo(np.float64).eps))["margin"] > 1


def test_cli_compiles_dyck_with_auto(tmp_path, capsys):
    out = tmp_path / "d.safetensors"
    assert main(["compile", "dyck:4,2", "-o", str(out), "--max-len", "1024", "--no-verify"]) == 0
    m = compiler.load(str(out))
    assert m.info()["method"] == stack.NAME and m.info()["n_layers"] == 3 and m.info()["n_params"] < 1_000_000


@pytest.mark.slow
@pytest.mark.parametrize("name", [*SPECS, "renamed"])
def test_length_4096(name):
    m = compiler.compile_automaton(automaton(name), max_len=4096)
    assert m.info()["n_layers"] == 3 and m.meta["warnings"] == []
    _, plan = registry.plan_of(m)
    fams = stack_families.families(m, plan, 4096, 0)
    rows = np.concatenate([legal_rows(m, 16, 4096, seed=11), *fams.values()])
    ref = np.array([m.automaton.run(r) for r in rows.tolist()])
    assert (run(m, rows) == ref).all()
    inv = invariants(m, fams["error-at-end"])
    assert inv.failures == []


@pytest.mark.parametrize("name", ["dyck:4,2", "dyck:3,3", "dyck:6,1"])
def test_declarations_match_the_weights(name):
    from tests.constructions.test_declarations import check_declarations

    program, _ = stack.build(load_spec(name), stack.applies(load_spec(name)), BuildOptions(20))
    assert check_declarations(program) == 3 + 2 + stack.applies(load_spec(name)).depth  # 3 MLPs, D + 2 heads


@pytest.mark.parametrize("spec", ["dyck:2,2", "dyck-legal:2,2"])
def test_the_declared_program_is_certified_and_a_wrong_detector_claim_is_refused(monkeypatch, spec):
    """One declaration: (a) the model is certified against exactly the program its build declares
    (the gadgets' obligations, the tracked codes of W_E, the readout and claims); (b) the detector
    claiming that one push letter pushes the other symbol -- the embedding and the declared program
    alike read the plan -- is refused by the program proof, naming an input on which the model is
    really wrong."""
    from verify.certify import certify

    a = load_spec(spec, promise="legal" if "legal" in spec else None)
    model = compiler.compile_automaton(a, max_len=16, method=stack.NAME)
    cert = certify(model)
    assert cert.certified is True and cert.program["proved"] is True, cert.reason
    _, plan = registry.plan_of(model)
    assert cert.obligations_sha256 == stack.build(a, plan, BuildOptions.of_model(model))[0].obligations().digest()

    good = stack.detect_any

    def wrong(automaton):
        plan, reason = good(automaton)
        s = next(i for i, (kind, _) in enumerate(plan.letters) if kind == "push")
        letters = list(plan.letters)
        letters[s] = ("push", 1 - letters[s][1])
        return dataclasses.replace(plan, letters=tuple(letters)), reason
    monkeypatch.setattr(stack, "detect_any", wrong)
    broken = compiler.compile_automaton(a, max_len=16, method=stack.NAME)
    cert = certify(broken)
    assert cert.certified is False and cert.failure["where"] == "program", cert.failure
    word = cert.failure["detail"].split("'")[1].split()
    want = [a.states[q] for q in a.run([a.alphabet.index(x) for x in word])]
    assert broken.simulate([word])[0] != want


def test_standard_shape_legal_stack_is_two_blocks_certified_and_a_broken_step_is_refused():
    """``one_hidden_layer``: a legal stack's depth decode is one hidden layer of threshold pairs over
    x + (D + 1) bos and its stack levels one of step pairs -- two standard blocks, as SGD's; the
    certificate proves it, and refuses it when one stack unit's pair no longer steps at y = 2."""
    from verify.certify import certify
    model = compiler.compile_automaton(load_spec("dyck-legal:4,2"), max_len=48, shape="standard")
    assert model.meta["method"] == "bounded-stack" and len(model.blocks) == 2 and model.meta["one_hidden_layer"]
    assert all(len(b.mlp_hidden) == 1 for b in model.config.blocks)
    assert certify(model).certified is True
    H = model.blocks[1].mlp.W_in.shape[1] // 2
    with torch.no_grad():  # stack unit 0's upper ramp shifted by one step: [y >= 2] becomes [y >= 3]
        model.blocks[1].mlp.b_in[0] -= 4.0
        model.blocks[1].mlp.b_in[H] -= 4.0
    cert = certify(model)
    assert cert.certified is False and "st.stack" in cert.failure["where"]


def test_standard_shape_stack_with_errors_decodes_its_depth_in_two_hidden_layers():
    from verify.certify import certify
    model = compiler.compile_automaton(load_spec("dyck:2,2"), max_len=24, method="bounded-stack", shape="standard")
    assert len(model.blocks) == 6 and model.meta["shape"]["unfolded"][0] == {"layer": 0, "mlp": "st.depth",
                                                                               "hidden_layers": 2}
    assert certify(model).certified is True


def test_a_stack_whose_declared_table_is_over_budget_is_refused_and_auto_takes_another():
    """The stack lookup declares MLP 2's function on every code combination it may read, (D + 2)
    (k + 1)^D of them (times k + 1 with errors): counted exactly (dyck:3,2 and its legal variant),
    and dyck:32,1's 292 billion refused by the estimate -- auto takes another construction in
    seconds instead of filling memory -- and by a forced build (exit 2, one line)."""
    for name in ("dyck:3,2", "dyck-legal:3,2"):
        plan = stack.applies(build(name))
        assert stack.stack_table_rows(plan) == len(stack._stack_table(plan)) <= stack.STACK_TABLE_BUDGET
    model = compiler.compile_automaton("dyck:32,1", max_len=16)
    refusal = next(c for c in model.meta["candidates"] if c["name"] == "bounded-stack")["refusal"]
    assert model.meta["method"] != "bounded-stack" and "292,057,776,128 code combinations" in refusal
    assert main(["compile", "dyck:32,1", "--method", "bounded-stack", "--max-len", "16", "-o", "/dev/null"]) == 2
