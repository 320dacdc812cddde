"""Shared helpers for the CLI tests: a checkpoint's safetensors header, read and rewritten.

The format is an 8-byte little-endian header length, the JSON header (tensor entries with
byte ranges relative to the data section, and ``__metadata__`` with the ``config`` and
``meta`` JSON strings), then the data; rewriting the header leaves the data untouched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest


def read_header(data: bytes) -> tuple[dict[str, Any], bytes]:
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def write_header(header: dict[str, Any], body: bytes) -> bytes:
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + body


def edit_meta(src: Path, dst: Path, change: Callable[[dict[str, Any]], None], key: str = "meta") -> Path:
    """Copy checkpoint ``src`` to ``dst`` with ``change`` applied to its ``meta`` (or ``config``) JSON."""
    header, body = read_header(src.read_bytes())
    obj = json.loads(header["__metadata__"][key])
    change(obj)
    header["__metadata__"][key] = json.dumps(obj)
    dst.write_bytes(write_header(header, body))
    return dst


def tensor_offset(src: Path, name: str) -> int:
    """File offset of tensor ``name``'s first byte."""
    data = src.read_bytes()
    header, _ = read_header(data)
    return 8 + int.from_bytes(data[:8], "little") + header[name]["data_offsets"][0]


@pytest.fixture(scope="session")
def checkpoint_tools():
    """The helpers above, for tests in any module."""
    return {"read_header": read_header, "write_header": write_header, "edit_meta": edit_meta,
            "tensor_offset": tensor_offset}
