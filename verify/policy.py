"""Which checks a model gets: its certificate where the certifier covers it, then sampling.

One policy for ``compile --verify``, ``verify`` and the zoo: a model the certificate proves
exact is only cross-checked by a few samples (:data:`CROSS_CHECK`); any other is checked by
:data:`VERIFY_SAMPLING`.  The certificate reads named residual dims and 0/1 copying weights,
so it does not cover a model in a rotated basis (``constructions/basis.py``): for those
:func:`certificate` reports ``supported: False`` with the reason, and sampling decides.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable

from constructions.basis import basis_of
from constructions.model import CompiledTransformer

from .certify import SCHEMA, Certificate, certify
from .check import VerificationResult, verify

@dataclass(frozen=True)
class Sampling:
    """A sampled check's size: ``samples`` random sequences, exhaustive enumeration up to
    ``exhaustive_budget`` sequences, at most ``family_limit`` sequences per adversarial family
    (None: every one), and the layer-wise invariants when ``layerwise``.  :meth:`options` are
    :func:`verify.check.verify`'s keyword arguments."""

    samples: int
    exhaustive_budget: int
    family_limit: int | None
    layerwise: bool = True

    def options(self) -> dict[str, Any]:
        """``verify``'s keyword arguments for this check."""
        return asdict(self)

    def at_most(self, other: Sampling) -> Sampling:
        """This check, no larger than ``other`` in any count (a limit of None is no limit)."""
        def low(a: int | None, b: int | None) -> int | None:
            return a if b is None else b if a is None else min(a, b)
        return Sampling(min(self.samples, other.samples),
                        min(self.exhaustive_budget, other.exhaustive_budget),
                        low(self.family_limit, other.family_limit), self.layerwise and other.layerwise)


VERIFY_SAMPLING = Sampling(samples=64, exhaustive_budget=1 << 15, family_limit=None)
"""``verify``'s sampled check without a certificate (its option defaults)."""
COMPILE_SAMPLING = Sampling(samples=16, exhaustive_budget=4096, family_limit=4)
"""``compile --verify``'s modest sampled check without a certificate (its option defaults), and the zoo's."""
SAMPLINGS: dict[str, Sampling] = {"compile": COMPILE_SAMPLING, "verify": VERIFY_SAMPLING}
"""The sampled checks by the command that uses them (a zoo config's ``sampling``)."""
CROSS_CHECK = Sampling(samples=8, exhaustive_budget=1024, family_limit=2, layerwise=False)
"""The sampled check that accompanies a passing certificate (``verify``, ``compile``, the zoo):
the certificate is the proof; the samples only cross-check the model against the simulation.
The layer-wise invariants are left out: the certificate proves every layer's declared values
on every input, which the invariants only sample."""
ROTATED = ("the certificate covers standard-basis models only (it checks 0/1 copying weights on named residual "
           "dims); this model's residual is in a rotated basis, so it is verified by sampling")


def certificate(model: CompiledTransformer, with_obligations: bool = False) -> Certificate:
    """``certify(model)``, or for a rotated model the refusal (``supported: False``, :data:`ROTATED`)."""
    if basis_of(model.meta) is not None:
        return Certificate(schema=SCHEMA, method=model.meta.get("method"), max_len=model.max_len,
                           dtype=model.config.dtype, certified=False, supported=False, reason=ROTATED)
    return certify(model, with_obligations)


def certificate_failed(cert: Certificate | None) -> bool:
    """A certificate that was attempted for a supported construction and did not hold: the
    model may be wrong on some input, so the verdict is 'not exact' (exit 1)."""
    return cert is not None and cert.failed


def sampling_for(cert: Certificate | None, sampling: Sampling = VERIFY_SAMPLING) -> Sampling:
    """The sampled check that goes with ``cert``: a cross-check (no larger than ``sampling``)
    after a proof, else ``sampling``."""
    if cert is not None and cert.certified:
        return CROSS_CHECK.at_most(sampling)
    return sampling


def check(model: CompiledTransformer, *, seed: int = 0, prove: bool = True, sampling: Sampling = VERIFY_SAMPLING,
          progress: Callable[[str, int, int], None] | None = None) -> VerificationResult:
    """The certificate (when ``prove``) and the sampled check it calls for (``sampling``, or the
    cross-check after a proof); the result carries the certificate, and ``exact`` only when
    both hold (a certificate that is not supported leaves the verdict to sampling)."""
    cert = certificate(model) if prove else None
    result = verify(model, seed=seed, **sampling_for(cert, sampling).options(), progress=progress)
    result.certificate = cert
    result.exact = result.exact and not certificate_failed(cert)
    return result
