"""Hardened XML parsing: no DTD, no entities, no network, no XInclude, bounded size and depth.

lxml reports a line per element but no column, so columns are recovered from the source
text: start tags appear in the text in the same order as elements in the tree.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
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


# What the outline knows of one element, as a plain tuple (made once per element, and a
# 2 MB document can hold 65k of them: a class instance or a NamedTuple costs several times
# more to make). Unpack it: ``name, in_ns, children, attributes, line, column = facts[e]``.
# - name: its local name;
# - in_ns: whether it is in the root's namespace (in none, when the root is in none): an
#   SCXML element, as far as the document is one;
# - children: its element children, in document order (read only; () for a leaf);
# - attributes: its attributes by name, as ``element.get`` reads them (read only): lxml's
#   mapping of them, each value read when asked (see _attributes);
# - line, column: of its start tag, 1-based (see ParsedDocument.position).
Facts = tuple[str, bool, Sequence[etree._Element], Mapping[str, str], int, int]


@dataclass(frozen=True, slots=True)
class Outline:
    """Every element of a document read from lxml once, for validation and compilation to
    ask in dictionary lookups instead of asking lxml again and again (one pass over the
    document; comments and processing instructions left out): ``facts`` per element (see
    :data:`Facts`)."""

    facts: dict[etree._Element, Facts]


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    root: etree._Element
    source: bytes  # what was parsed (a text source's encoding declaration removed)
    sha256: str  # of the document as given (a text source: its UTF-8 bytes): its identity
    outline: Outline

    def position(self, element: etree._Element) -> tuple[int, int]:
        """(line, column), 1-based, of ``element``'s start tag: its column counts characters.
        When the start tags could not be matched with the elements, lxml's line (where the
        start tag ends) and column 1."""
        found = self.outline.facts.get(element)
        if found is not None:
            return found[4], found[5]
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
    outline, complete = _outline(root, elements, data)
    depth = _depth(root, max_depth, outline.facts if complete else None)
    if depth > max_depth:
        raise ChartError([Problem(1, 1, f"document nesting exceeds the limit of {max_depth}")])
    return ParsedDocument(root=root, source=data, sha256=digest, outline=outline)


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
            [
                Problem(
                    line,
                    column,
                    f"U+{ord(text[exc.start]):04X} is not a character (a lone "
                    "surrogate: was the document decoded from invalid UTF-8?)",
                )
            ]
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
            [
                Problem(
                    line,
                    column,
                    f"byte 0x{data[exc.start]:02X} is not valid UTF-8 "
                    f"(a chart stored as text must be UTF-8)",
                )
            ]
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


def _depth(
    root: etree._Element, limit: int, facts: dict[etree._Element, Facts] | None = None
) -> int:
    """How deep the tree under ``root`` goes (the root is 1; comments and processing
    instructions count as nodes), or the first depth past ``limit``. One level at a time:
    each node's children are taken by one call in C, whatever the shape; or, given the
    ``facts`` of a document with no nodes but elements, from there (no call to lxml)."""
    level: list[etree._Element] = [root]
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return depth
        below: list[etree._Element] = []
        extend = below.extend
        if facts is None:
            for node in level:
                extend(node)
        else:
            for node in level:
                extend(facts[node][2])
        level = below
    return depth


def _attributes(element: etree._Element) -> Mapping[str, str]:
    """``element``'s attributes by name, as ``element.get`` reads them: lxml's own mapping
    of them (``element.attrib``), which reads a value from the tree when it is asked for,
    in C, linear in the attributes whatever their number.

    Why not a dict of them all, read once: lxml makes a new string for each name of each
    element, and the dicts and names were 13-18 MB of peak memory on a 2 MB document
    (65k elements), where the loading passes ask each element for a few values; and
    ``items()`` reads each value by its name from the first attribute (quadratic: an
    element with 130k attributes took minutes)."""
    return element.attrib  # type: ignore[return-value]


def _outline(
    root: etree._Element, elements: list[etree._Element], data: bytes
) -> tuple[Outline, bool]:
    """The :class:`Outline` of the document ``data`` whose elements, in document order, are
    ``elements``, and whether they are all its nodes (no comment, processing instruction
    or entity). One pass, four calls to lxml per element: its tag, its children, its line
    and its attributes' mapping (see _attributes).

    Positions: each element's start tag as (line, column), 1-based; the column counts
    characters. Linear in the document whatever its shape: the start tags found in the text
    come in document order, like ``elements``, so the column of a tag is the previous tag's
    column plus the characters between the two when they share a line (recounting from the
    start of the line was quadratic on a document written on one line). When the tags found
    do not match the elements, each element's position is lxml's line (where its start tag
    ends) and column 1.
    """
    scxml = namespace(root)
    prefix = f"{{{scxml}}}" if scxml is not None else None
    start = len(prefix) if prefix is not None else 0
    facts: dict[etree._Element, Facts] = {}
    # An element's children are a slice of it (one call, the cheapest lxml has) unless the
    # document holds comments, processing instructions or entities, which the slice would
    # include: then only its element children are taken.
    others = next(root.iter(etree.Comment, etree.ProcessingInstruction, etree.Entity), None)
    sliced = others is None
    # Each distinct tag classified once: most documents use a dozen tags, and the elements
    # that share one share its local name (one string, not one per element).
    classified: dict[str, tuple[str, bool]] = {}
    leaf: Sequence[etree._Element] = ()  # every leaf's children (one tuple for all)
    offsets = _start_tags(data, len(elements))
    if offsets is None:
        return _outline_without_offsets(elements, facts, classified, prefix, start, sliced)
    count, rindex = data.count, data.rindex
    line = 1
    previous = 0  # offset of the previous tag (or of the line start), where counting resumes
    column = 1
    ascii = data.isascii()
    for element, offset in zip(elements, offsets, strict=True):
        newlines = count(b"\n", previous, offset)
        if newlines:
            line += newlines
            previous = rindex(b"\n", previous, offset) + 1  # the line's start
            column = 1
        # Tag offsets are at "<" bytes, never inside a UTF-8 sequence, so the pieces decode
        # to exactly the characters of the whole (in ASCII, one byte is one character).
        if ascii:
            column += offset - previous
        else:
            column += len(data[previous:offset].decode("utf-8", errors="replace"))
        previous = offset
        # lxml's sourceline is where the start tag ends; it can only be at or after ours.
        sourceline = element.sourceline
        if sourceline is not None and sourceline < line:
            facts.clear()
            return _outline_without_offsets(elements, facts, classified, prefix, start, sliced)
        tag: str = element.tag
        known = classified.get(tag)
        if known is None:
            known = classified[tag] = _classify(tag, prefix, start)
        facts[element] = (
            known[0],
            known[1],
            (element[:] or leaf) if sliced else _element_children(element),
            element.attrib,  # (see _attributes)
            line,
            column,
        )
    return Outline(facts), sliced


def _outline_without_offsets(
    elements: list[etree._Element],
    facts: dict[etree._Element, Facts],
    classified: dict[str, tuple[str, bool]],
    prefix: str | None,
    start: int,
    sliced: bool,
) -> tuple[Outline, bool]:
    """_outline's pass where the start tags in the text do not match the elements."""
    for element in elements:
        tag: str = element.tag
        known = classified.get(tag)
        if known is None:
            known = classified[tag] = _classify(tag, prefix, start)
        facts[element] = (
            known[0],
            known[1],
            (element[:] or ()) if sliced else _element_children(element),
            _attributes(element),
            element.sourceline or 0,
            1,
        )
    return Outline(facts), sliced


def _classify(tag: str, prefix: str | None, start: int) -> tuple[str, bool]:
    """The local name of an element whose tag is ``tag``, and whether it is in the root's
    namespace (``prefix``: "{namespace}", None for none; ``start``: its length)."""
    if prefix is not None and tag.startswith(prefix):
        return (tag[start:], True)
    if tag[:1] == "{":
        return (tag[tag.find("}") + 1 :], False)
    return (tag, prefix is None)


def _element_children(element: etree._Element) -> Sequence[etree._Element]:
    return list(element.iterchildren(etree.Element)) or ()


def _start_tags(data: bytes, elements: int) -> list[int] | None:
    """The offsets of the start tags in ``data``, in order; None unless there are
    ``elements`` of them."""
    if b"<!" in data or b"<?" in data:
        offsets = [m.start() for m in _TOKENS.finditer(data) if m.group(1)]
    else:  # no comment, CDATA, PI or DOCTYPE: what _TOKENS would find is every start tag
        offsets = [m.start() for m in _START_TAGS.finditer(data)]
    return offsets if len(offsets) == elements else None


def namespace(element: etree._Element) -> str | None:
    tag = element.tag
    if type(tag) is str and tag[:1] == "{":
        return tag[1 : tag.find("}")]
    return None
