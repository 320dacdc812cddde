"""The README's code runs as written, and so does every code block of docs/ (``docs/**/*.md``).

Every fenced ``bash`` block runs verbatim through bash in a temporary directory (holding a
copy of ``examples/``, since the README's commands are written for the repository root),
with this interpreter's ``bin`` (where ``pip install -e .`` put ``shortcut``) first on PATH.
The one thing dropped is a leading chain of ``pip install ... &&``: the test runs after the
packages are installed.  Every ``python`` block runs in a temporary directory and must print
exactly the lines its ``# -> ...`` comments claim; every ``json`` block is a spec that loads.
A block in any other language, or one that cannot run here, fails the test unless it is
listed in NOT_RUNNABLE with the reason; in docs/ a fence with no language (or ``text``) is a
drawing or a listing, not code.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from compiler.automata.load import load_spec

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
"""The README and every page of docs/, whose code blocks the tests run."""
TEXT = ("", "text")
"""Fence languages of drawings and listings in docs/ (not code; the README has none)."""
BIN = Path(sys.executable).parent

CI_COMMANDS = (
    'pip install torch==2.13.0 && pip install -e ".[test]" && python -m pytest -q',
    'pip install torch==2.13.0 && pip install -e ".[test,transformer-lens,nnsight]" && SHORTCUT_REQUIRE_EXTRAS=1 '
    'python -m pytest -q -m integration',
    'pip install torch==2.13.0 && pip install -e ".[test]" "transformer-lens>=3.9,<4" && SHORTCUT_REQUIRE_EXTRAS=1 '
    'python -m pytest -q -m transformer_lens_3',
)
"""The README's test commands, which ``.ci/run`` runs verbatim, each in a fresh environment."""

NOT_RUNNABLE = {command: "a CI command (.ci/run runs it in a fresh environment); here it would run the suite again"
                for command in CI_COMMANDS}
NOT_RUNNABLE[next(b for b in (ROOT / "docs" / "zoo.md").read_text().split("```") if "--ray ray://head" in b)
             .removeprefix("bash\n").strip("\n")] = "zoos of 1,050 models and Ray clusters (the quick zoo runs in docs/cli.md)"
"""Blocks (exact text) that are not run, with the reason."""

RUNNERS = ("bash", "python", "json")

OPTIONAL_MODULES = ("transformer_lens", "nnsight")
"""Optional extras: a python block importing one of them runs where its imports work and is
skipped elsewhere (the TransformerLens 4.x block in an environment with the extra, the 3.9 block
in one with TransformerLens 3.9)."""
NEEDS = {"to_transformer_bridge(": "from transformer_lens.model_bridge.sources.native import boot",
         "load_transformer_bridge(": "from transformer_lens.model_bridge.sources.native import boot"}
"""Calls that import an optional extra inside the library, and the import they need."""

