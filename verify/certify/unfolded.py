"""A standard-shape model that was unfolded (``constructions/unfold.py``) is certified through the
model it was unfolded from.

:func:`folded` rebuilds that model from the checkpoint's spec and plan (its construction's program,
with the model's own options) and requires the given model to be its unfolding, tensor for tensor
(``torch.equal``, same config).  The certificate of the folded model then holds for the unfolded
one: every nonzero floating-point operation the unfolded model performs is one the folded model
performs on the same operands -- the same dot products with exact zero terms added (zero-padded
rows and columns), the scratch carrying a pre-activation or an activation exactly (added to a
zero residual entry, read back through an identity, cleared as ``v + (-v) = 0``), a unit that
exits early writing at its own stage the sum its identity copies (relu(h) = h, h >= 0) would have
written at the MLP's end, on dims no other stage writes and nothing reads in between -- and the
certificate's rounding bounds hold for any summation order or blocking (``state.ASSUMPTIONS``),
so they hold for the unfolded model's sums as well.  Balancing (``constructions/balance.py``) keeps
this: it moves units only where every residual dim keeps the order of its accesses, and splits a sum
only where nothing wrote its dims before it and nothing reads or writes them between its first and last
piece, so the readers see the same terms summed in another blocking (the first piece added to a zero).
"""

from __future__ import annotations

from typing import Any

import torch

from compiler.automata.spec import from_dict
from constructions import registry
from constructions.assemble import assemble
from constructions.construction import BuildOptions
from constructions.model import CompiledTransformer
from constructions.unfold import unfold

from .state import CertificateFailure

UNFOLDED = "unfolded"
"""The meta key :func:`constructions.unfold.unfold` writes (the blocks' origins)."""

REWRITTEN = (UNFOLDED, "layout", "residual_labels", "subspaces", "layers", "verification", "header_sha256")
"""The meta entries unfolding rewrites (or a compile stamps), rebuilt rather than copied when folding."""


def folded(model: CompiledTransformer) -> CompiledTransformer:
    """The model ``model`` was unfolded from, rebuilt from its spec and plan; CertificateFailure
    when ``model`` is not exactly that model's unfolding (another config or any other tensor)."""
    construction, plan = registry.plan_of(model)
    program, built = construction.build(from_dict(model.metadata.automaton), plan, BuildOptions.of_model(model))
    meta: dict[str, Any] = {k: v for k, v in model.meta.items() if k not in REWRITTEN}
    original = assemble(program, max_len=model.max_len, dtype=model.W_E.dtype, meta={**meta, **built})
    again = unfold(original)
    mine, theirs = model.state_dict(), again.state_dict()
    same = again.config == model.config and mine.keys() == theirs.keys() and all(
        torch.equal(mine[k], theirs[k]) for k in mine)
    if not same:
        raise CertificateFailure(UNFOLDED, f"the model is not the unfolding of its {construction.name} program "
                                 f"({len(original.blocks)} layers, rebuilt from its spec and plan): its config or "
                                 f"weights differ")
    return original
