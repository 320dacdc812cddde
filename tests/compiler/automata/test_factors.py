"""Factor descriptions (compiler/automata/factors.py): strictly local, locally testable and locally
threshold testable automata detected from the automaton with the smallest threshold and the
factors its states tell apart; the closure is the proof (the plan's table agrees with every run);
refusals name the property that fails."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from compiler.automata.errors import SpecError
from compiler.automata.factors import FactorPlan, components, detect
from compiler.automata.load import load_spec


def group_counts(plan: FactorPlan, tokens: np.ndarray) -> np.ndarray:
    """The reference count (independent of the plan's tables): [B, T+1, G]: each group's factor count up to t (index 0 = BOS, 0); with a tier, of the factors
    of the projection onto it (a factor ends at a tier letter only)."""
    B, T = tokens.shape
    classes = np.asarray(plan.classes)[tokens]
    on = np.isin(tokens, plan.tier) if plan.tier else np.ones(tokens.shape, dtype=bool)
    group = dict(zip(plan.factors, plan.groups))
    out = np.zeros((B, T + 1, plan.n_groups))
    for b in range(B):
        padded = [0] * (plan.k - 1)
        for t in range(1, T + 1):
            out[b, t] = out[b, t - 1]
            if not on[b, t - 1]:
                continue
            padded.append(int(classes[b, t - 1]))
            window = tuple(padded[-plan.k:])
            for j in range(1, plan.k + 1):  # every factor the window ends with
                if window[-j:] in group:
                    out[b, t, group[window[-j:]]] += 1
    return out


def _sl(factor_language):
    """Strictly 3-local on 4 letters: no 'x1 x2 x1' and no 'x3 x3 x4' (forbidden factors)."""
    return factor_language(4, 3, 1, [(1, 2, 1), (3, 3, 4)], lambda c: not any(c), name="sl3")


def _features(plan: FactorPlan, word: list[int]) -> tuple[int, ...]:
    """(window class, capped group counts) after ``word`` (letter indices), from the plan alone."""
    codes = [0] * (plan.k - 1) + [plan.classes[a] for a in word]
    index = {p: i + 1 for i, p in enumerate(plan.windows)}
    omega = next((index[tuple(codes[-j:])] for j in range(plan.k - 1, 0, -1) if tuple(codes[-j:]) in index), 0)
    counts = group_counts(plan, np.array([word]))[0, -1]
    return (omega, *(min(plan.threshold, int(c)) for c in counts))


@pytest.mark.parametrize("case", ["sl", "lt", "ltt", "letters"])
def test_local_classes_are_found_with_their_width_and_threshold_and_the_table_is_every_run(case, factor_language):
    a, k, t = {
        "sl": (_sl(factor_language), 3, 1),
        "lt": (factor_language(3, 2, 1, [(1, 2), (2, 1)], lambda c: c[0] > 0 and c[1] == 0, name="lt2"), 2, 1),
        "ltt": (factor_language(2, 2, 2, [(1, 2)], lambda c: c[0] >= 2, name="ltt22"), 2, 2),
        "letters": (factor_language(3, 1, 3, [(1,)], lambda c: c[0] == 2, name="ltt13"), 1, 3),
    }[case]
    plan, why = detect(a)
    assert plan is not None, why
    assert (plan.k, plan.threshold) == (k, t)
    table = dict(zip(plan.keys, plan.states))
    for n in range(1, 7):  # every word up to 6 letters: the state is the table's at its features
        for word in itertools.product(range(a.n_symbols), repeat=n):
            assert table[_features(plan, list(word))] == a.run(word)[-1]


def test_forbidden_factors_become_one_group_and_sizes_follow_the_factors(factor_language):
    a = factor_language(64, 4, 1, [(5, 9, 5, 2), (7, 7, 1, 3)], lambda c: not any(c), name="sl4_64")
    plan, why = detect(a)
    assert plan is not None, why
    assert plan.n_groups == 1 and len(plan.factors) == 2  # one 'some forbidden factor occurred'
    assert len(plan.windows) <= 10 and len(plan.keys) <= 2 * (len(plan.windows) + 1)  # not 64^3 windows
    assert max(plan.classes) <= 8  # the letters in no factor share one class


@pytest.mark.parametrize("spec, reason", [
    ("parity", "no power of the letter"),  # a group: not aperiodic
    ("flipflop", "hold every 6-factor equally often"),  # aperiodic, the latest write: no factor count sees it
    ("adder:3", "hold every 6-factor equally often"),
])
def test_a_language_outside_the_class_is_refused_naming_why(spec, reason):
    plan, why = detect(load_spec(spec))
    assert plan is None and reason in why and "not locally threshold testable" in why


def test_the_plan_round_trips_and_a_bad_one_is_refused(factor_language):
    plan, _ = detect(_sl(factor_language))
    assert FactorPlan.from_dict(plan.to_dict()) == plan
    bad = plan.to_dict()
    bad["groups"] = [5] * len(bad["groups"])
    with pytest.raises(SpecError):
        FactorPlan.from_dict(bad)


def test_components_of_a_chain_with_a_loop():
    import numpy as np
    maps = np.array([[1, 2, 2, 0]])  # 0 -> 1 -> 2 (self-loop); 3 -> 0
    comp = components(maps)
    assert len(set(comp.tolist())) == 4


@pytest.mark.parametrize("cls, k, letters", [("tsl", 2, 16), ("tlt", 2, 4), ("tlt", 2, 16), ("tsl", 3, 4),
                                             ("tlt", 3, 4), ("tsl", 4, 4)])
def test_a_tier_is_the_letters_that_move_a_state_and_the_table_is_every_run(cls, k, letters):
    """The detected tier is the generator's, and the plan's table at the features of the projection
    onto it (the start's key before any tier letter) is the state after every word up to 5 letters
    over the tier and one letter off it (4 on 16 letters)."""
    from compiler.automata.subregular_families import draw
    from compiler.automata.tiers import detect_tier, tier
    language, a = draw(cls, k=k, letters=letters, seed=0, threshold=2, tier=None, factors=None)
    assert set(tier(a)) == set(language.tier)
    assert detect(a)[0] is None  # no plain description: the tier is needed
    plan, why = detect_tier(a)
    assert plan is not None, why
    assert plan.k == k and plan.tier == tuple(sorted(language.tier)) and plan.layers == 3
    _tier_table_is_every_run(plan, a, 6 if letters < 16 else 5)


def _tier_table_is_every_run(plan: FactorPlan, a, up_to: int) -> None:
    """The plan's table at the features of the projection onto its tier (the start's key before any
    tier letter) is the state after every word shorter than ``up_to`` over the tier and one letter off it."""
    table = dict(zip(plan.keys, plan.states))
    letters_ = list(plan.tier) + [min(set(range(a.n_symbols)) - set(plan.tier))]
    for n in range(1, up_to):
        for word in itertools.product(letters_, repeat=n):
            projected = [x for x in word if x in plan.tier]
            key = _features(plan, projected) if projected else plan.keys[0]
            assert table[key] == a.run(word)[-1]


@pytest.mark.parametrize("k, letters, seed, layers", [(2, 4, 8, 1), (3, 6, 29, 2)])
def test_a_definite_tier_is_a_description_without_factors(k, letters, seed, layers):
    """Generated TLT languages whose tier automaton is definite (its last k - 1 tier letters decide):
    the tier's description has windows and no factor (1 layer when the most recent tier letter
    decides, else 2), round-trips, and its table is every run; the tier automaton itself, off a
    tier, is refused as definite (the lookback construction's case) unless a tier asks."""
    from compiler.automata.spec import Semiautomaton
    from compiler.automata.subregular_families import random_language
    from compiler.automata.tiers import detect_tier, tier
    a = random_language("tlt", k=k, letters=letters, seed=seed)
    plan, why = detect_tier(a)
    assert plan is not None, why
    assert plan.definite and not plan.groups and plan.windows and plan.tier == tier(a)
    assert (plan.k, plan.layers) == (k, layers) and "definite" in why
    assert FactorPlan.from_dict(plan.to_dict()) == plan
    _tier_table_is_every_run(plan, a, 7)
    on = tier(a)
    projected = Semiautomaton(name="projected", states=a.states, start=a.start,
                              alphabet=tuple(a.alphabet[x] for x in on), maps=tuple(a.maps[x] for x in on))
    refused, why = detect(projected)
    assert refused is None and "is definite" in why
    assert detect(projected, definite=True)[0].definite


def test_a_tier_plan_round_trips_and_a_wrong_tier_is_refused():
    from compiler.automata.subregular_families import random_language
    from compiler.automata.tiers import detect_tier
    plan, _ = detect_tier(random_language("tlt", k=2, letters=4, seed=0))
    assert FactorPlan.from_dict(plan.to_dict()) == plan
    with pytest.raises(SpecError):
        FactorPlan.from_dict({**plan.to_dict(), "tier": [7]})


@pytest.mark.parametrize("spec", ["dyck:2,2", "dyck:3,3"])
def test_a_bounded_stack_is_refused_by_a_witness_not_the_budget(spec):
    """A balanced block keeps a stack's level (the sampled identity e x f y e z f = e z f y e x f):
    the refusal names two class words with the same 6-windows, each as often, that reach different
    states -- checked here from the words alone -- instead of spending the search's budget."""
    import ast
    from collections import Counter

    from compiler.automata.factors import class_maps
    a = load_spec(spec)
    plan, why = detect(a)
    assert plan is None and "equally often" in why and "budget" not in why
    w1, w2 = (ast.literal_eval(x) for x in why.split("the class words ")[1].split(" end in")[0].split(" and "))
    maps, _ = class_maps(a)

    def windows(w: list[int]) -> Counter:
        x = [0] * 5 + w
        return Counter(tuple(x[i : i + 6]) for i in range(len(w)))
    assert windows(w1) == windows(w2) and w1[-5:] == w2[-5:]
    end = []
    for w in (w1, w2):
        q = a.start
        for c in w:
            q = int(maps[c - 1, q])
        end.append(q)
    assert end[0] != end[1]


def test_the_tracker_built_by_failure_links_is_the_definition():
    """Every node's step, window class and factor counts equal the definition's (the longest suffix
    that is a prefix of a pattern; the longest window it ends with; the factors it ends with), on
    random patterns with pads."""
    from compiler.automata.factor_closure import tracker
    rng = np.random.default_rng(0)
    for _ in range(200):
        k, n = int(rng.integers(2, 6)), int(rng.integers(1, 5))
        pats = {tuple(int(c) for c in rng.integers(1, n + 1, int(rng.integers(1, k + 1)))) for _ in range(6)}
        pats.add((0,) + tuple(int(c) for c in rng.integers(1, n + 1, k - 1)))  # anchored at the start
        windows = tuple(sorted({p[j:] for p in pats if len(p) < k for j in range(len(p))}))
        factors = tuple(sorted(pats))
        groups = tuple(i % 2 for i in range(len(factors)))
        tr = tracker(k, n + 1, windows, factors, groups)
        prefixes = sorted({p[:i] for p in (*windows, *factors) for i in range(len(p) + 1)}, key=lambda p: (len(p), p))
        for i, p in enumerate(prefixes):
            for c in range(n + 1):
                x = p + (c,)
                assert prefixes[tr.step[i, c]] == next(x[j:] for j in range(len(x) + 1) if x[j:] in prefixes)
            assert tr.omega[i] == next((windows.index(p[j:]) + 1 for j in range(len(p)) if p[j:] in windows), 0)
            for g in (0, 1):
                assert tr.inc[i, g] == sum(p[j:] in factors and groups[factors.index(p[j:])] == g
                                           for j in range(len(p)))


def test_anchored_forbidden_factors_are_one_group_at_the_class_width():
    """Strictly 6-local on 4 letters with two factors anchored at the start (the generator's seed 0):
    the search finds the forbidden factors, in one group, and windows -- no count of a single letter,
    which an early conflict between two short words would suggest."""
    from compiler.automata.subregular_families import draw
    language, a = draw("sl", k=6, letters=4, seed=0, threshold=2, tier=None, factors=None)
    plan, why = detect(a)
    assert plan is not None, why
    assert (plan.k, plan.threshold, plan.n_groups, plan.layers) == (6, 1, 1, 2)
    assert len(plan.factors) == len(language.patterns) and min(map(len, plan.factors)) == 6


def test_a_threshold_is_refuted_on_the_automatons_own_runs():
    """A count that tells 1 occurrence from 2 (LTT, t = 2, of a 6-factor on 16 letters): random
    blocks rarely hold it; the pumped runs s w against s w w do.  The pair is a proof: equal windows
    and equal counts of every 6-factor capped at 1, different states."""
    from compiler.automata.factor_witnesses import refuted
    from compiler.automata.factors import class_maps
    from compiler.automata.subregular_families import random_language
    a = random_language("ltt", k=6, letters=16, seed=0)
    maps, _ = class_maps(a)
    pair = refuted(maps, a.start, 6, 1)
    assert pair is not None and refuted(maps, a.start, 6, 2) is None
    _assert_refutes_threshold_1(maps, a.start, pair)


def _assert_refutes_threshold_1(maps: np.ndarray, q0: int, pair: tuple[list[int], list[int]]) -> None:
    """``pair`` is a proof that no description with k = 6, t = 1 exists, from the words alone: the same
    last 5 class codes, the same set of 6-factors of the padded text, different states from q0."""
    def run(w):
        q = q0
        for c in w:
            q = int(maps[c - 1, q])
        return q

    def factors(w):
        x = [0] * 5 + w
        return {tuple(x[i:i + 6]) for i in range(len(w))}
    w1, w2 = pair
    assert run(w1) != run(w2) and factors(w1) == factors(w2) and w1[-5:] == w2[-5:]


def test_a_count_under_a_factor_anchored_at_the_start_is_refuted_by_separated_pumps():
    """LTT_{5,2} on 16 letters (seed 0): one occurrence of a 5-factor from two tells apart only after
    the factor anchored at the start, and a shortest word ends with the counted factor, so the runs'
    pumps count it 2 against 3.  A s B s against A s B s B s (A B a shortest word, s one letter
    repeated) counts it 1 against 2: a proof that t = 1 fails, checked here from the words alone,
    which the runs' and the blocks' samples miss; the search at t = 2 then gets the budget and finds
    the description, whose table is the state after random words."""
    from compiler.automata import factor_witnesses as fw
    from compiler.automata.factors import class_maps
    from compiler.automata.subregular_families import random_language
    a = random_language("ltt", k=5, letters=16, seed=0)
    maps, _ = class_maps(a)
    assert fw._refuted_by_runs(maps, a.start, 6, 1) is None and fw._refuted_by_blocks(maps, a.start, 6, 1) is None
    pair = fw.refuted(maps, a.start, 6, 1)
    assert pair is not None
    _assert_refutes_threshold_1(maps, a.start, pair)
    plan, why = detect(a)
    assert plan is not None, why
    assert (plan.k, plan.threshold, plan.layers) == (5, 2, 2)
    table = dict(zip(plan.keys, plan.states))
    rng = np.random.default_rng(0)
    for _ in range(100):
        word = [int(x) for x in rng.integers(0, a.n_symbols, int(rng.integers(1, 20)))]
        assert table[_features(plan, word)] == a.run(word)[-1]


def test_a_description_with_a_count_per_factor_does_not_end_the_tries():
    """Locally 4-testable on 64 letters (seed 0): one score ends with a count per anchored factor
    (32 groups, 9.4M parameters); the tries go on and take the description of 2 factors."""
    from compiler.automata.subregular_families import random_language
    plan, why = detect(random_language("lt", k=4, letters=64, seed=0))
    assert plan is not None, why
    assert plan.layers == 2 and plan.n_groups <= 2 and len(plan.factors) <= 2


@pytest.mark.parametrize("cls,k,letters", [("lt", 4, 4), ("tlt", 4, 16), ("ltt", 2, 4), ("pt", 2, 16)])
def test_the_closures_kept_change_no_answer(monkeypatch, cls, k, letters):
    """A detection keeps the closures it computed (``_Memo``): on these languages, whose searches stay
    within the budget either way, the plan, or the refusal and its reason, is the one computing every
    closure again gives (a kept closure costs less work: ``closure_work``)."""
    import compiler.automata.factors as factors
    from compiler.automata.subregular_families import random_language
    from compiler.automata.tiers import detect_tier

    a = random_language(cls, k=k, letters=letters, seed=0)
    kept = detect(a), detect_tier(a)
    monkeypatch.setattr(factors, "MEMO_ROWS", 0)
    assert (detect(a), detect_tier(a)) == kept


@pytest.mark.parametrize("cls,k,letters", [("ltt", 2, 4), ("lt", 4, 16)])
def test_a_closure_marks_its_codes_densely_or_sorted_alike(monkeypatch, cls, k, letters):
    """``closure_of`` marks the codes it met in a dense array where the code space is small and keeps
    them sorted above it: every closure of a detection is the same array for array either way."""
    import compiler.automata.factor_closure as fc
    import compiler.automata.factors as factors
    from compiler.automata.subregular_families import random_language

    seen: list = []

    def recorded(*args):
        seen.append((args, fc.closure_of(*args)))
        return seen[-1][1]

    a = random_language(cls, k=k, letters=letters, seed=0)
    monkeypatch.setattr(factors, "closure_of", recorded)
    detect(a)
    monkeypatch.setattr(fc, "DENSE_CODES", 0)
    assert seen and all(np.array_equal(getattr(cl, f), getattr(fc.closure_of(*args), f))
                        for args, cl in seen for f in ("q", "node", "counts", "parent", "letter", "feature"))


def test_a_shared_budget_refuses_naming_its_share():
    """Inside ``shared_budget(n)`` a search gets 1/n of its budget: one that runs out refuses naming the
    share, never "not in the class"; outside, the same automaton is found."""
    from compiler.automata.shares import shared_budget

    a = load_spec("parity")  # a letter with a cycle: refused before any search, whatever the share
    with shared_budget(4):
        assert detect(a)[0] is None
    from compiler.automata.subregular_families import random_language

    b = random_language("lt", k=4, letters=64, seed=0)
    assert detect(b)[0] is not None
    with shared_budget(1 << 20):
        plan, why = detect(b)
    assert plan is None and "over the search's budget" in why and "1/1048576 of a detection's: shared" in why
    assert "gave up at thresholds 1, 2, 3" in why  # every threshold that ran out, not only the last


def test_a_refusal_names_the_proof_at_its_threshold_and_the_thresholds_over_the_budget():
    """``_refusal``: a proof at a threshold proves every smaller one, so only the larger thresholds whose
    searches ran out are named beside it; with none, the proof alone."""
    from compiler.automata.factors import _refusal
    assert _refusal("the class words x", 3, [1, 2], 10) == "the class words x"
    why = _refusal("the class words x", 1, [2, 3], 10)
    assert why.startswith("gave up at thresholds 2, 3 over the search's budget (10 work units")
    assert why.endswith("; at threshold 1: the class words x")


def test_the_budget_counts_a_fixed_cost_per_closure_computed_and_the_rows_of_one_kept():
    """``closure_work``: a computed closure costs ``CLOSURE_COST`` plus its rows times the letter classes,
    the same description met again (kept) its rows only; the 817-state LTT_{4,2} language on 64 letters,
    whose tries meet the same descriptions again and again, is then found within the budget (counting
    kept closures in full, it ran out at threshold 2)."""
    import compiler.automata.factors as factors
    from compiler.automata.subregular_families import random_language

    maps, _ = factors.class_maps(random_language("lt", k=2, letters=4, seed=0))
    s = factors._Search(maps, 0, 2, 1, [], [(1,)], [0], [0], components(maps))
    cl, _ = s.closure()
    assert s.work[0] == factors.CLOSURE_COST + len(cl.q) * maps.shape[0]
    s.closure()
    assert s.work[0] == factors.CLOSURE_COST + len(cl.q) * (maps.shape[0] + 1)
    plan, why = detect(random_language("ltt", k=4, letters=64, seed=0, factors=5))
    assert plan is not None, why
    assert (plan.layers, plan.threshold, plan.n_groups) == (2, 2, 4)
