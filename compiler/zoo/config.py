"""A zoo config (TOML or JSON) and the deterministic list of models it names.

A config has a zoo ``seed``, optional ``defaults`` and a list of ``family`` tables::

    seed = 0
    [defaults]
    max_len = [64]            # values drawn per model
    methods = ["auto"]
    readouts = ["states"]     # "labels": random output labels are drawn for the states
    bases = ["standard"]      # "orthogonal": a random rotation (constructions/rotate.py)
    traces = 8                # sample inputs traced per model
    sampling = "compile"      # the sampled check: compile's modest one, or "verify" (shortcut verify's)

    [[family]]
    name = "groups"           # the models' id prefix: groups-00000, groups-00001, ...
    class = "group"           # a random class (compiler/automata/families.py), "regex" or "catalog"
    count = 150
    states = [2, 6]           # ranges for the random classes
    letters = [2, 3]

``class = "regex"`` takes ``patterns`` (and ``alphabet``, comma-separated), ``class = "catalog"``
takes ``names``; both cycle through their list.  Any default can be set per family.

:func:`jobs` lists the models in their fixed order (families in config order, then index);
each model's seed comes from (zoo seed, family name, index) alone, so neither the order of
execution, the worker count nor another family's settings can change its bytes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from constructions.basis import BASES
from constructions.labels import LABELS, READOUTS
from verify.policy import SAMPLINGS

from ..automata.errors import InputError
from ..automata.reading import MiB, parse_json, parse_toml, read_text
from ..automata.families import CLASSES, MAX_LETTERS, MAX_STATES, MEALY_TCP, Sizes, check_sizes
from ..pipeline import MAX_LEN_LIMIT, methods

REGEX, CATALOG = "regex", "catalog"
MEALY = ("mealy", MEALY_TCP)
"""The Mealy classes: their models read the transitions' outputs unless the family sets ``readouts``."""
KINDS = (*CLASSES, REGEX, CATALOG)
MAX_MODELS = 100_000
"""Most models one config may name (the sum of its families' counts)."""
MAX_ZOO_LEN = 1024
"""Largest max_len a zoo model may have (a zoo is for many small models; compile larger ones alone)."""
MAX_TRACES = 64
"""Most sample inputs traced per model."""
DEFAULTS = {"max_len": [64], "methods": ["auto"], "readouts": ["states"], "bases": ["standard"], "traces": 8,
            "sampling": "compile"}
FAMILY_KEYS = {"name", "class", "count", "states", "letters", "patterns", "alphabet", "names", *DEFAULTS}


@dataclass(frozen=True)
class Family:
    """One family of models: its class, how many, the ranges and options drawn per model."""

    name: str
    kind: str
    count: int
    sizes: Sizes = Sizes()
    max_len: tuple[int, ...] = (64,)
    methods: tuple[str, ...] = ("auto",)
    readouts: tuple[str, ...] = ("states",)
    bases: tuple[str, ...] = ("standard",)
    traces: int = 8
    sampling: str = "compile"
    patterns: tuple[str, ...] = ()
    alphabet: str | None = None
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Job:
    """One model of the zoo: its id, its place in the order, its family and its own seed."""

    id: str
    index: int
    family: Family
    number: int
    seed: int


@dataclass(frozen=True)
class Config:
    """A parsed zoo config."""

    seed: int
    families: tuple[Family, ...] = field(default_factory=tuple)

    def digest(self) -> str:
        """sha256 of the parsed config (canonical JSON): the manifest records it."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()


CONFIG_MAX_BYTES = MiB
"""Largest zoo config read (a config names families, not models: a few kB)."""


def _read(path: Path) -> dict[str, Any]:
    """The config file as a dict (TOML by default, JSON for a ``.json`` file), read and parsed
    within the bounds of :mod:`compiler.automata.reading`."""
    what = f"the zoo config {str(path)!r}"
    text = read_text(path, CONFIG_MAX_BYTES, "zoo config", InputError)
    data = parse_json(text, what, InputError) if path.suffix.lower() == ".json" else parse_toml(text, what, InputError)
    if not isinstance(data, dict):
        raise InputError(f"{what} must be an object with 'seed' and 'family' entries")
    return data


def _ints(value: Any, what: str, low: int, high: int) -> tuple[int, ...]:
    """A non-empty list of integers in [low, high] (a bare integer is a list of one)."""
    values = value if isinstance(value, list) else [value]
    if not values or not all(type(v) is int and low <= v <= high for v in values):
        raise InputError(f"{what} must be an integer or a list of integers from {low} to {high}, got {value!r}")
    return tuple(values)


def _choices(value: Any, what: str, allowed: list[str]) -> tuple[str, ...]:
    """A non-empty list of names from ``allowed`` (a bare name is a list of one)."""
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, str) and v in allowed for v in values):
        raise InputError(f"{what} must name one or more of {allowed}, got {value!r}")
    return tuple(values)


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise InputError(f"{what} must be a non-empty list of strings, got {value!r}")
    return tuple(value)


def _alphabet(value: Any, name: str) -> str | None:
    """A regex family's alphabet: None (the letters its patterns use) or comma-separated letters."""
    if value is not None and not (isinstance(value, str) and value.strip()):
        raise InputError(f"{name}: alphabet must be comma-separated letters, got {value!r}")
    return value


