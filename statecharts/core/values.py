"""Interpreting literal bodies (``<data>``, ``<content>``, ``<assign>`` children, ``src`` files).

Spec B.2: a body that parses as JSON becomes that value; one that is XML is kept as XML;
anything else becomes a space-normalized string.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lxml import etree

from statecharts.core.model import XmlValue
from statecharts.core.parse import hardened_parser


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
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    if stripped.startswith("<"):
        markup = re.sub(r"^<\?xml[^>]*\?>\s*", "", stripped)
        try:
            return XmlValue(markup, xml_tree(markup))
        except etree.XMLSyntaxError:
            pass
    return " ".join(stripped.split())


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
