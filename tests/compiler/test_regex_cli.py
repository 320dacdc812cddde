"""Regular expressions compiled from the command line with --readout labels are exact against
automata-lib's own acceptance: 1,000 random words of length 64 per pattern, every prefix scored
(the prefixes of uniform words are uniform words of each length 1..64)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from compiler.cli import main
from constructions.checkpoint import load

PATTERNS = {
    "(ab|ba)*a": "a,b",
    "(a|b)*a(a|b)(a|b)(a|b)(a|b)": "a,b",  # the 5th letter from the end is a
    "(a(b|c)*a|bc)*c?": "a,b,c",
}
WORDS, LENGTH = 1000, 64


def automata_lib_verdicts(pattern: str, letters: list[str], words: np.ndarray) -> np.ndarray:
    """[words, LENGTH] booleans: does automata-lib's DFA of the pattern (from its own NFA, not
    minimised, partial: a missing transition rejects the rest) accept each prefix?"""
    from automata.fa.dfa import DFA
    from automata.fa.nfa import NFA

    dfa = DFA.from_nfa(NFA.from_regex(pattern, input_symbols=set(letters)))
    out = np.zeros(words.shape, dtype=bool)
    for i, w in enumerate(words):
        q = dfa.initial_state
        for t, x in enumerate(w):
            q = None if q is None else dfa.transitions[q].get(letters[x])  # partial: no move, no match
            out[i, t] = q in dfa.final_states
    return out


@pytest.mark.slow  # about 1 minute on a 2-core machine: three compiles and 3,000 words of length 64
@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_regex_label_model_matches_automata_lib(pattern: str, tmp_path: Path, capsys) -> None:
    pytest.importorskip("automata")
    out = tmp_path / "re.safetensors"
    assert main(["compile", f"regex:{pattern}", "--alphabet", PATTERNS[pattern], "--readout", "labels",
                 "-o", str(out), "--max-len", str(LENGTH), "--verify-samples", "4", "--verify-budget", "1024"]) == 0
    assert "verification: exact" in capsys.readouterr().out
    model = load(out)
    letters = list(model.automaton.alphabet)
    assert letters == PATTERNS[pattern].split(",")
    words = np.random.default_rng(0).integers(0, len(letters), (WORDS, LENGTH))
    with torch.no_grad():
        got = model(torch.from_numpy(words)).argmax(-1).numpy()
    accept = model.meta["readout"]["labels"].index("accept")
    assert np.array_equal(got == accept, automata_lib_verdicts(pattern, letters, words))
