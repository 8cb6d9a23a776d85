"""Hardened XML parsing: no DTD, no entities, no network, no XInclude, bounded size and depth.

lxml reports a line per element but no column, so columns are recovered from the source
text: start tags appear in the text in the same order as elements in the tree.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from statecharts.core.errors import ChartError, Problem

SCXML_NS = "http://www.w3.org/2005/07/scxml"

MAX_DOCUMENT_BYTES = 2 * 1024 * 1024
MAX_DEPTH = 128

_TOKENS = re.compile(
    rb"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>|<!DOCTYPE|<([^\s/>!?][^\s/>]*)", re.DOTALL
)

# _TOKENS's start tags alone: the same offsets in a document holding none of its other tokens.
_START_TAGS = re.compile(rb"<[^\s/>!?]")


@dataclass(frozen=True, slots=True)
class Outline:
    """Every element of a document classified once, for validation and compilation to ask
    in dictionary lookups instead of walking lxml's tags again and again (one pass over the
    document; comments and processing instructions left out).

    - ``names``: each element's local name;
    - ``in_ns``: whether it is in the root's namespace (in none, when the root is in none):
      an SCXML element, as far as the document is one;
    - ``children``: its element children, in document order (read only).
    """

    names: dict[etree._Element, str]
    in_ns: dict[etree._Element, bool]
    children: dict[etree._Element, list[etree._Element]]


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    root: etree._Element
    positions: dict[etree._Element, tuple[int, int]]  # element -> (line, column), 1-based
    source: bytes  # what was parsed (a text source's encoding declaration removed)
    sha256: str  # of the document as given (a text source: its UTF-8 bytes): its identity
    outline: Outline

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
    data = encode_utf8(source) if isinstance(source, str) else bytes(source)
    digest = hashlib.sha256(data).hexdigest()
    if isinstance(source, str):
        # An encoding declaration would contradict the bytes we just produced.
        data = re.sub(rb"^\s*<\?xml[^>]*\?>", b"", data, count=1)
    if len(data) > max_bytes:
        raise ChartError(
            [Problem(1, 1, f"document is {len(data)} bytes; the limit is {max_bytes}")]
        )
    scan = _text_for_scan(data)
    doctype = _doctype_offset(scan)
    if doctype is not None:
        line = scan.count("\n", 0, doctype) + 1
        column = doctype - (scan.rfind("\n", 0, doctype) + 1) + 1
        raise ChartError(
            [Problem(line, column, "a DOCTYPE is not allowed (no DTDs or entities are processed)")]
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
    # The elements' Python proxies are made once and kept (by the outline) for as long as
    # the document: lxml frees a proxy by walking up its ancestors, so proxies made and
    # dropped again in a walk of a deeply nested tree cost its depth each.
    elements = list(root.iter(etree.Element))
    depth = _depth(root, max_depth)
    if depth > max_depth:
        raise ChartError([Problem(1, 1, f"document nesting exceeds the limit of {max_depth}")])
    return ParsedDocument(
        root=root,
        positions=_positions(elements, data),
        source=data,
        sha256=digest,
        outline=_outline(root, elements),
    )


def _where(text: str, index: int) -> tuple[int, int]:
    """(line, column), 1-based, of the character at ``index`` of ``text``."""
    line_start = text.rfind("\n", 0, index) + 1
    return text.count("\n", 0, index) + 1, index - line_start + 1


def encode_utf8(text: str) -> bytes:
    """``text`` as UTF-8, or ChartError where a character cannot be (a lone surrogate, as
    left by decoding invalid bytes with ``errors="surrogateescape"``)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        line, column = _where(text, exc.start)
        raise ChartError(
            [Problem(line, column, f"U+{ord(text[exc.start]):04X} is not a character (a lone "
                     "surrogate: was the document decoded from invalid UTF-8?)")]
        ) from None


