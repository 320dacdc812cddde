"""Would a residue one-hot shrink the standard gridworld?  The certificate's own float bound says no.

The standard gridworld's MLP 1 (constructions/gridworld_standard.py) writes a one-hot of z over
all 2T + 1 values from step pairs on x = z + T.  Summing its output dims per residue class
(dim r = sum over v = r mod M of step_v - step_(v+1)) is the same hidden layer with an M-dim
output: narrower codes and heads.  This script builds that folded MLP for each M and asks
``verify.certify.affine`` -- the rule the certificate proves lookups with -- for each residue
dim's error bound at every z in -T..T (z known to within the prefix sum's float32 bound), then
the layer-2 score error E those codes give (the query's and key's hot dims plus the sum over
the M dims of products of errors, maximised over every pair of values), against the quarter
recency step lambda / 4 = 1 / (8 (T + 1)) the heads need.  A folded dim sums about 8T / M step
units of size up to 8T in an order the bound cannot assume, so its error grows like T^3 / M^2:
every M below 2T + 1 is worse than none.  The measured column is float32's actual largest error
of the folded dims on z moved by up to the prefix bound (20 draws): far smaller, but not proved.

    python benchmarks/gridworld_residue_fold.py --out benchmarks/results/gridworld_residue_fold.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

from constructions.gadgets import onehot_bias, step_units
from constructions.gridworld import prefix_blocks
from constructions.krohn_rhodes_layout import prefix_sum_bounds
from verify.certify.affine import affine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, finish, header  # noqa: E402

EPS = 2.0**-23
NOTE = """

Columns: M the modulus (2T + 1: no fold, the standard build as it is); hidden units, MLP 1's
(the same for every M); z's bound, the prefix sum's float32 error bound MLP 1 is proved under;
worst dim error, the largest of `verify.certify.affine`'s bounds over the code dims and every z;
E, the layer-2 score error per unit of beta those bounds give, maximised over every pair of
values (the hot dims' errors plus the sum over the M dims of products of errors); certifiable,
E <= lambda / 4, what the build needs (gridworld_standard.refusal); measured, float32's actual
largest error over the dims (20 noisy draws of every z).

A folded dim sums about 8T / M step units of size up to 8T, and the bound may assume no order
of the sum: gamma over its live terms times their total, so the error grows as T^3 / M^2, and E,
whose products of errors run over fewer but larger dims, grows as M shrinks. No fold certifies
at T = 100 (M = 128 is 1.8x over), and at T = 512 not even the unfolded one-hot does (48x): the
one-hidden-layer gridworld cannot reach T = 512 in float32 this way, and the standard shape
keeps the default build unfolded there (6 blocks). The measured errors, about 1e-7 at every M,
say the arithmetic itself is fine: the order-free bound is what refuses it."""


def folded(T: int, M: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """MLP 1 of the standard build with its 2T + 1 output dims summed per residue of z mod M."""
    n = 2 * T + 1
    w, b, combine = step_units(n)
    fold = np.zeros((n, M))
    fold[np.arange(n), (np.arange(n) - T) % M] = 1.0
    return [w[None, :], combine @ fold], [b + w * T, onehot_bias(n) @ fold]


def score_error(err: np.ndarray, T: int, M: int) -> float:
    """Max over query value a and key value c of E: the hot dims' errors and sum_r |e_a,r| |e_c,r|."""
    hot = err[np.arange(2 * T + 1), np.arange(-T, T + 1) % M]
    return float((err @ err.T + hot[:, None] + hot[None, :]).max())


def measured(weights: list[np.ndarray], biases: list[np.ndarray], T: int, M: int, r: float) -> float:
    """float32's largest error of the folded dims over every z moved by up to r (20 draws)."""
    z = np.arange(-T, T + 1, dtype=np.float64)
    clean = np.eye(M)[(z.astype(int)) % M]
    W = [torch.tensor(x, dtype=torch.float32) for x in weights]
    B = [torch.tensor(x, dtype=torch.float32) for x in biases]
    worst, rng = 0.0, np.random.default_rng(0)
    for _ in range(20):
        x = torch.tensor((z + rng.uniform(-r, r, z.shape))[:, None], dtype=torch.float32)
        out = torch.relu(x @ W[0] + B[0]) @ W[1] + B[1]
        worst = max(worst, float(np.abs(out.double().numpy() - clean).max()))
    return worst


def row(T: int, M: int) -> str:
    r = sum(prefix_sum_bounds(2, T, prefix_blocks(T), EPS))
    weights, biases = folded(T, M)
    x = np.arange(-T, T + 1, dtype=np.float64)[:, None]
    out, err = affine(x, np.array([r]), weights, biases, EPS / 2, 24)
    assert np.array_equal(out, np.eye(M)[np.arange(-T, T + 1) % M]), "the folded MLP is not the residue one-hot"
    E, quarter = score_error(err, T, M), 1.0 / (8 * (T + 1))
    return (f"| {T} | {M} | {weights[0].shape[1]} | {r:.1e} | {err.max():.2e} | {E:.2e} | {quarter:.2e} | "
            f"{E / quarter:.3g} | {'yes' if E <= quarter else 'no'} | {measured(weights, biases, T, M, r):.1e} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    t0 = time.perf_counter()
    lines = [header("The standard gridworld's one-hot folded into residues mod M: the certificate's float32 bound"), "",
             "| T | M | hidden units | z's bound | worst dim error (proved) | E (proved) | lambda / 4 "
             "| E / (lambda / 4) | certifiable | worst dim error (measured) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for T in (100, 512):
        for M in (5, 10, 16, 32, 64, 128, 2 * T + 1):
            if M <= 2 * T + 1:
                emit(lines, row(T, M))
    finish(lines, t0, args.out, NOTE)


if __name__ == "__main__":
    main()
