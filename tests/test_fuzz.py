"""Property-based fuzzing of the CLI's exit-code contract (hypothesis).

Generated: malformed specs (JSON text and dicts, mutated valid specs, raw bytes), CLI
argument lists, input files, and corrupted checkpoints (bytes flipped in the header or the
tensors, truncation, header values replaced).  Every run must end with status 0, 1 or 2
(never 3, an internal error), with no traceback anywhere, and a status 2 must say one
line starting with ``error:``.  Valid random automata (``catalog.random_automaton``)
compile and verify exact.

The default run is about 300 cases in well under a minute (derandomized, so CI sees the
same cases every time); ``-m slow`` runs each property again with ``SLOW_FACTOR`` times
as many random cases.  ``SHORTCUT_FUZZ_STATS=FILE`` writes the counts (cases, exit
statuses, tracebacks) per test as JSON lines.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.automata.catalog import random_automaton
from compiler.automata.errors import ShortcutError
from compiler.automata.load import load_spec
from compiler.automata.spec import KNOWN_FIELDS, Semiautomaton
from compiler.cli import main

SLOW_FACTOR = 10
SCALES = [pytest.param(1, id="default"), pytest.param(SLOW_FACTOR, id="slow", marks=pytest.mark.slow)]


def fuzz_settings(n: int, scale: int) -> settings:
    """``n`` cases by default (derandomized); ``n * scale`` random ones under ``-m slow``."""
    return settings(max_examples=n * scale, deadline=None, derandomize=scale == 1, database=None,
                    suppress_health_check=list(HealthCheck))


# --- running the CLI in-process and checking the contract ---------------------------------------

STATS: dict[str, Counter] = {}
CWD: list[Path] = []
"""The fuzzed commands run in the module's temporary directory (a relative `-o` or `--dot` lands there)."""


