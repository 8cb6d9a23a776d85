"""Hardened XML parsing: no DTD, no entities, no network, no XInclude, bounded size and depth.

lxml reports a line per element but no column, so columns are recovered from the source
text: start tags appear in the text in the same order as elements in the tree.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from lxml import etree

from statecharts.core.errors import ChartError, Problem

SCXML_NS = "http://www.w3.org/2005/07/scxml"

MAX_DOCUMENT_BYTES = 2 * 1024 * 1024
MAX_DEPTH = 128

_TOKENS = re.compile(
    rb"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>|<!DOCTYPE|<([^\s/>!?][^\s/>]*)", re.DOTALL
)


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    root: etree._Element
    positions: dict[etree._Element, tuple[int, int]]  # element -> (line, column), 1-based
    source: bytes  # what was parsed (a text source's encoding declaration removed)
    sha256: str  # of the document as given (a text source: its UTF-8 bytes): its identity

    def position(self, element: etree._Element) -> tuple[int, int]:
        found = self.positions.get(element)
        if found is not None:
            return found
        return (element.sourceline or 0, 1)


def hardened_parser() -> etree.XMLParser:
    """The one XML parser configuration the project uses: no DTD, entities or network."""
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_blank_text=False,
        collect_ids=False,
    )


def parse_document(
    source: str | bytes,
    *,
    max_bytes: int = MAX_DOCUMENT_BYTES,
    max_depth: int = MAX_DEPTH,
) -> ParsedDocument:
    """Parse ``source`` or raise ChartError with the position of the problem."""
    data = source.encode("utf-8") if isinstance(source, str) else bytes(source)
    digest = hashlib.sha256(data).hexdigest()
    if isinstance(source, str):
        # An encoding declaration would contradict the bytes we just produced.
        data = re.sub(rb"^\s*<\?xml[^>]*\?>", b"", data, count=1)
    if len(data) > max_bytes:
        raise ChartError(
            [Problem(1, 1, f"document is {len(data)} bytes; the limit is {max_bytes}")]
        )
    scan = _text_for_scan(data)
    if "<!DOCTYPE" in scan:
        line = scan[: scan.index("<!DOCTYPE")].count("\n") + 1
        raise ChartError(
            [Problem(line, 1, "a DOCTYPE is not allowed (no DTDs or entities are processed)")]
        )
    try:
        root = etree.fromstring(data, hardened_parser())
    except etree.XMLSyntaxError as exc:
        line, column = exc.position if exc.position else (exc.lineno or 0, 1)
        message = exc.msg or str(exc)
        raise ChartError(
            [Problem(line or 0, column or 1, f"not well-formed XML: {message}")]
        ) from None
    docinfo = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None:
        # Caught here too: a DOCTYPE in UTF-16 hides from the byte search above.
        raise ChartError(
            [Problem(1, 1, "a DOCTYPE is not allowed (no DTDs or entities are processed)")]
        )
    depth = _depth(root, max_depth)
    if depth > max_depth:
        raise ChartError([Problem(1, 1, f"document nesting exceeds the limit of {max_depth}")])
    return ParsedDocument(root=root, positions=_positions(root, data), source=data, sha256=digest)


def _text_for_scan(data: bytes) -> str:
    """The document as text, whatever its encoding, only to look for a DOCTYPE."""
    for bom, codec in (
        (b"\xff\xfe\x00\x00", "utf-32"),
        (b"\x00\x00\xfe\xff", "utf-32"),
        (b"\xff\xfe", "utf-16"),
        (b"\xfe\xff", "utf-16"),
    ):
        if data.startswith(bom):
            return data.decode(codec, errors="replace")
    if data[:2] == b"<\x00":
        return data.decode("utf-16-le", errors="replace")
    if data[:2] == b"\x00<":
        return data.decode("utf-16-be", errors="replace")
    return data.decode("latin-1")


def _depth(root: etree._Element, limit: int) -> int:
    deepest = 0
    stack = [(root, 1)]
    while stack:
        element, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in element)
    return deepest


def _positions(root: etree._Element, data: bytes) -> dict[etree._Element, tuple[int, int]]:
    offsets = [m.start() for m in _TOKENS.finditer(data) if m.group(1)]
    elements = [e for e in root.iter() if isinstance(e.tag, str)]
    positions: dict[etree._Element, tuple[int, int]] = {}
    if len(offsets) != len(elements):
        return positions
    line_starts = [0] + [m.end() for m in re.finditer(rb"\n", data)]
    import bisect

    for element, offset in zip(elements, offsets, strict=True):
        line_index = bisect.bisect_right(line_starts, offset) - 1
        line = line_index + 1
        # lxml's sourceline is where the start tag ends; it can only be at or after ours.
        if element.sourceline is not None and element.sourceline < line:
            return {}
        prefix = data[line_starts[line_index] : offset]
        column = len(prefix.decode("utf-8", errors="replace")) + 1
        positions[element] = (line, column)
    return positions


def local_name(element: etree._Element) -> str:
    tag = element.tag
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def namespace(element: etree._Element) -> str | None:
    tag = element.tag
    if isinstance(tag, str) and tag.startswith("{"):
        return tag[1:].split("}", 1)[0]
    return None