def _range(value: Any, what: str, top: int) -> tuple[int, int]:
    if not (isinstance(value, list) and len(value) == 2):
        raise InputError(f"{what} must be a range [low, high], got {value!r}")
    return _ints(value[0], what, 1, top)[0], _ints(value[1], what, 1, top)[0]


def _family(raw: Any, defaults: dict[str, Any], where: str) -> Family:
    """One ``[[family]]`` table, checked, with the defaults filled in."""
    if not isinstance(raw, dict):
        raise InputError(f"{where} must be a table")
    unknown = sorted(set(raw) - FAMILY_KEYS)
    if unknown:
        raise InputError(f"{where} has unknown keys {unknown}; known: {sorted(FAMILY_KEYS)}")
    name, kind = raw.get("name"), raw.get("class")
    if not (isinstance(name, str) and name.replace("-", "").replace("_", "").isalnum()):
        raise InputError(f"{where} needs a 'name' of letters, digits, '-' and '_', got {name!r}")
    if kind not in KINDS:
        raise InputError(f"{where} ({name}) has class {kind!r}; choose one of {list(KINDS)}")
    if kind == REGEX and "patterns" not in raw or kind == CATALOG and "names" not in raw:
        raise InputError(f"{name}: class {kind} needs {'patterns' if kind == REGEX else 'names'}")
    opts = {**defaults, **({"readouts": [LABELS]} if kind in MEALY else {}), **raw}  # a Mealy family: its outputs
    sizes = Sizes(_range(opts.get("states", [2, 6]), f"{name}: states", MAX_STATES),
                  _range(opts.get("letters", [2, 3]), f"{name}: letters", MAX_LETTERS))
    try:
        check_sizes(sizes)
    except Exception as e:
        raise InputError(f"{name}: {e}") from None
    family = Family(
        name=name, kind=kind, count=_ints(raw.get("count"), f"{name}: count", 1, MAX_MODELS)[0], sizes=sizes,
        max_len=_ints(opts["max_len"], f"{name}: max_len", 1, min(MAX_ZOO_LEN, MAX_LEN_LIMIT)),
        methods=_choices(opts["methods"], f"{name}: methods", methods()),
        readouts=_choices(opts["readouts"], f"{name}: readouts", list(READOUTS)),
        bases=_choices(opts["bases"], f"{name}: bases", list(BASES)),
        traces=_ints(opts["traces"], f"{name}: traces", 0, MAX_TRACES)[0],
        sampling=_choices(opts["sampling"], f"{name}: sampling", list(SAMPLINGS))[0],
        patterns=_strings(raw["patterns"], f"{name}: patterns") if kind == REGEX else (),
        alphabet=_alphabet(raw.get("alphabet"), name) if kind == REGEX else None,
        names=_strings(raw["names"], f"{name}: names") if kind == CATALOG else ())
    return family


def parse(data: dict[str, Any], where: str = "the zoo config") -> Config:
    """A :class:`Config` from the config's data; InputError (one line) naming what is wrong."""
    unknown = sorted(set(data) - {"seed", "defaults", "family"})
    if unknown:
        raise InputError(f"{where} has unknown keys {unknown}; known: ['defaults', 'family', 'seed']")
    seed = _ints(data.get("seed", 0), "seed", 0, 2**63 - 1)[0]
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict) or set(defaults) - set(DEFAULTS):
        raise InputError(f"{where}: defaults may set {sorted(DEFAULTS)} only")
    raw = data.get("family")
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{where} names no models: add [[family]] tables")
    families = tuple(_family(f, {**DEFAULTS, **defaults}, f"family {i + 1}") for i, f in enumerate(raw))
    names = [f.name for f in families]
    if len(set(names)) != len(names):
        raise InputError(f"{where}: family names must be unique, got {names}")
    if sum(f.count for f in families) > MAX_MODELS:
        raise InputError(f"{where} names {sum(f.count for f in families):,} models, over the limit of {MAX_MODELS:,}")
    return Config(seed, families)


def load(path: "str | Path") -> Config:
    """Read and check a config file (TOML, or JSON for ``*.json``)."""
    path = Path(path)
    return parse(_read(path), f"the zoo config {str(path)!r}")


def job_sha256(job: Job) -> str:
    """sha256 of everything that decides a model's bytes (its id, seed and family settings): a
    record is reused on resume only when it was made for this digest."""
    return hashlib.sha256(json.dumps(asdict(job), sort_keys=True).encode()).hexdigest()


def model_seed(zoo_seed: int, family: str, number: int) -> int:
    """A model's own seed: from the zoo seed, its family's name and its number in the family."""
    digest = hashlib.sha256(f"shortcut-zoo:{zoo_seed}:{family}:{number}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def jobs(config: Config, limit: int | None = None) -> list[Job]:
    """Every model of the config in its fixed order (the first ``limit`` of them)."""
    out: list[Job] = []
    for f in config.families:
        for i in range(f.count):
            if limit is not None and len(out) >= limit:
                return out
            out.append(Job(f"{f.name}-{i:05d}", len(out), f, i, model_seed(config.seed, f.name, i)))
    return out
