"""Untrusted names are data (issue 30): a corpus of hostile state, symbol and automaton names,
and a crafted plan, through every output format -- report.md, report.html, report.json, the
cascade's DOT (and its SVG when Graphviz is installed), ``run`` (text and JSON), ``info``,
``plan`` and ``decompose --json`` -- with no raw ``<script``, no unescaped ``<img`` and no
``javascript:`` link anywhere; names that would break or spoof a line are refused at load."""

from __future__ import annotations

import json
import re
import shutil

import pytest

import compiler
from compiler.automata.cascade import dot_quote, to_dot
from compiler.automata.errors import ShortcutError
from compiler.automata.spec import from_dict
from compiler.cli import main
from constructions import registry
from verify.check import verify
from verify.html import dot_svg, report_html
from verify.report import report_dict, report_markdown

STATES = ['<img src=x onerror=alert(1)>', 'h1.tile" URL="javascript:alert(1)"', '[x](javascript:alert(1))']
SYMBOLS = ['<script>alert(1)</script>', '`*a*|b&amp;\\']
NAME = '<script>alert("name")</script> \\N'
SPEC = {"name": NAME, "states": STATES, "alphabet": SYMBOLS, "start": STATES[0],
        "transitions": {q: {SYMBOLS[0]: STATES[(i + 1) % 3], SYMBOLS[1]: q} for i, q in enumerate(STATES)}}
"""A 3-cycle and a no-op, named to inject HTML, Markdown, DOT attributes and Graphviz escapes."""

RAW_MARKUP = re.compile(r"<\s*script|<\s*img|\b(href|src)\s*=\s*[\"']?\s*javascript:", re.I)
MD_LINK = re.compile(r"(?<!\\)\]\(\s*javascript:|<\s*javascript:", re.I)


def raw_markup(text: str, markdown: bool = False) -> list[str]:
    """Markup a name could inject: a raw script or img tag, a javascript: link in HTML (an href or a
    src) and, in Markdown, ``[text](javascript:...)`` or an autolink.  (Inside a DOT file, see
    :func:`dot_outside_strings`.)"""
    found = [m.group(0) for m in RAW_MARKUP.finditer(text)]
    return found + ([m.group(0) for m in MD_LINK.finditer(text)] if markdown else [])


def dot_outside_strings(dot: str) -> str:
    """The DOT text with every quoted string removed: what Graphviz reads as syntax."""
    return re.sub(r'"[^"]*"', '""', dot)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """The corpus compiled (krohn-rhodes: the report draws the cascade), and its spec file."""
    d = tmp_path_factory.mktemp("hostile")
    spec = d / "spec.json"
    spec.write_text(json.dumps(SPEC), encoding="utf-8")
    ckpt = d / "m.safetensors"
    assert main(["compile", str(spec), "-o", str(ckpt), "--max-len", "8", "--method", "krohn-rhodes"]) == 0
    return spec, ckpt