def decode_utf8(data: bytes) -> str:
    """A document's bytes as text, for hosts that store charts as text: UTF-8 (a leading BOM
    dropped), or ChartError naming the line and column of the first byte that is not."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        good = data[: exc.start].decode("utf-8-sig")
        line, column = _where(good, len(good))
        raise ChartError(
            [Problem(line, column, f"byte 0x{data[exc.start]:02X} is not valid UTF-8 "
                     f"(a chart stored as text must be UTF-8)")]
        ) from None


def read_document(path: str | Path, *, max_bytes: int = MAX_DOCUMENT_BYTES) -> bytes:
    """A chart file's bytes, read at most one byte past ``max_bytes``: a file that is too
    big (or endless, such as /dev/zero) is refused with ChartError instead of read whole.
    OSError (a missing file, a directory, no permission) is raised as it is."""
    with open(path, "rb") as stream:
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ChartError(
            [Problem(1, 1, f"document is over {max_bytes} bytes; the limit is {max_bytes}")]
        )
    return data


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


# Markup that may contain the text "<!DOCTYPE" without declaring one, and where it ends.
_OPAQUE_END = {"<!--": "-->", "<![CDATA[": "]]>", "<?": "?>"}
_MARKUP = re.compile(r"<!--|<!\[CDATA\[|<\?|<!DOCTYPE")


def _doctype_offset(text: str) -> int | None:
    """Where a DOCTYPE declaration starts in ``text``, or None. The text ``<!DOCTYPE``
    inside a comment, a CDATA section or a processing instruction declares nothing and is
    skipped. One pass: each such piece is searched for its end once; an unterminated one
    ends the search (the parser then reports it)."""
    position = 0
    while True:
        found = _MARKUP.search(text, position)
        if found is None:
            return None
        opener = found.group()
        if opener == "<!DOCTYPE":
            return found.start()
        end = text.find(_OPAQUE_END[opener], found.end())
        if end < 0:
            return None
        position = end + len(_OPAQUE_END[opener])


def _depth(root: etree._Element, limit: int) -> int:
    """How deep the tree under ``root`` goes (the root is 1; comments and processing
    instructions count as nodes), or the first depth past ``limit``. One level at a time:
    each node's children are taken by one call in C, whatever the shape."""
    level: list[etree._Element] = [root]
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return depth
        below: list[etree._Element] = []
        extend = below.extend
        for node in level:
            extend(node)
        level = below
    return depth


def _outline(root: etree._Element, elements: list[etree._Element]) -> Outline:
    """The :class:`Outline` of the document whose elements, in document order, are
    ``elements``: one look at each element's tag and one call for its children."""
    scxml = namespace(root)
    prefix = f"{{{scxml}}}" if scxml is not None else None
    start = len(prefix) if prefix is not None else 0
    names: dict[etree._Element, str] = {}
    in_ns: dict[etree._Element, bool] = {}
    children: dict[etree._Element, list[etree._Element]] = {}
    # An element's children are a slice of it (one call, the cheapest lxml has) unless the
    # document holds comments, processing instructions or entities, which the slice would
    # include: then only its element children are taken.
    others = next(root.iter(etree.Comment, etree.ProcessingInstruction, etree.Entity), None)
    taken = _slice if others is None else _element_children
    # Each distinct tag classified once: most documents use a dozen tags, and the elements
    # that share one share its local name (one string, not one per element).
    classified: dict[str, tuple[str, bool]] = {}
    sliced = taken is _slice
    for element in elements:
        tag: str = element.tag
        known = classified.get(tag)
        if known is None:
            if prefix is not None and tag.startswith(prefix):
                known = (tag[start:], True)
            elif tag[:1] == "{":
                known = (tag[tag.find("}") + 1 :], False)
            else:
                known = (tag, prefix is None)
            classified[tag] = known
        names[element], in_ns[element] = known
        children[element] = element[:] if sliced else taken(element)
    return Outline(names, in_ns, children)


def _slice(element: etree._Element) -> list[etree._Element]:
    return element[:]


def _element_children(element: etree._Element) -> list[etree._Element]:
    return list(element.iterchildren(etree.Element))


def _positions(
    elements: list[etree._Element], data: bytes
) -> dict[etree._Element, tuple[int, int]]:
    """Each element's start tag as (line, column), 1-based; the column counts characters.

    Linear in the document whatever its shape: the offsets come in increasing order, so the
    column of a tag is the previous tag's column plus the characters between the two when
    they share a line (recounting from the start of the line was quadratic on a document
    written on one line).
    """
    if b"<!" in data or b"<?" in data:
        offsets = [m.start() for m in _TOKENS.finditer(data) if m.group(1)]
    else:  # no comment, CDATA, PI or DOCTYPE: what _TOKENS would find is every start tag
        offsets = [m.start() for m in _START_TAGS.finditer(data)]
    positions: dict[etree._Element, tuple[int, int]] = {}
    if len(offsets) != len(elements):
        return positions
    line = 1
    line_start = 0  # offset of the first byte of the current line
    previous = 0  # offset of the previous tag (or of the line start), where counting resumes
    column = 1
    ascii = data.isascii()
    for element, offset in zip(elements, offsets, strict=True):
        newlines = data.count(b"\n", previous, offset)
        if newlines:
            line += newlines
            line_start = data.rindex(b"\n", previous, offset) + 1
            previous = line_start
            column = 1
        # Tag offsets are at "<" bytes, never inside a UTF-8 sequence, so the pieces decode
        # to exactly the characters of the whole (in ASCII, one byte is one character).
        if ascii:
            column += offset - previous
        else:
            column += len(data[previous:offset].decode("utf-8", errors="replace"))
        previous = offset
        # lxml's sourceline is where the start tag ends; it can only be at or after ours.
        if element.sourceline is not None and element.sourceline < line:
            return {}
        positions[element] = (line, column)
    return positions


def local_name(element: etree._Element) -> str:
    tag = element.tag
    if type(tag) is not str:
        return ""
    return tag[tag.find("}") + 1 :]


def namespace(element: etree._Element) -> str | None:
    tag = element.tag
    if type(tag) is str and tag[:1] == "{":
        return tag[1 : tag.find("}")]
    return None
