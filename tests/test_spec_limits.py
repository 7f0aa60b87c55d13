"""Hostile spec files: each one is a one-line SpecError (exit 2 on the CLI), never a traceback,
a hang or an allocation.  The files are made here, in tmp_path: no binary fixtures committed."""

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import run_cli

from gradlab import guard
from gradlab.errors import SpecError
from gradlab.model import TensorArg
from gradlab.spec import load_file, resolve
from gradlab.spec.reader import MAX_DEPTH, MAX_SPEC_BYTES

#: Error lines longer than this are not "one sane line".
MAX_LINE = 500


def billion_laughs(levels: int = 9) -> str:
    """~700 bytes whose aliases expand to 9**levels items."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]"
              for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def write(text: str | bytes) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        path = folder / "x.yaml"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return path
    return make


def fifo(folder: Path) -> Path:
    path = folder / "x.yaml"
    os.mkfifo(path)
    return path


def link_to_dev_zero(folder: Path) -> Path:
    path = folder / "x.yaml"
    path.symlink_to("/dev/zero")
    return path


HOSTILE = {
    "fifo": (fifo, "not a regular file (a FIFO)"),
    "dev_zero": (link_to_dev_zero, "not a regular file (a character device)"),
    "too_big": (write("#" * (MAX_SPEC_BYTES + 1)), "more than the 1.0 MiB limit"),
    "binary": (write(bytes(range(256)) * 4), "binary data (a NUL byte at offset 0)"),
    "latin1": (write("op: exp  # caf\xe9\n".encode("latin-1")), "not UTF-8 text (byte 0xe9"),
    "utf16": (write("op: exp\n".encode("utf-16")), "binary data"),
    "utf16_no_nul": (write(b"\xff\xfe"), "not UTF-8 text (byte 0xff at offset 0)"),
    "billion_laughs": (write(billion_laughs()), "aliases expand the document past"),
    "self_alias": (write("op: exp\nargs: &a [*a]\n"), "an alias inside the node it names"),
    "deep_flow": (write("op: exp\nargs: " + "[" * 1000 + "]" * 1000 + "\n"),
                  f"nested deeper than {MAX_DEPTH} levels"),
    "deep_block": (write("op: exp\nargs:\n" + "".join("  " * i + "- \n" for i in range(1, 200))),
                   f"nested deeper than {MAX_DEPTH} levels"),
    "python_tag": (write("op: !!python/object/apply:os.system ['echo hi']\n"),
                   "could not determine a constructor for the tag"),
    "custom_tag": (write("op: !secret exp\n"), "could not determine a constructor for the tag"),
    "bad_date": (write("op: exp\nname: 2001-13-45\n"), "invalid YAML value: month must be"),
    "bad_bool_tag": (write("op: exp\nname: !!bool maybe\n"), "invalid YAML value"),
    "huge_int": (write("op: exp\nname: " + "9" * 5000 + "\n"), "invalid YAML value"),
    "mixed_key_types": (write("op: exp\n1: a\nb: c\n"), "1: unknown key (op keys:"),
    "mixed_tensor_keys": (write("op: exp\nargs: [{shape: [2], 3: x, y: z}]\n"),
                          "args[0].3: unknown key (tensor keys:"),
    "mixed_case_keys": (write("op: exp\ncases: [{name: a, null: 1, b: 2}]\n"),
                        "cases[0].None: unknown key (case keys:"),
    "key_with_newline": (write('op: exp\n"bad\\nkey": 1\n'), "'bad\\nkey': unknown key"),
    "long_value": (write("op: exp\ndtypes: [" + "x" * 100_000 + "]\n"), "dtypes[0]: unknown dtype"),
    "huge_shape": (write("ops:\n  - op: exp\n    args: [{shape: [100000, 100000]}]\n"),
                   "ops[0].args[0].shape: needs 74.5 GiB for float64, more than the"),
    "spread_strides": (write("op: exp\ncases:\n  - name: a\n    args: [{shape: [2, 2], "
                             "strides: [1000000000000, 1]}]\n"),
                       "cases[0].args[0].shape: needs 7.3 TiB for float64"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_spec_is_one_line_spec_error(name: str, tmp_path: Path) -> None:
    make, expected = HOSTILE[name]
    path = make(tmp_path)
    with pytest.raises(SpecError) as info:
        resolve(str(path))
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert expected in message, message
    assert "\n" not in message and len(message) < MAX_LINE, message


def test_a_folder_named_like_a_spec_in_a_spec_folder(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").mkdir()
    with pytest.raises(SpecError, match=r"a.yaml: not a regular file \(a folder\)"):
        resolve(str(tmp_path))


def test_echoed_values_are_capped(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("op: exp\nargs: [{shape: '" + "a" * 10_000 + "'}]\n")
    with pytest.raises(SpecError) as info:
        load_file(path)
    assert "..." in str(info.value) and len(str(info.value)) < 250


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_bytes(b"\xef\xbb\xbfop: exp\n")
    assert load_file(path)[0].op.name == "exp"


def test_nesting_below_the_limit_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    # a plain value may be any nested list: 50 levels are fine
    path.write_text("op: exp\nargs: [{shape: [3]}, " + "[" * 50 + "]" * 50 + "]\n")
    (target,) = load_file(path)
    assert isinstance(target.op.cases[0].args[1], list)


def test_a_few_aliases_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("op: exp\ncases:\n  - {name: a, args: &x [{shape: [2, 3]}]}\n"
                    "  - {name: b, args: *x}\n")
    assert [c.name for c in load_file(path)[0].op.cases] == ["a", "b"]


def test_max_memory_is_configurable(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("op: exp\nargs: [{shape: [1024, 1024]}]\n")  # 8 MiB in float64
    assert load_file(path, max_memory=16 << 20)
    with pytest.raises(SpecError, match=r"args\[0\].shape: needs 8.0 MiB for float64, more "
                                        r"than the 4.0 MiB limit"):
        load_file(path, max_memory=4 << 20)


def test_several_tensors_together_over_the_limit_name_the_args(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("op: exp\nargs: [{shape: [512, 512]}, {shape: [512, 512]}]\n")  # 2 x 2 MiB
    with pytest.raises(SpecError, match=r": args: its tensors need 4.0 MiB for float64"):
        load_file(path, max_memory=3 << 20)


def test_memory_estimates() -> None:
    assert guard.tensor_bytes(TensorArg((100_000, 100_000))) == 80_000_000_000
    assert guard.tensor_bytes(TensorArg((3, 4)), "float16") == 24
    assert guard.storage_elements(TensorArg((2, 3), layout="strided", strides=(10, 1))) == 13
    assert guard.default_limit() > 0
    assert guard.parse_size("8GiB") == 8 << 30
    assert guard.parse_size("512m") == 512 << 20
    assert guard.parse_size("1.5G") == 3 << 29
    assert guard.parse_size("1000") == 1000
    for bad in ("", "abc", "0", "-1G", "1X"):
        with pytest.raises(ValueError):
            guard.parse_size(bad)


@pytest.mark.parametrize("name", ["fifo", "dev_zero", "binary", "billion_laughs", "deep_flow",
                                  "python_tag", "mixed_key_types", "huge_shape", "bad_date"])
def test_cli_hostile_spec_exits_2_with_one_line(name: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = HOSTILE[name][0](tmp_path)
    code, out, err = run_cli(["check", str(path), "--report-dir", str(tmp_path / "r")], capsys)
    assert code == 2, (out, err)
    assert "Traceback" not in out + err
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"gradlab: error: {path}: "), lines
    assert len(lines[0]) < MAX_LINE


def test_cli_max_memory_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["check", "exp", "--max-memory", "1KiB", "--report-dir",
                            str(tmp_path)], capsys)
    assert code == 2 and "more than the 1.0 KiB limit" in err, err
    code, _, err = run_cli(["check", "exp", "--max-memory", "lots"], capsys)
    assert code == 2 and err.startswith("gradlab: error: --max-memory: "), err