def run_cli(argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    """``main(argv)`` with stdin/stdout/stderr captured (SystemExit from --help/--version is 0)."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.chdir(CWD[-1]), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 2
    finally:
        sys.stdin = old_stdin
    return code, out.getvalue(), err.getvalue()


def check_contract(name: str, argv: list[str], stdin: str = "", allowed: tuple[int, ...] = (0, 1, 2)) -> int:
    """Run ``argv`` and assert the exit-code contract; returns the status."""
    code, out, err = run_cli(argv, stdin)
    tally = STATS.setdefault(name, Counter())
    tally["cases"] += 1
    tally[f"exit {code}"] += 1
    tally["tracebacks"] += ("Traceback" in out) + ("Traceback" in err)
    assert "Traceback" not in out + err, (argv, err)
    assert code in allowed, (argv, code, err)
    if code == 2:
        lines = [line for line in err.splitlines() if not line.startswith("warning: ")]
        assert len(lines) == 1 and lines[0].startswith("error: "), (argv, err)
    return code


@pytest.fixture(scope="module", autouse=True)
def _write_stats():
    yield
    path = os.environ.get("SHORTCUT_FUZZ_STATS")
    if path:
        with open(path, "a") as f:
            for name, tally in sorted(STATS.items()):
                f.write(json.dumps({"test": name, **tally}) + "\n")


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Iterator[dict[str, Path]]:
    """One small verified checkpoint (parity, scan, max_len 4) reused by every property, and paths."""
    d = tmp_path_factory.mktemp("fuzz")
    CWD.append(d)
    ckpt = d / "parity.safetensors"
    assert main(["compile", "parity", "-o", str(ckpt), "--max-len", "4", "--method", "scan"]) == 0
    kr = d / "c3.safetensors"
    assert main(["compile", "cyclic:3", "-o", str(kr), "--max-len", "4"]) == 0
    (d / "adir").mkdir()
    yield {"dir": d, "ckpt": ckpt, "kr": kr, "out": d / "out.safetensors", "adir": d / "adir"}
    CWD.remove(d)


TINY_VERIFY = ["--samples", "1", "--exhaustive-budget", "8", "--family-limit", "1"]
TINY_COMPILE = ["--max-len", "4", "--verify-samples", "1", "--verify-budget", "8"]

# --- strategies ----------------------------------------------------------------------------

names = st.one_of(st.text(max_size=4), st.integers(-3, 3), st.none(), st.booleans(), st.floats(allow_nan=True),
                  st.sampled_from(["a", "b", "q0", "0", "1", " ", ""]))
json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(), st.text(max_size=5)),
                           lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                   st.dictionaries(st.text(max_size=5), inner, max_size=4)),
                           max_leaves=12)


@st.composite
def valid_specs(draw) -> dict[str, Any]:
    """A random complete automaton in the native or the automata-lib JSON form."""
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    a = random_automaton(rng, draw(st.integers(1, 4)), draw(st.integers(1, 3)))
    d = a.to_dict()
    if draw(st.booleans()):
        d = {"states": d["states"], "input_symbols": d["alphabet"], "initial_state": d["start"],
             "transitions": d["transitions"], "final_states": d["states"][:1], "allow_partial": False}
    return d


@st.composite
def mutated_specs(draw) -> Any:
    """A valid spec with one to three mutations: a field dropped, replaced or added; a name
    replaced inside the transitions; a transition removed."""
    d = json.loads(json.dumps(draw(valid_specs())))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["drop", "replace", "add", "rename", "unlink"]))
        keys = sorted(d)
        if kind == "drop" and keys:
            d.pop(draw(st.sampled_from(keys)))
        elif kind == "replace" and keys:
            d[draw(st.sampled_from(keys))] = draw(json_values)
        elif kind == "add":
            d[draw(st.sampled_from(sorted(KNOWN_FIELDS) + ["extra"]))] = draw(json_values)
        elif isinstance(d.get("transitions"), dict) and d["transitions"]:
            q = draw(st.sampled_from(sorted(d["transitions"])))
            row = d["transitions"][q]
            if isinstance(row, dict) and row:
                a = draw(st.sampled_from(sorted(row)))
                if kind == "rename":
                    row[a] = draw(names)
                else:
                    del row[a]
    return d


def json_text(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


spec_texts = st.one_of(
    mutated_specs().map(json_text),
    json_values.map(json_text),
    st.text(max_size=60),
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 3000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.tuples(valid_specs().map(json.dumps), st.integers(0, 400), st.text(min_size=1, max_size=3)).map(
        lambda t: t[0][: t[1]] + t[2] + t[0][t[1] + 1:]),  # one spot of a valid spec replaced
)


# --- properties ---------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", SCALES)
def test_malformed_spec_files(scale, work):
    @fuzz_settings(70, scale)
    @given(text=spec_texts, binary=st.booleans(), raw=st.binary(max_size=40))
    def prop(text: str, binary: bool, raw: bytes) -> None:
        path = work["dir"] / "spec.json"
        path.write_bytes(raw if binary else text.encode("utf-8", "surrogatepass"))
        check_contract("spec files", ["compile", str(path), "-o", str(work["out"]), *TINY_COMPILE])

    prop()


@pytest.mark.parametrize("scale", SCALES)
def test_malformed_spec_dicts(scale):
    """The library: a dict either loads or raises a ShortcutError (never another exception)."""
    @fuzz_settings(80, scale)
    @given(spec=st.one_of(mutated_specs(), json_values, st.dictionaries(st.sampled_from(sorted(KNOWN_FIELDS)),
                                                                         json_values, max_size=6)),
           complete=st.booleans())
    def prop(spec: Any, complete: bool) -> None:
        STATS.setdefault("spec dicts", Counter())["cases"] += 1
        try:
            a = load_spec(spec, complete=complete) if isinstance(spec, dict) else None
        except ShortcutError as e:
            assert str(e) and "\n" not in str(e)
            return
        assert a is None or isinstance(a, Semiautomaton)

    prop()


@pytest.mark.parametrize("scale", SCALES)
def test_valid_random_specs_compile_exact(scale, work):
    @fuzz_settings(10, scale)
    @given(spec=valid_specs(), method=st.sampled_from(["auto", "scan", "krohn-rhodes", "gridworld"]))
    def prop(spec: dict[str, Any], method: str) -> None:
        path = work["dir"] / "valid.json"
        path.write_text(json.dumps(spec))
        code = check_contract("valid specs", ["compile", str(path), "-o", str(work["out"]), "--method", method,
                                              *TINY_COMPILE])
        assert code == 0 or (code == 2 and method != "auto")  # a forced construction may refuse
        if code == 0:
            assert check_contract("valid specs", ["verify", str(work["out"]), *TINY_VERIFY]) == 0

    prop()


VALUES = ["0", "1", "2", "4", "-1", "x", "1e3", "99999999999999", "", " ", "0 1 1", "0,1", "a b", ",", "|", "even",
          "odd", "auto", "scan", "krohn-rhodes", "gridworld", "float64", "float32", "circle", "sinusoidal",
          "transformer-lens", "depth", "size"]
OPTIONS = {
    "compile": ["-o", "--max-len", "--method", "--dtype", "--positions", "--complete", "--allow-inexact", "--no-verify",
                "--verify-samples", "--verify-budget", "--prefer", "--max-params"],
    "plan": ["--max-len", "--prefer", "--max-params", "--positions", "--complete", "--json", "--alphabet"],
    "run": ["--input", "--input-file", "--sep", "--json", "--start"],
    "info": ["--json", "--layout"],
    "verify": ["--report", "--samples", "--seed", "--exhaustive-budget", "--family-limit", "--json"],
    "decompose": ["--json", "--dot", "--complete"],
    "export": ["-o", "--format"],
    "catalog": [],
}
FLAGS = {"--complete", "--allow-inexact", "--no-verify", "--json", "--layout"}


def _paths(work: dict[str, Path]) -> list[str]:
    return [str(work["ckpt"]), str(work["kr"]), str(work["out"]), str(work["adir"]), str(work["dir"] / "missing"),
            str(work["dir"] / "missing" / "x.safetensors"), str(work["dir"] / "r"), "-"]


@st.composite
def argument_lists(draw, work: dict[str, Path]) -> list[str]:
    """A command, its positional argument, options with values (mostly plausible), then a
    random token or two inserted, dropped or replaced."""
    paths = _paths(work)
    command = draw(st.sampled_from(sorted(OPTIONS)))
    specs = ["parity", "cyclic:3", "grid:2", "quaternion", "dyck:1,1", "cyclic:0", "nosuch", "grid:99999999",
             "cyclic:1000000", "symmetric:9", str(work["dir"] / "spec.json")]
    argv = [command]
    if command in ("compile", "decompose", "plan"):
        argv.append(draw(st.sampled_from(specs)))
    elif command != "catalog":
        argv.append(draw(st.sampled_from(paths)))
    for option in draw(st.lists(st.sampled_from(OPTIONS[command] or ["--debug"]), max_size=4, unique=True)):
        argv.append(option)
        if option not in FLAGS and option != "--debug":
            argv.append(draw(st.sampled_from(paths if option in ("-o", "--report", "--dot", "--input-file")
                                             else VALUES)))
    if command == "compile" and "--max-len" not in argv:
        argv += ["--max-len", "4"]
    if command == "compile" and "-o" not in argv:
        argv += ["-o", str(work["out"])]
    for _ in range(draw(st.integers(0, 2))):
        i = draw(st.integers(0, len(argv)))
        action = draw(st.sampled_from(["insert", "drop", "replace"]))
        token = draw(st.one_of(st.sampled_from(VALUES + paths + ["--debug", "--help", "--version"]),
                               st.text(max_size=6)))
        if action == "insert":
            argv.insert(i, token)
        elif i < len(argv):
            argv[i:i + 1] = [] if action == "drop" else [token]
    return argv


@pytest.mark.parametrize("scale", SCALES)
def test_random_argument_lists(scale, work):
    protected = {str(work["ckpt"]), str(work["kr"])}

    @fuzz_settings(60, scale)
    @given(argv=argument_lists(work))
    def prop(argv: list[str]) -> None:
        for i, a in enumerate(argv[:-1]):  # never overwrite the shared checkpoints
            if a in ("-o", "--output", "--dot", "--report") and argv[i + 1] in protected:
                argv[i + 1] = str(work["out"])
        if "--max-len" in argv and argv.index("--max-len") + 1 < len(argv):  # keep compiles small
            value = argv[argv.index("--max-len") + 1]
            if value.isdigit() and 8 < int(value) <= (1 << 20):
                argv[argv.index("--max-len") + 1] = "4"
        check_contract("argument lists", argv, stdin="0 1\n1\n")

    prop()


@pytest.mark.parametrize("scale", SCALES)
def test_random_input_files(scale, work):
    lines = st.lists(st.lists(st.sampled_from(["0", "1", "0", "1", "2", "", " ", ",", "a b", "é", "\x00"]), max_size=6)
                     .map(" ".join), max_size=5).map("\n".join)

    @fuzz_settings(40, scale)
    @given(text=st.one_of(lines, st.text(max_size=40)), raw=st.binary(max_size=40), binary=st.booleans(),
           sep=st.sampled_from([None, ",", "|", " ", ""]), as_json=st.booleans())
    def prop(text: str, raw: bytes, binary: bool, sep: str | None, as_json: bool) -> None:
        path = work["dir"] / "inputs.txt"
        path.write_bytes(raw if binary else text.encode("utf-8", "surrogatepass"))
        argv = ["run", str(work["ckpt"]), "--input-file", str(path), *(["--sep", sep] if sep is not None else []),
                *(["--json"] if as_json else [])]
        assert check_contract("input files", argv) in (0, 2)

    prop()


def _corrupt(data: bytes, draw: Callable, header_len: int) -> bytes:
    """Flip bytes (in the header or the tensors), truncate, or replace a header value."""
    kind = draw(st.sampled_from(["flip-header", "flip-tensors", "truncate", "header-value"]))
    buf = bytearray(data)
    if kind == "truncate":
        return bytes(buf[: draw(st.integers(0, len(buf) - 1))])
    if kind == "header-value":
        header = json.loads(buf[8 : 8 + header_len])
        meta_key = draw(st.sampled_from(["meta", "config"]))
        obj = json.loads(header["__metadata__"][meta_key])
        key = draw(st.sampled_from(sorted(obj)))
        obj[key] = draw(json_values)
        header["__metadata__"][meta_key] = json.dumps(obj)
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        return len(text).to_bytes(8, "little") + text + bytes(buf[8 + header_len:])
    lo, hi = (0, 8 + header_len) if kind == "flip-header" else (8 + header_len, len(buf))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(lo, hi - 1))
        buf[i] ^= draw(st.integers(1, 255))
    return bytes(buf)


@pytest.mark.parametrize("scale", SCALES)
def test_corrupted_checkpoints(scale, work):
    sources = {k: work[k].read_bytes() for k in ("ckpt", "kr")}

    @fuzz_settings(40, scale)
    @given(source=st.sampled_from(sorted(sources)), data=st.data(),
           command=st.sampled_from([["info"], ["info", "--json"], ["info", "--layout"], ["run", "--input", "0 1 1"],
                                    ["run", "--input", "0 1", "--start", "1"], ["verify", *TINY_VERIFY]]))
    def prop(source: str, data, command: list[str]) -> None:
        raw = sources[source]
        header_len = int.from_bytes(raw[:8], "little")
        path = work["dir"] / "corrupt.safetensors"
        path.write_bytes(_corrupt(raw, data.draw, header_len))
        check_contract("corrupted checkpoints", [command[0], str(path), *command[1:]])

    prop()


def test_one_state_automaton_compiles(work):
    """Found by this fuzzer: a 1-state automaton crashed the Krohn-Rhodes schedule (exit 3)."""
    spec = work["dir"] / "one.json"
    spec.write_text(json.dumps({"states": ["0"], "alphabet": ["a"], "transitions": {"0": {"a": "0"}}}))
    assert check_contract("one state", ["compile", str(spec), "-o", str(work["out"]), *TINY_COMPILE]) == 0


def test_default_run_has_at_least_200_cases():
    """The default budgets above add up to the issue's minimum."""
    default = 70 + 80 + 10 + 60 + 40 + 40
    assert default >= 200


def test_the_contract_checker_catches_a_traceback(monkeypatch, work):
    """check_contract itself fails on a traceback or an internal error (so the properties can fail)."""
    import compiler.cli.tools as tools

    monkeypatch.setattr(tools, "cmd_catalog", lambda args: 1 / 0)
    with pytest.raises(AssertionError):
        check_contract("self-test", ["catalog"])
    with pytest.raises(AssertionError):
        check_contract("self-test", ["catalog", "--debug"])
    STATS.pop("self-test", None)
