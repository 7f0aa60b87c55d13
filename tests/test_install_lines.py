"""No install line in the README, docs/, scripts, CI files or gradlab's own messages fetches
gradlab from a package index (issue 23 item 1).

PyPI's `gradlab` is an unrelated project, and gradlab's own distribution name, `gradlab-torch`,
is not published yet (anyone could claim it), so either name installed from an index is
someone else's code.  A line may install gradlab from a local path (`pip install -e ".[plots]"`)
or a direct reference (`"gradlab-torch[plots] @ git+<repo URL>"`).  The scanner below finds
pip, uv and pipx install commands in any text (fenced blocks, inline code, YAML `run:` steps,
Python strings) and tests itself on good and bad sample lines.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Names that must never come from an index: PyPI's unrelated project and our own unpublished one.
FORBIDDEN = frozenset({"gradlab", "gradlab-torch"})

#: What is scanned: the user-facing text and every file a setup or CI step runs.
SCANNED_FILES = ("README.md", "pyproject.toml")
SCANNED_DIRS = ("docs", "scripts", ".ci", ".github", "gradlab", "benchmarks")
SCANNED_SUFFIXES = frozenset({"", ".md", ".sh", ".yml", ".yaml", ".py", ".toml", ".txt", ".cfg"})

#: The start of an install command: pip/pip3 (also `python -m pip`), `uv pip install`,
#: `uv add`, `uv tool install`, `pipx install|inject|run`.
COMMAND = re.compile(r"(?<![\w.-])(?:pip3?|uv\s+pip|uv(?:\s+tool)?|pipx)\s+"
                     r"(?P<verb>install|add|inject|run)(?![\w-])")
#: Where a command's arguments end: code spans, shell separators, a comment, a table cell.
END = re.compile(r"`|;|&&|\|\||\||\s#|\)\s|\)$")

#: Options whose next word is their value, not a requirement.
VALUED = frozenset({
    "-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url",
    "--index", "--default-index", "-f", "--find-links", "-t", "--target", "--prefix", "--root",
    "--python", "-p", "--src", "--upgrade-strategy", "--platform", "--python-version",
    "--implementation", "--abi", "--only-binary", "--no-binary", "--progress-bar", "--log",
    "--cache-dir", "--trusted-host", "--proxy", "--timeout", "--retries", "-C",
    "--config-settings", "--global-option", "--report", "--extra", "--group", "--optional",
    "--pip-args", "--suffix", "--spec", "--with", "-w",
})
#: Options whose value pip installs as a folder or URL, never from an index.
EDITABLE = frozenset({"-e", "--editable"})

#: A requirement: a project name, optional extras, then a version, markers or `@ url`.
REQUIREMENT = re.compile(r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*"
                         r"(?:\[[^\]]*\])?\s*(?P<rest>.*)$", re.S)


def normalized(name: str) -> str:
    """A project name as package indexes compare it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def is_local(word: str) -> bool:
    """A path, archive or URL: installed from where it points, not looked up by name."""
    return (word.startswith((".", "/", "~", "$")) or "/" in word.split("[", 1)[0]
            or "://" in word or word.startswith(("git+", "hg+", "svn+", "bzr+", "file:"))
            or word.endswith((".whl", ".tar.gz", ".zip", ".tgz")))


def from_index(word: str) -> str | None:
    """The normalized project name `word` would fetch from an index, or None (a path, a URL,
    a direct reference `name @ url`, or no requirement at all)."""
    if is_local(word):
        return None
    match = REQUIREMENT.match(word.strip())
    if match is None or match["rest"].lstrip().startswith("@"):
        return None
    return normalized(match["name"])


def words_of(args: str) -> list[str]:
    """The shell words of an argument string (quotes honoured when they balance)."""
    try:
        return shlex.split(args)
    except ValueError:
        return [word.strip("'\"") for word in args.split()]


def fetched_names(line: str) -> list[str]:
    """Every project name the install commands on `line` would fetch from an index."""
    names = []
    for command in COMMAND.finditer(line):
        rest = line[command.end():]
        end = END.search(rest)
        words = words_of(rest[:end.start()] if end else rest)
        if command["verb"] == "inject" and words:
            words = words[1:]  # pipx inject VENV PACKAGE...: the first word names a venv
        names += requirement_names(words)
    return names


def requirement_names(words: list[str]) -> list[str]:
    """The index-fetched names among an install command's words."""
    names, skip = [], False
    for i, word in enumerate(words):
        if skip:
            skip = False
            continue
        if word in VALUED:
            skip = True
            continue
        if word.startswith("-") or (i > 0 and words[i - 1] in EDITABLE):
            continue  # an option; `-e X` installs the folder or URL X, whatever its name
        if word.startswith("@") or (i > 0 and words[i - 1].startswith("@")) or \
                (i + 1 < len(words) and words[i + 1].startswith("@")):
            continue  # `gradlab @ git+...` unquoted: a direct reference
        name = from_index(word)
        if name is not None:
            names.append(name)
    return names


