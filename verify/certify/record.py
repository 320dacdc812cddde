"""A certificate as data: what :func:`verify.certify.certify` returns, and its JSON.

The JSON (:meth:`Certificate.to_json`) is the object ``shortcut certify --json`` prints and
``-o`` writes, with the keys in the order of the fields below and only the fields a run set
(a field left None is absent); :meth:`Certificate.from_json` reads it back.  What a checkpoint
stores is the smaller summary :func:`verify.certify.certificate_summary` makes of one.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

ALWAYS = ("schema", "method", "max_len", "dtype", "certified")
"""The keys every certificate's JSON has (a refusal before any proof included)."""


@dataclass
class Certificate:
    """The certificate of one model, or why there is none.

    schema, method, max_len, dtype: what it is about; paths, assumptions: the attention paths it
    covers and the arithmetic it assumes; weights_sha256 / obligations_sha256: what it is bound to;
    unfolded: set when the model is a standard-shape unfolding certified through the folded
    model; promise: the promise of legal inputs it holds under; obligations: the declared program
    (``with_obligations``); program: the proof that the program is the automaton; layers: per
    layer, its classes, radii and margins; readout: the readout's smallest margin; certified:
    the verdict; supported (False: the checker does not cover this model) and weights_proved
    (the weights run the program, which is not proved against the automaton), failure (the
    obligation that fails: where, detail) and reason when it is not certified; seconds: the
    checker's time; matches / mismatch: a re-check against a stored certificate (:func:`recheck`)."""

    schema: str
    method: str | None
    max_len: int
    dtype: str
    paths: list[str] | None = None
    assumptions: str | None = None
    weights_sha256: str | None = None
    unfolded: dict[str, Any] | None = None
    obligations_sha256: str | None = None
    promise: str | None = None
    obligations: dict[str, Any] | None = None
    program: dict[str, Any] | None = None
    layers: list[dict[str, Any]] | None = None
    readout: dict[str, Any] | None = None
    certified: bool = False
    supported: bool | None = None
    weights_proved: bool | None = None
    failure: dict[str, str] | None = None
    reason: str | None = None
    seconds: float | None = None
    matches: bool | None = None
    mismatch: list[str] | None = None

    @property
    def failed(self) -> bool:
        """Attempted for a supported construction and did not hold: the model may be wrong on
        some input (a certificate the checker does not support decides nothing)."""
        return not self.certified and self.supported is not False

    def to_json(self) -> dict[str, Any]:
        """The JSON object: :data:`ALWAYS`, then every other field that is set, in field order."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name in ALWAYS or getattr(self, f.name) is not None}

    @staticmethod
    def from_json(d: dict[str, Any]) -> Certificate:
        """The certificate of its JSON object (keys it does not name are ignored)."""
        names = {f.name for f in fields(Certificate)}
        return Certificate(**{k: v for k, v in d.items() if k in names})
