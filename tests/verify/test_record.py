"""The certificate as data (verify/certify/record.py): its JSON has the keys, in the order, that
``shortcut certify --json`` and ``-o`` have always written, and reads back to the same certificate."""

from __future__ import annotations

import json

import torch

import compiler
from verify.certify import Certificate, certificate_summary, certify

PROVED = ["schema", "method", "max_len", "dtype", "paths", "assumptions", "weights_sha256", "obligations_sha256",
          "program", "layers", "readout", "certified", "seconds"]
REFUSED = ["schema", "method", "max_len", "dtype", "paths", "assumptions", "weights_sha256", "certified",
           "supported", "reason", "seconds"]


def test_a_certificates_json_keeps_its_keys_order_and_round_trips() -> None:
    model = compiler.compile_automaton("nth-last:3", max_len=16, method="lookback")
    cert = certify(model)
    assert cert.certified is True and list(cert.to_json()) == PROVED
    assert Certificate.from_json(json.loads(json.dumps(cert.to_json()))) == cert
    summary = certificate_summary(cert)
    assert summary["certified"] is True and "seconds" not in summary and summary["max_radius"] >= 0.0
    wide = compiler.compile_automaton("nth-last:3", max_len=16, method="lookback", dtype=torch.float64)
    refused = certify(wide)
    assert list(refused.to_json()) == REFUSED and refused.supported is False and not refused.failed
    assert "float64" in (refused.reason or "")