def bad_installs(line: str) -> list[str]:
    """The forbidden names `line` would install from an index."""
    return [n for n in fetched_names(line) if n in FORBIDDEN]


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, line) with shell continuations (a trailing backslash) joined."""
    out: list[tuple[int, str]] = []
    start, parts = 0, []
    for n, line in enumerate(text.splitlines(), 1):
        start = start or n
        if line.rstrip().endswith("\\"):
            parts.append(line.rstrip()[:-1])
            continue
        out.append((start, " ".join([*parts, line])))
        start, parts = 0, []
    if parts:
        out.append((start, " ".join(parts)))
    return out


def scanned_paths() -> list[Path]:
    """README, docs, scripts, CI files and gradlab's sources (its messages name commands)."""
    paths = [ROOT / name for name in SCANNED_FILES if (ROOT / name).is_file()]
    for folder in SCANNED_DIRS:
        paths += sorted(p for p in (ROOT / folder).rglob("*")
                        if p.is_file() and p.suffix in SCANNED_SUFFIXES
                        and "__pycache__" not in p.parts)
    return paths


BAD = [
    'pip install gradlab',
    'pip install "gradlab[plots]"',
    "python -m pip install 'gradlab[plots]>=0.1'",
    "pip3 install -U gradlab==0.1.0",
    "pip install --upgrade --index-url https://pypi.org/simple gradlab",
    "uv pip install gradlab",
    "uv add gradlab[plots]",
    "uv tool install gradlab",
    "pipx install gradlab",
    "pipx inject myenv gradlab",
    "pip install torch gradlab_torch",
    "pip install Gradlab.Torch",
    '| `--plots` | needs matplotlib: `pip install "gradlab[plots]"`; or ... |',
    "INSTALL_HINT = \"pip install 'gradlab[plots]' (or pip install matplotlib)\"",
    "          python -m pip install \"gradlab[plots]\"        # or -e in gradlab's checkout",
    "pip install 'gradlab; python_version >= \"3.10\"'",
]

GOOD = [
    'pip install -e ".[plots]"',
    "pip install -e .",
    "python -m pip install -e '.[test]'",
    'pip install "gradlab-torch[plots] @ git+https://example.org/gradlab.git"',
    'pip install "gradlab @ git+<repo URL>"',
    "pip install gradlab-torch @ git+https://example.org/gradlab.git",
    "pip install git+https://example.org/gradlab.git#egg=gradlab-torch",
    "pip install ./gradlab",
    "pip install dist/gradlab_torch-0.1.0-py3-none-any.whl",
    "pip install gradlab_torch-0.1.0.tar.gz",
    "pip install matplotlib",
    "pip install torch --index-url https://download.pytorch.org/whl/cpu",
    "pip install -r requirements.txt -c gradlab",
    "pipx inject gradlab matplotlib",
    "installing gradlab registers a pytest plugin",
    "pip install -e gradlab",
    "pip install gradlabx gradlab-extras",
    '"$VPY" -m pip install -q -c "$pins" -e ".[test]"',
    "uv pip install -e .",
    "pip uninstall -y gradlab",
    'pip install matplotlib (or the plots extra: README, "Install")',
]


@pytest.mark.parametrize("line", BAD)
def test_the_scanner_flags_an_index_install_of_gradlab(line: str) -> None:
    assert bad_installs(line), line


@pytest.mark.parametrize("line", GOOD)
def test_the_scanner_passes_local_and_direct_installs(line: str) -> None:
    assert bad_installs(line) == [], line


def test_a_command_continued_on_the_next_line_is_one_line() -> None:
    text = "python -m pip install --upgrade \\\n    'gradlab[plots]'\npip install -e .\n"
    lines = logical_lines(text)
    assert [n for n, _ in lines] == [1, 3]
    assert bad_installs(lines[0][1]) == ["gradlab"] and bad_installs(lines[1][1]) == []


def test_the_scanner_sees_every_command_on_a_line() -> None:
    line = "pip install matplotlib && pip install gradlab; pipx install gradlab-torch"
    assert bad_installs(line) == ["gradlab", "gradlab-torch"]


def test_no_install_line_fetches_gradlab_from_an_index() -> None:
    paths = scanned_paths()
    names = {p.relative_to(ROOT).as_posix() for p in paths}
    assert {"README.md", "docs/ci.md", "scripts/dev.sh", ".ci/run",
            ".github/workflows/gradlab.yml", "gradlab/render/plots.py"} <= names
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
             for p in paths
             for n, line in logical_lines(p.read_text(encoding="utf-8", errors="replace"))
             if bad_installs(line)]
    assert found == [], "installs gradlab from a package index:\n" + "\n".join(found)


def test_the_readme_says_how_to_install_and_under_which_name() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    install = text.split("## Install", 1)[1].split("\n## ", 1)[0]
    assert 'pip install -e ".[plots]"' in install
    assert '"gradlab-torch[plots] @ git+<repo URL>"' in install
    assert "gradlab-torch" in install and "free on PyPI" in install


def test_the_distribution_is_named_as_the_readme_says() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "gradlab-torch"
    assert project["scripts"] == {"gradlab": "gradlab.cli:main"}
