"""Write the two DOT files beside this script with AALpy itself (``pip install aalpy``):
``div5.dot``, the 5-state DFA of binary numbers divisible by 5 (most significant bit first),
and ``counter6.dot``, a Moore machine counting ``inc`` mod 6 with ``reset``, output the count
mod 3 (low, mid, high)."""

from pathlib import Path

from aalpy.automata import Dfa, DfaState, MooreMachine, MooreState
from aalpy.utils import save_automaton_to_file

HERE = Path(__file__).resolve().parent

div5 = [DfaState(f"q{i}", is_accepting=i == 0) for i in range(5)]
for i, s in enumerate(div5):
    s.transitions["0"], s.transitions["1"] = div5[2 * i % 5], div5[(2 * i + 1) % 5]
save_automaton_to_file(Dfa(div5[0], div5), HERE / "div5", file_type="dot")

counter = [MooreState(f"c{i}", output=("low", "mid", "high")[i % 3]) for i in range(6)]
for i, s in enumerate(counter):
    s.transitions["inc"], s.transitions["reset"] = counter[(i + 1) % 6], counter[0]
save_automaton_to_file(MooreMachine(counter[0], counter), HERE / "counter6", file_type="dot")
