"""A spec file's bytes -> its YAML document, within limits, as plain data (never code).

A spec file may come from anywhere: the limits below turn each way a file can hurt the loader
(endless or huge files, non-text, "billion laughs" aliases, nesting deep enough to exhaust the
stack, tags that would run code) into a one-line SpecError naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.nodes import Node, ScalarNode

from gradlab.errors import InputFileError, SpecError, one_line
from gradlab.fileio import read_limited

#: Largest spec file read: hand-written specs are a few KiB (the biggest bundled one is 3 KiB);
#: 1 MiB leaves room for generated ones while bounding the pure-Python parse to seconds.
MAX_SPEC_BYTES = 1 << 20
#: Deepest nesting of lists and mappings: a real spec nests about 7 levels; ~1,000 would exhaust
#: Python's stack inside the YAML composer.
MAX_DEPTH = 64
#: Largest size of the document with every alias expanded, counted as one per node plus the
#: length of each scalar: without aliases it stays near the file's size, so this only stops
#: aliases that multiply it (a 700-byte "billion laughs" file grows to gigabytes).
MAX_EXPANDED = 4 * MAX_SPEC_BYTES
#: Error messages quote at most this much of YAML's own problem text.
MAX_PROBLEM = 160
#: Errors the safe constructor raises besides YAMLError on odd scalars (`2001-13-45`,
#: `!!bool x`, an int of 5,000 digits, `!!timestamp x`).
CONSTRUCTOR_ERRORS = (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError)


if yaml.__with_libyaml__:
    from yaml.composer import Composer
    from yaml.constructor import SafeConstructor
    from yaml.cyaml import CParser
    from yaml.resolver import Resolver

    class SafeBase(Composer, CParser, SafeConstructor, Resolver):  # type: ignore[misc]
        """yaml.SafeLoader with libyaml's scanner and parser (5x faster than PyYAML's own)
        under PyYAML's composer, so that BoundedLoader can watch each node composed."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)
else:  # PyYAML built without libyaml
    SafeBase = yaml.SafeLoader  # type: ignore[misc,assignment]


class BoundedLoader(SafeBase):
    """A safe loader (plain data only: any other tag is an error) that refuses documents
    nested deeper than MAX_DEPTH or growing past MAX_EXPANDED when aliases are expanded."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        #: expanded size of each finished node (aliases count the size of what they repeat)
        self.sizes: dict[int, int] = {}
        #: expanded size so far of each node being composed, outermost first
        self.open_sizes: list[int] = []

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        mark = self.peek_event().start_mark
        if self.check_event(yaml.AliasEvent):
            node: Node = super().compose_node(parent, index)
            if id(node) not in self.sizes:
                # PyYAML would build a structure that contains itself
                raise ComposerError(None, None, "an alias inside the node it names", mark)
            size = self.sizes[id(node)]
        else:
            if len(self.open_sizes) >= MAX_DEPTH:
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            self.open_sizes.append(0)
            node = super().compose_node(parent, index)
            size = 1 + self.open_sizes.pop()
            if isinstance(node, ScalarNode):
                size += len(node.value)
            self.sizes[id(node)] = size
        if self.open_sizes:
            self.open_sizes[-1] += size
        if size > MAX_EXPANDED or (self.open_sizes and self.open_sizes[-1] > MAX_EXPANDED):
            raise ComposerError(None, None, "aliases expand the document past "
                                f"{MAX_EXPANDED:,} nodes and characters", mark)
        return node


def decode(data: bytes) -> str:
    """UTF-8 text (a leading byte-order mark is dropped); InputFileError for anything else."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise InputFileError(f"binary data (a NUL byte at offset {nul}), not YAML text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                             f"{exc.start})") from None


def read_yaml(text: str, source: str) -> Any:
    """The YAML document in `text`; invalid YAML is a one-line SpecError naming the spot."""
    loader = None
    try:
        loader = BoundedLoader(text)  # already reads: control characters are refused here
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if "maximum nesting depth" in problem:  # the libyaml of PyYAML 6.0.4 (1000 levels) first
            problem = f"nested deeper than {MAX_DEPTH} levels"
        raise SpecError(f"invalid YAML: {where}{one_line(problem, MAX_PROBLEM)}",
                        source=source) from None
    except CONSTRUCTOR_ERRORS as exc:
        raise SpecError(f"invalid YAML value: {one_line(str(exc), MAX_PROBLEM)}",
                        source=source) from None
    finally:
        if loader is not None:
            loader.dispose()


def read_document(path: Path, source: str) -> Any:
    """The YAML document of spec file `path` (errors name `source`)."""
    try:
        return read_yaml(decode(read_limited(path, MAX_SPEC_BYTES)), source)
    except InputFileError as exc:
        raise SpecError(str(exc), source=source) from None
