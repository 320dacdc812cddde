"""Compile a catalog automaton, run it, look inside, and verify it.

    python examples/compile_and_inspect.py

``--method auto`` picks the construction (today: krohn-rhodes for D8, a solvable
group); the script prints what it got and decodes that construction's named
residual subspaces, then compiles the scan (Theorem 10) too and decodes its
running transition map after layer 2.
"""

import torch

import compiler
from verify.check import verify

WORD = ["advance", "advance", "reverse", "advance"]

model = compiler.compile_automaton("dihedral:4", max_len=64)  # D8
info = model.info()
print(f"auto picked {info['method']}: {info['n_layers']} layers, {info['n_params']} params ({info['why']})")
print("states:", model.simulate([WORD])[0])

# Every residual dimension has a name; decode the named subspaces after the last block.
tokens = torch.tensor([model.automaton.symbol_ids(WORD)])
logits, cache = model.run_with_cache(tokens)
final = cache["hook_resid_final"][0]  # rows = BOS, t=1..4
if info["method"] == "krohn-rhodes":
    names = [n for n in model.meta["subspaces"] if n.startswith("kr:") and n.endswith(".new")]
    print("cascade counters after the update (rows = BOS, t=1..4):")
else:  # the scan: the prefix's transition map as integer codes
    names = ["scan:map"]
    print("transition map of the prefix after the last block (rows = BOS, t=1..4):")
for name in names:
    print(f"  {name}: {final[:, model.subspace(name)].round().int().flatten().tolist()}")

scan = compiler.compile_automaton("dihedral:4", max_len=64, method="scan")
_, scan_cache = scan.run_with_cache(tokens)
print(f"scan: {scan.info()['n_layers']} layers; scan:map after layer 2 (rows = BOS, t=1..4):")
print(scan_cache["blocks.1.hook_resid_post"][0][:, scan.subspace("scan:map")].round().int())

result = verify(model)
print("exact:", result.exact, "| positions checked:", result.n_positions)
compiler.save(model, "d8.safetensors")
print("saved d8.safetensors; reload with compiler.load('d8.safetensors')")