_FENCE = re.compile(r"^```([\w+-]*)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_PIP_PREFIX = re.compile(r"\A(?:pip install [^&\n]*&&\s*)+")
_CLAIM = re.compile(r"#\s*->\s*(.*?)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of the README."""

    lang: str
    text: str
    line: int  # 1-based line of the opening fence
    page: str = "README.md"  # the file, relative to the repository root

    @property
    def id(self) -> str:
        return f"{self.page}:{self.lang}@L{self.line}"


def blocks(text: str, page: str = "README.md") -> list[Block]:
    """Every fenced code block of a markdown text, in order."""
    return [Block(m.group(1), m.group(2).strip("\n"), text.count("\n", 0, m.start()) + 1, page)
            for m in _FENCE.finditer(text)]


def page_blocks() -> list[Block]:
    """Every fenced block of the README and of docs/, page by page."""
    return [b for path in PAGES for b in blocks(path.read_text(), str(path.relative_to(ROOT)))]


def runnable(lang: str) -> list[Block]:
    """The blocks of one language that the generic tests run (the headline has its own test)."""
    headline = blocks(README.read_text())[0]
    return [b for b in page_blocks() if b.lang == lang and b.text not in NOT_RUNNABLE and b != headline]


def shell_command(block: Block) -> str:
    """The block with a leading ``pip install ... &&`` chain dropped (the packages are installed)."""
    return _PIP_PREFIX.sub("", block.text, count=1)


def _env() -> dict[str, str]:
    """The test's environment with this venv's bin first on PATH and this checkout importable.

    One torch thread per process: the suite runs in parallel workers (results do not depend on it)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_bash(command: str, cwd: Path) -> subprocess.CompletedProcess:
    shutil.copytree(ROOT / "examples", cwd / "examples")
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=600)


# --- the extraction itself -----------------------------------------------------------


def test_every_block_is_run_or_listed_as_not_runnable() -> None:
    found = page_blocks()
    readme = [b for b in found if b.page == "README.md"]
    assert [b.lang for b in readme].count("bash") >= 3 and any(b.lang == "python" for b in readme)
    assert any(b.page.startswith("docs/") and b.lang in RUNNERS for b in found)
    for b in found:
        text = b.page != "README.md" and b.lang in TEXT
        assert b.lang in RUNNERS or b.text in NOT_RUNNABLE or text, (
            f"{b.page} block at line {b.line} ({b.lang or 'no language'}) is neither run by tests/test_readme.py "
            f"nor listed in NOT_RUNNABLE with a reason")
    stale = set(NOT_RUNNABLE) - {b.text for b in found}
    assert not stale, f"NOT_RUNNABLE lists blocks the README no longer has: {stale}"


def test_ci_runs_the_readme_test_commands_verbatim() -> None:
    readme = {b.text for b in blocks(README.read_text()) if b.lang == "bash"}
    assert set(CI_COMMANDS) <= readme
    ci = re.findall(r"^in_fresh_venv \S+ '(.*)'$", (ROOT / ".ci" / "run").read_text(), re.M)
    assert ci == list(CI_COMMANDS)


def test_extraction_drops_only_the_pip_prefix() -> None:
    b = Block("bash", "pip install torch==2.13.0 && pip install -e . && shortcut catalog && pip list", 1)
    assert shell_command(b) == "shortcut catalog && pip list"
    assert shell_command(Block("bash", "shortcut catalog", 1)) == "shortcut catalog"
    md = "text\n```bash\necho a\necho b\n```\n\n```python\nprint(1)  # -> 1\n```\n"
    assert blocks(md) == [Block("bash", "echo a\necho b", 2), Block("python", "print(1)  # -> 1", 7)]


# --- the blocks -------------------------------------------------------------------------


def test_shortcut_is_installed_next_to_this_python() -> None:
    assert (BIN / "shortcut").exists(), f"no `shortcut` in {BIN}: install the package (pip install -e .)"


def test_headline_command_prints_the_states(tmp_path: Path) -> None:
    """The first block: compile S5, run it on a word in cycle notation, get the states (the
    reference simulation's, for the automaton and word the command names)."""
    headline = blocks(README.read_text())[0]
    assert headline.lang == "bash" and "shortcut run" in headline.text
    command = shell_command(headline)
    assert "pip install" not in command
    r = run_bash(command, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    argv = shlex.split(command.split("&&")[-1])
    word = argv[argv.index("--input") + 1].split()
    compile_argv = shlex.split(command.split("&&")[0])
    spec = compile_argv[compile_argv.index("compile") + 1]
    a = load_spec(spec)
    expected = [a.states[q] for q in a.run(a.symbol_ids(word))]
    assert r.stdout.splitlines()[-1].split() == expected
    assert "verification: exact" in r.stdout


@pytest.mark.parametrize("block", runnable("bash"), ids=lambda b: b.id)
def test_bash_block_runs(block: Block, tmp_path: Path) -> None:
    r = run_bash(shell_command(block), tmp_path)
    assert r.returncode == 0, f"{block.page} block at line {block.line} failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    assert r.stdout.strip()


def missing_optional(text: str) -> str | None:
    """The first import line of an optional module (:data:`OPTIONAL_MODULES`, or one a call of
    :data:`NEEDS` makes) that fails here, or None."""
    for line in [*text.splitlines(), *(need for call, need in NEEDS.items() if call in text)]:
        m = re.match(r"\s*(?:from|import)\s+([\w.]+)", line)
        if m and m.group(1).split(".")[0] in OPTIONAL_MODULES:
            try:
                exec(line.strip(), {})
            except ImportError:
                return line.strip()
    return None


def marked(block: Block) -> pytest.ParameterSet:
    """``block`` as a test parameter, marked with the extra it needs: ``transformer_lens_3`` for
    the TransformerLens 3.9 block, ``integration`` for one importing another optional module."""
    optional = any(name in block.text for name in (*OPTIONAL_MODULES, *NEEDS))
    mark = (pytest.mark.transformer_lens_3 if "HookedTransformer" in block.text else
            pytest.mark.integration if optional else ())
    return pytest.param(block, marks=mark, id=block.id)


@pytest.mark.parametrize("block", [marked(b) for b in runnable("python")])
def test_python_block_prints_what_it_claims(block: Block, tmp_path: Path) -> None:
    missing = missing_optional(block.text)
    if missing is not None:
        pytest.skip(f"needs an optional extra: `{missing}` fails here")
    claims = [m.group(1) for line in block.text.splitlines() if (m := _CLAIM.search(line))]
    assert claims, f"{block.page} python block at line {block.line} claims no output (# -> ...)"
    r = subprocess.run([sys.executable, "-c", block.text], cwd=tmp_path, env=_env(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == claims


@pytest.mark.parametrize("block", runnable("json"), ids=lambda b: b.id)
def test_json_block_is_a_spec_that_loads(block: Block) -> None:
    a = load_spec(json.loads(block.text))
    assert a.n_states >= 2 and load_spec(a.to_dict()) == a
