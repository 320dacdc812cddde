"""Compile a catalog automaton, run it, look inside, and verify it.

    python examples/compile_and_inspect.py
"""

import torch

import compiler
from verify.check import verify

model = compiler.compile_automaton("dihedral:4", max_len=64)  # D8, 6 layers
print(model.info())
print(model.simulate([["advance", "advance", "reverse", "advance"]]))

# Every residual dimension has a name; decode the running transition map after layer 2.
tokens = torch.tensor([[0, 0, 1, 0]])
logits, cache = model.run_with_cache(tokens)
labels = model.meta["residual_labels"]
maps = [i for i, lab in enumerate(labels) if lab.startswith("scan:map[")]
print("scan:map after layer 2 (rows = BOS, t=1..4):")
print(cache["blocks.1.hook_resid_post"][0][:, maps].round())

result = verify(model)
print("exact:", result.exact, "| positions checked:", result.n_positions)
compiler.save(model, "d8.safetensors")
print("saved d8.safetensors; reload with compiler.load('d8.safetensors')")
