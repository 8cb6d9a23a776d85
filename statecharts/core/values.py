"""Interpreting literal bodies (``<data>``, ``<content>``, ``<assign>`` children, ``src`` files).

Spec B.2: a body that parses as JSON becomes that value; one that is XML is kept as XML;
anything else becomes a space-normalized string.
"""

from __future__ import annotations

import json
from typing import Any

from lxml import etree

from statecharts.core.model import XmlValue


def body_value(element: etree._Element) -> tuple[bool, Any]:
    """(has_body, value) for the children/text of ``element``."""
    children = [c for c in element if isinstance(c.tag, str)]
    if children:
        markup = "".join(
            etree.tostring(c, encoding="unicode", with_tail=False) for c in children
        )
        return True, XmlValue(markup)
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
        try:
            etree.fromstring(stripped.encode(), etree.XMLParser(resolve_entities=False,
                                                                no_network=True, load_dtd=False))
            return XmlValue(stripped)
        except etree.XMLSyntaxError:
            pass
    return " ".join(stripped.split())