def test_a_hostile_report_escapes_every_name(hostile, tmp_path, capsys):
    spec, ckpt = hostile
    assert main(["verify", str(ckpt), "--report", str(tmp_path), "--samples", "2"]) == 0
    for name in ("report.md", "report.html", "report.json"):
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert raw_markup(text, markdown=name.endswith(".md")) == [], name
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert\\(1\\)" not in md and "&lt;script&gt;alert(\"name\")&lt;/script&gt;" in md
    rep = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert rep["automaton"]["name"] == NAME  # the same JSON value, its markup written as \u003c ...


def test_a_counterexample_with_hostile_names_is_escaped_in_md_and_html(hostile):
    model = compiler.load(hostile[1])
    rep = report_dict(verify(model, samples=1, exhaustive_budget=16), model)
    trace = [{"symbol": s, "expected": q, "got": STATES[1], "logit_gap": -1.0} for s, q in zip(SYMBOLS, STATES)]
    rep.update(exact=False, counterexample={"check": "random", "input": SYMBOLS, "position": 1, "expected": STATES[0],
                                            "got": STATES[2], "trace": trace},
               notes=[f"note about {STATES[0]}"], invariants={"failures": [f"state {STATES[1]} at layer 1"]})
    md, page = report_markdown(rep), report_html(rep, model)
    assert raw_markup(md, markdown=True) == [] and raw_markup(page) == []
    assert "&lt;img src=x onerror=alert(1)&gt;" in md and "\\[x\\](javascript:alert(1))" in md
    lines = md.splitlines()
    rows = lines[lines.index("| t | symbol | reference | model | logit gap |") + 2:][:len(trace)]
    assert [r.split(" | ")[0] for r in rows] == ["| 1", "| 2"]
    assert all(r.replace("\\|", "").count("|") == 6 for r in rows)  # the pipe in a symbol stays in its cell


def test_run_info_plan_and_decompose_print_names_safely(hostile, tmp_path, capsys):
    spec, ckpt = hostile
    capsys.readouterr()
    assert main(["run", str(ckpt), "--input", " ".join(SYMBOLS)]) == 0
    assert capsys.readouterr().out == f"{STATES[1]} {STATES[1]}\n"  # the names as given, one line per input
    for argv in (["run", str(ckpt), "--input", " ".join([SYMBOLS[0]] * 3), "--json"], ["info", str(ckpt), "--json"],
                 ["plan", str(spec), "--max-len", "8", "--json"], ["decompose", str(spec), "--json"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert raw_markup(out) == [] and "\\u003c" in out, argv
    assert json.loads(out)["automaton"] == NAME


def test_the_cascade_dot_quotes_every_name(hostile, tmp_path):
    model = compiler.load(hostile[1])
    dot = registry.plan_of(model)[1]
    text = to_dot(dot)
    outside = dot_outside_strings(text)
    assert "URL" not in outside and "javascript" not in outside and "href" not in outside
    assert "\\" not in outside and all(re.fullmatch(r'(\\n|[^\\])*', s) for s in re.findall(r'"([^"]*)"', text))
    assert dot_quote('a"b', "c\\d", "x\ny") == '"a&#34;b\\nc&#92;&#92;d\\nx\ufffdy"'


def test_a_crafted_component_name_is_text_in_the_dot_and_the_page(hostile, tmp_path, checkpoint_tools):
    evil = 'h1.tile" URL="javascript:alert(1)" target="_blank'

    def rename(meta):
        plan = meta["plan"]
        old = plan["components"][0]["name"]
        for x in plan["components"] + plan["views"] + [plan["readout"]]:
            x["reads"] = [evil if r == old else r for r in x["reads"]]
        plan["components"][0]["name"] = evil

    crafted = checkpoint_tools["edit_meta"](hostile[1], tmp_path / "c.safetensors", rename)
    model = compiler.load(crafted)
    _, cascade = registry.plan_of(model)
    dot = to_dot(cascade)
    assert "URL" not in dot_outside_strings(dot) and "target" not in dot_outside_strings(dot)
    original = compiler.load(hostile[1])  # verify refuses the edited header; its page is drawn from the report
    page = report_html(report_dict(verify(original, samples=1, exhaustive_budget=16), original), model)
    assert "h1.tile&amp;#34; URL=" in page  # the name, as text, in the escaped DOT source
    assert raw_markup(page) == [] and "<a " not in page
    if shutil.which("dot"):  # Graphviz draws the name as text and no link
        svg = dot_svg(dot)
        assert svg is not None and "<a" not in svg and "href" not in svg and "javascript:alert(1)" in svg


@pytest.mark.parametrize("change, needle", [
    (lambda p: p["components"][0].update(name="h1\nline"), r"contains the character U\+000A"),
    (lambda p: p["components"].append(p["components"][0]), "twice"),
    (lambda p: p["readout"].update(reads=["nowhere"]), "unknown signal"),
    (lambda p: p["automaton"].update(name="another"), "describes another automaton than its spec"),
])
def test_a_plan_that_does_not_fit_its_spec_is_refused(change, needle, hostile, tmp_path, checkpoint_tools):
    crafted = checkpoint_tools["edit_meta"](hostile[1], tmp_path / "c.safetensors", lambda m: change(m["plan"]))
    with pytest.raises(ShortcutError, match=needle):
        registry.plan_of(compiler.load(crafted))


@pytest.mark.parametrize("bad, code", [("a\nb", 0x0A), ("a\rb", 0x0D), ("x\u202egnp.exe", 0x202E), ("\u2066iso", 0x2066),
                                       ("mark\u200f", 0x200F), ("nul\x00", 0x00), ("c1\x85", 0x85), ("sep\u2028", 0x2028)])
@pytest.mark.parametrize("where", ["states", "alphabet", "outputs", "name"])
def test_names_that_break_or_spoof_a_line_are_refused_at_load(bad, code, where, tmp_path, capsys):
    spec = json.loads(json.dumps(SPEC))
    rename = lambda x: bad if x == STATES[0] else x  # noqa: E731
    if where == "states":
        spec.update(states=[bad, *STATES[1:]], start=bad,
                    transitions={rename(q): {s: rename(t) for s, t in row.items()} for q, row in SPEC["transitions"].items()})
    elif where == "alphabet":
        spec.update(alphabet=[SYMBOLS[0], bad],
                    transitions={q: {SYMBOLS[0]: row[SYMBOLS[0]], bad: row[SYMBOLS[1]]} for q, row in SPEC["transitions"].items()})
    elif where == "outputs":
        spec["outputs"] = {q: bad for q in STATES}
    else:
        spec["name"] = bad
    spaced = where == "alphabet" and any(c.isspace() for c in bad)  # a symbol with whitespace has its own message
    with pytest.raises(ShortcutError, match="contains whitespace" if spaced else f"U\\+{code:04X}"):
        from_dict(spec)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    capsys.readouterr()
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and bad not in err
