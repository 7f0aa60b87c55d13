"""Fuzzing the two readers of files from outside: spec files (check, bench) and bench JSON files
(compare).  Valid files are mutated (keys dropped, replaced or added, values of the wrong type,
random bytes, truncation, deep nesting, aliases, tags); every result must load or fail with the
reader's own one-line error.  Any other exception fails the test, and no YAML tag ever runs.

Deterministic (derandomize=True, no example database) and bounded: about 10 s on one core.
"""

import copy
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import DATA, ROOT, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from gradlab.bench import compare
from gradlab.errors import MAX_MESSAGE, SpecError
from gradlab.render.bench import render_compare
from gradlab.render.benchfile import read_bench_json, write_bench_reports
from gradlab.results.bench import BenchError, BenchReport, BenchRow
from gradlab.spec import resolve

SPEC_EXAMPLES = 1000
BENCH_EXAMPLES = 400
#: Failing examples also run through the CLI's real entry point (exit 2, one line).
CLI_EXAMPLES = 6
FUZZ = settings(deadline=None, derandomize=True, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.large_base_example])

#: Valid spec files to mutate: the bundled specs, the tests' user-function specs, and the
#: feature specs (integer and bool tensors, fixed values from a file, keyword tensors, `set`;
#: their taps.pt and module are copied next to the fuzzed file).
FEATURES = DATA / "specs_features"
SPEC_TEXTS = [p.read_text() for p in sorted((ROOT / "specs").glob("*.yaml"))] + [
    (DATA / "user_ok.yaml").read_text(), (DATA / "user_broken.yaml").read_text(),
    (FEATURES / "features.yaml").read_text(), (FEATURES / "features_broken.yaml").read_text()]
SPEC_DOCS = [yaml.safe_load(t) for t in SPEC_TEXTS]

#: Strings worth trying anywhere: names the loader knows, near misses, markup, long ones.
#: No random text contains ':', so no mutation imports a module the tests did not name.
STRINGS = st.sampled_from(["", "float64", "double", "int7", "cpu", "cuda", "tpu", "transposed",
                           "strided", "auto", "jacobian", "gradcheck", "exp", "conv2d",
                           "not_an_op", "shape", "args", "ops", "[", "{", "*a", "&a", "~",
                           "no_such_module_xyz:f", "user_functions:nope", "x" * 300,
                           "line\nbreak", "é∂ƒ", "1e999", "int64", "uint8", "bool", "values",
                           "file", "key", "set", "const", "kwargs", "taps.pt", "db2", "haar",
                           "missing.npy", "x.txt", "../taps.pt", "/dev/zero.pt"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5),
                    st.integers(-(10**30), 10**30), st.floats(allow_nan=True),
                    STRINGS, st.text(alphabet=st.characters(blacklist_characters=":"),
                                     max_size=12))
KEYS = st.one_of(STRINGS, st.integers(-3, 3), st.booleans(), st.none())
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(STRINGS, st.integers(0, 3)),
                                                 inner, max_size=3)), max_leaves=8)
