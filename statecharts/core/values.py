"""Interpreting literal bodies (``<data>``, ``<content>``, ``<assign>`` children, ``src`` files).

Spec B.2: a body that parses as JSON becomes that value; one that is XML is kept as XML;
anything else becomes a space-normalized string.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lxml import etree

from statecharts.core.datamodel.base import MAX_VALUE_DEPTH
from statecharts.core.model import UnreadableValue, XmlValue
from statecharts.core.parse import hardened_parser

_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def body_value(element: etree._Element) -> tuple[bool, Any]:
    """(has_body, value) for the children/text of ``element``."""
    children = [c for c in element if isinstance(c.tag, str)]
    if children:
        markup = "".join(etree.tostring(c, encoding="unicode", with_tail=False) for c in children)
        return True, XmlValue(markup, xml_tree(markup))
    text = element.text or ""
    if not text.strip():
        return False, None
    return True, text_value(text)


def text_value(text: str) -> Any:
    """The value of a literal body's text (B.2). JSON nested too deep for a datamodel to
    hold (or for the JSON reader) is an :class:`UnreadableValue`: refused at load, and
    ``error.execution`` when a chart stored before that binds it."""
    stripped = text.strip()
    try:
        value = json.loads(stripped)
    except RecursionError:
        return UnreadableValue(_too_deep(json_depth(stripped)))
    except ValueError:
        pass
    else:
        if stripped.count("[") + stripped.count("{") >= MAX_VALUE_DEPTH:
            depth = json_depth(stripped)
            if depth >= MAX_VALUE_DEPTH:
                return UnreadableValue(_too_deep(depth))
        return value
    if stripped.startswith("<"):
        markup = re.sub(r"^<\?xml[^>]*\?>\s*", "", stripped)
        try:
            return XmlValue(markup, xml_tree(markup))
        except etree.XMLSyntaxError:
            pass
    return " ".join(stripped.split())


def json_depth(text: str) -> int:
    """How deep the brackets of JSON ``text`` nest (inside strings they do not count).
    Iterative and linear: it measures what the JSON reader would recurse into."""
    depth = deepest = 0
    for match in _BRACKETS.finditer(text):
        token = match.group()
        if token == "[" or token == "{":
            depth += 1
            deepest = max(deepest, depth)
        elif token == "]" or token == "}":
            depth -= 1
    return deepest


def _too_deep(depth: int) -> str:
    return (
        f"this JSON nests {depth} levels deep; a datamodel value nests fewer than "
        f"{MAX_VALUE_DEPTH} levels"
    )


def xml_tree(markup: str) -> dict[str, Any]:
    """Markup as the JSON tree the ECMAScript sandbox builds its DOM from (a document node)."""
    root = etree.fromstring(f"<__sc_root>{markup}</__sc_root>".encode(), hardened_parser())

    def node(element: etree._Element) -> Any:
        children: list[Any] = []
        if element.text:
            children.append(element.text)
        for child in element:
            if isinstance(child.tag, str):
                children.append(node(child))
            if child.tail:
                children.append(child.tail)
        qname = etree.QName(element)
        return {
            "tag": f"{element.prefix}:{qname.localname}" if element.prefix else qname.localname,
            "local": qname.localname,
            "ns": qname.namespace,
            "attrs": {etree.QName(k).localname: v for k, v in element.attrib.items()},
            "children": children,
            "markup": etree.tostring(element, encoding="unicode", with_tail=False),
        }

    document = node(root)
    document["document"] = True
    document["markup"] = markup
    return document
