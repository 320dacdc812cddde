"""Certificates: a proof that a compiled model is exact on every input up to max_len.

Sampling can miss a model that is wrong on one rare input; a certificate cannot.  It is an
abstract interpretation of the model's forward pass over *all* inputs of every length
<= max_len, computed from the tensors alone, against the construction's obligations
(``constructions/obligations/``: the discrete program the weights must run).

Abstract state.  Every residual dim is either *fixed* (input-independent and never written:
the position code, ``one``, ``bos``; its value at position t is known exactly) or *tracked*
(a subspace the obligations name).  Positions fall into *classes*; for each class and tracked
subspace the state holds the finite set of codes the subspace may hold there (per dim, and
jointly where the set is small) and an error radius per dim: at every position of the class,
for every input, the residual is within the radius of one of the codes -- the one the
obligations' program computes.  Position 0 (BOS) is a class of its own.

Rules (each a lemma the checker applies to the tensors):

* Embedding: each token's row on the tracked dims is its declared code (the difference, if
  any, becomes the radius); the position table is 0 there.
* A head whose query and key read only fixed dims (positional): its scores depend on (t, s)
  alone.  For every t the declared key must beat every other causal key by a positive gap
  after the scores' rounding bound; the leaked mass is at most sum_s exp(-gap_s), so the
  copied code is within r_key + leak * (spread + 2R) + rounding of the key's code.  A head
  must copy its source subspace into its destination exactly (W_V W_O the identity there).
* MLP, :class:`~constructions.obligations.Lookup`: for every combination of the codes it reads
  (per class: the product of the fetched sets, so exactly the windows that occur), the
  network is evaluated with affine error bounds -- the error of each hidden unit is kept as
  a linear form in the inputs' errors while its activation is fixed, so a pair of step units
  cancels exactly as in exact arithmetic; a unit whose sign the error could flip adds its
  whole possible deviation as fresh noise -- and the result must be the table's code.
* MLP, :class:`~constructions.obligations.SuffixLookup` (:mod:`.suffix`): never on the product
  of the codes read -- each input's terms on each of its codes, each second-layer unit exactly 0
  off its key (the key units lemma), then one case per longest key node of the trie.
* MLP, :class:`~constructions.obligations.Compose`: per output point q and value g of the
  fetched code, every hidden unit reads g and at most one other dim, so the deviation from
  the declared f(g(q)) and the error's coefficients are sums of one-variable terms; their
  extremes over every map are sums of per-term extremes, each group of units tabulated once
  for the model (its weights recur in every output and layer), the radii added per output
  (:mod:`.composition`).
* Readout: for every final code the declared output's logit, less its error bound, beats
  every other logit plus its bound.

Floating point: every dot product of n terms carries gamma_n = n u / (1 - n u) times the sum
of its terms' magnitudes (any summation order or blocking), every addition u times its
result; softmax and the weighted sum of values carry gamma_(4(T+1)+16) times the largest
value (exp, max-subtraction, the normalising sum, the division and an online softmax's
rescalings, each within a few ulps).  u is the model dtype's unit roundoff plus float64's
(the checker's own sums).  This holds for the fused (``scaled_dot_product_attention``) and
the explicit path alike, on hardware with IEEE round-to-nearest arithmetic (no TF32 or other
reduced-precision matrix products).

A certificate that fails names the obligation (layer, head or MLP, position or code
combination) and the bound that does not hold; nothing falls back to sampling.

Modules: :mod:`.state` (the abstract state, the tensors as arrays, the float lemmas),
:mod:`.heads` (positional, most-recent-flag and averaging heads), :mod:`.lookups` (lookup and step
MLPs), :mod:`.compose` (side-by-side MLPs, lookups after a composition), :mod:`.composition` (the scan's composition), :mod:`.recency` and :mod:`.after_races`
(recency heads, races, and lookups fused after them), :mod:`.checkers` (each MLP kind's rule, in one
table, and a layer's check), :mod:`.labels` (a label model's obligations), :mod:`.certificate` (the readout, ``certify`` and stored certificates),
:mod:`.record` (the :class:`Certificate` it returns, and its JSON).
"""

from .certificate import certificate_summary, certificate_text, certify, lead_verdict, obligations_of, recheck
from .record import Certificate
from .state import ASSUMPTIONS, PATHS, PRECISION, SCHEMA, CertificateFailure, NotCertifiable, gamma, quantum, snaps

__all__ = ["ASSUMPTIONS", "PATHS", "PRECISION", "SCHEMA", "Certificate", "CertificateFailure", "NotCertifiable", "certificate_summary",
           "certificate_text", "certify", "gamma", "lead_verdict", "obligations_of", "quantum", "recheck", "snaps"]