SHAPES = st.lists(st.one_of(st.integers(-2, 4), st.integers(10**4, 10**12)), max_size=4)
#: Values for tensor keys: nested (and ragged) number lists, booleans, file names, positions.
TENSORISH = st.one_of(
    VALUES, SHAPES, st.lists(st.lists(st.one_of(st.floats(), st.integers(-300, 300),
                                                st.booleans()), max_size=3), max_size=3),
    st.dictionaries(st.one_of(st.integers(-1, 4), STRINGS), VALUES, max_size=2))


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path into a loaded document, the root () included."""
    found = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            found += paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found += paths(v, (*prefix, i))
    return found


def at(doc: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        doc = doc[k]
    return doc


@st.composite
def mutated_doc(draw: st.DrawFn, docs: list[Any]) -> Any:
    """One of `docs` with one to three structural changes at random key paths."""
    doc = copy.deepcopy(draw(st.sampled_from(docs)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths(doc)))
        if not path:
            doc = draw(VALUES) if draw(st.integers(0, 9)) == 0 else doc
            continue
        parent, last = at(doc, path[:-1]), path[-1]
        how = draw(st.sampled_from(["replace", "drop", "add_key", "wrap", "shape", "tensor"]))
        if how == "replace":
            parent[last] = draw(VALUES)
        elif how == "drop":
            del parent[last]
        elif how == "add_key" and isinstance(parent[last], dict):
            parent[last][draw(KEYS)] = draw(VALUES)
        elif how == "wrap":
            parent[last] = [parent[last]] if draw(st.booleans()) else {"value": parent[last]}
        elif how == "shape" and isinstance(parent[last], dict):
            parent[last]["shape"] = draw(SHAPES)
        elif how == "tensor" and isinstance(parent[last], dict):
            # the tensor keys this loader grew: fixed values, files, dtypes, `set` positions
            parent[last][draw(st.sampled_from(["values", "file", "key", "dtype", "const",
                                               "set", "high", "low"]))] = draw(TENSORISH)
    return doc


def billion_laughs(levels: int) -> str:
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


#: Text-level insertions: tags (one would create CANARY if it ever ran), aliases, markup.
SNIPPETS = ["!!python/object/apply:os.mkdir [CANARY]", "!!python/name:os.system",
            "!!python/object/new:builtins.dict []", "!custom x", "!!binary AAAA", "!!set {a}",
            "!!timestamp nope", "!!int abc", "!!bool maybe", "2001-13-45", "*undefined",
            "&anchor", "<<: *a", "? [1, 2]\n: x", "{", "]", "'", '"', "- - -", "\t", "%YAML 1.1"]


@st.composite
def bad_spec_bytes(draw: st.DrawFn, canary: str) -> bytes:
    """A spec file's bytes: a mutated document, or a valid file's text cut, spliced or wrapped."""
    kind = draw(st.sampled_from(["doc", "doc", "doc", "truncate", "splice", "bytes", "snippet",
                                 "deep", "laughs", "bom"]))
    text = draw(st.sampled_from(SPEC_TEXTS))
    if kind == "doc":
        return yaml.safe_dump(draw(mutated_doc(SPEC_DOCS)), allow_unicode=True,
                              sort_keys=False).encode()
    raw = text.encode()
    cut = draw(st.integers(0, len(raw)))
    if kind == "truncate":
        return raw[:cut]
    if kind == "splice":
        return raw[:cut] + draw(st.binary(min_size=1, max_size=8)) + raw[cut + 1:]
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    if kind == "snippet":
        snippet = draw(st.sampled_from(SNIPPETS)).replace("CANARY", canary)
        return (text[:cut] + snippet + text[cut:]).encode()
    if kind == "deep":
        depth = draw(st.integers(1, 1500))
        return (text + f"\nargs: {'[' * depth}{']' * depth}\n").encode()
    if kind == "laughs":
        return (billion_laughs(draw(st.integers(2, 12))) + text).encode()
    return b"\xef\xbb\xbf" + raw


def one_line_error(message: str, source: Path) -> None:
    assert "\n" not in message and len(message) <= len(str(source)) + MAX_MESSAGE + 2, message
    assert message.startswith(f"{source}: "), message


def test_fuzzed_spec_files_load_or_fail_in_one_line(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    canary = tmp_path / "CANARY"
    spec = tmp_path / "fuzz.yaml"
    for name in ("taps.pt", "features_functions.py"):
        shutil.copy(FEATURES / name, tmp_path / name)
    seen = {"examples": 0, "errors": 0, "loaded": 0, "cli": 0}

    @settings(FUZZ, max_examples=SPEC_EXAMPLES)
    @given(bad_spec_bytes(str(canary)))
    def load(data: bytes) -> None:
        seen["examples"] += 1
        spec.write_bytes(data)
        try:
            resolve(str(spec), max_memory=1 << 30)
            seen["loaded"] += 1
        except SpecError as exc:
            seen["errors"] += 1
            one_line_error(str(exc), spec)
            if seen["cli"] < CLI_EXAMPLES:
                seen["cli"] += 1
                code, out, err = run_cli(["check", str(spec), "--report-dir",
                                          str(tmp_path / "r")], capsys)
                lines = [ln for ln in (out + err).splitlines() if ln.strip()]
                assert code == 2 and len(lines) == 1 and "Traceback" not in out + err, lines
        assert not canary.exists(), "a YAML tag ran"

    load()
    assert seen["examples"] >= 1000 and seen["cli"] == CLI_EXAMPLES, seen
    assert seen["errors"] > seen["examples"] // 2 and seen["loaded"] > 0, seen


def valid_bench_doc(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    rows = [BenchRow("exp", case, "float32", "cpu", impl, "forward", median_s=1.0, n=4,
                     samples_s=[1.0, 1.1, 0.9, 1.05], speedup=1.0, speedup_low=0.9,
                     speedup_high=1.1, significant=False)
            for case in ("a", "b") for impl in ("custom", "reference")]
    path = write_bench_reports(BenchReport(rows=rows, env={"torch_version": "x"},
                                           settings={"min_time": 0.2}), tmp_path)[1]
    return path, json.loads(path.read_text())


@st.composite
def bad_bench_bytes(draw: st.DrawFn, doc: dict[str, Any]) -> bytes:
    """A bench JSON file's bytes: the document mutated, or its text cut, spliced or nested."""
    kind = draw(st.sampled_from(["doc", "doc", "doc", "truncate", "splice", "deep"]))
    text = json.dumps(doc, indent=1)
    if kind == "doc":
        return json.dumps(draw(mutated_doc([doc])), default=str).encode()
    cut = draw(st.integers(0, len(text)))
    if kind == "truncate":
        return text[:cut].encode()
    if kind == "splice":
        return text[:cut].encode() + draw(st.binary(min_size=1, max_size=8)) + \
            text[cut + 1:].encode()
    depth = draw(st.integers(1, 5000))
    return ('{"format": "gradlab-bench", "version": 2, "rows": ' + "[" * depth + "]" * depth
            + "}").encode()


def test_fuzzed_bench_files_compare_or_fail_in_one_line(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    good, doc = valid_bench_doc(tmp_path / "good")
    baseline = read_bench_json(good)
    bad = tmp_path / "fuzz.json"
    seen = {"examples": 0, "errors": 0, "compared": 0, "cli": 0}

    def render(rows: list[Any]) -> None:
        render_compare(rows, 5.0, Console(file=io.StringIO(), width=160))

    @settings(FUZZ, max_examples=BENCH_EXAMPLES)
    @given(bad_bench_bytes(doc))
    def load(data: bytes) -> None:
        seen["examples"] += 1
        bad.write_bytes(data)
        try:
            report = read_bench_json(bad)
        except BenchError as exc:
            seen["errors"] += 1
            one_line_error(str(exc), bad)
            if seen["cli"] < CLI_EXAMPLES:
                seen["cli"] += 1
                code, out, err = run_cli(["compare", str(good), str(bad)], capsys)
                lines = [ln for ln in (out + err).splitlines() if ln.strip()]
                assert code == 2 and len(lines) == 1 and "Traceback" not in out + err, lines
            return
        seen["compared"] += 1
        render(compare(baseline, report, resamples=50))

    load()
    assert seen["examples"] >= BENCH_EXAMPLES and seen["cli"] == CLI_EXAMPLES, seen
    assert seen["errors"] > 0 and seen["compared"] > 0, seen
