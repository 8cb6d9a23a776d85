"""Hostile documents: DTDs and entities, XInclude, size and depth bombs, malformed XML,
and ``src`` URIs that try to leave the chart's folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from statecharts.core import ChartError, ResolveError, load_chart
from statecharts.core.parse import MAX_DEPTH, MAX_DOCUMENT_BYTES
from statecharts.core.resolve import default_resolver, refuse_all
from statecharts.drivers.memory import MemoryDriver

NS = "http://www.w3.org/2005/07/scxml"
SECRET = "TOP-SECRET-7f3a9c"

LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" name="&lol9;">
  <state id="a">&lol9;</state>
</scxml>"""


def refused(source: str | bytes, **kwargs: object) -> ChartError:
    with pytest.raises(ChartError) as info:
        load_chart(source, **kwargs)  # type: ignore[arg-type]
    return info.value


def messages(error: ChartError) -> list[str]:
    return [str(p) for p in error.problems]


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text(SECRET)
    return path


def xxe(secret: Path) -> str:
    return f"""<!DOCTYPE scxml [
  <!ENTITY xxe SYSTEM "{secret.as_uri()}">
  <!ENTITY % pe SYSTEM "{secret.as_uri()}">
  %pe;
]>
<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript" name="&xxe;">
  <datamodel><data id="d">&xxe;</data></datamodel>
  <state id="a"/>
</scxml>"""


# ---- DTDs and entities ---------------------------------------------------------------------


@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_billion_laughs_is_refused_at_the_doctype_line(as_bytes: bool) -> None:
    source = LAUGHS.encode() if as_bytes else LAUGHS
    error = refused(source)
    assert messages(error) == [
        "2:1: a DOCTYPE is not allowed (no DTDs or entities are processed)"
    ]


def test_external_entity_is_refused_and_never_read(secret_file: Path) -> None:
    error = refused(xxe(secret_file))
    assert messages(error) == [
        "1:1: a DOCTYPE is not allowed (no DTDs or entities are processed)"
    ]
    assert SECRET not in str(error)


def test_doctype_in_utf16_is_refused_like_any_other() -> None:
    # The DOCTYPE refusal must not depend on the document's encoding.
    source = '<?xml version="1.0" encoding="UTF-16"?>\n' + LAUGHS.split("\n", 1)[1]
    error = refused(source.encode("utf-16"))
    assert [(p.line, p.column) for p in error.problems] == [(2, 1)]
    assert "DOCTYPE" in error.problems[0].message


def test_internal_entities_are_never_expanded_whatever_the_encoding() -> None:
    source = f"""<?xml version="1.0" encoding="UTF-16"?>
<!DOCTYPE scxml [<!ENTITY e "EXPANDED">]>
<scxml xmlns="{NS}" version="1.0" name="&e;"><state id="a"/></scxml>"""
    try:
        chart = load_chart(source.encode("utf-16"))
    except ChartError:
        return  # refused: fine
    assert chart.name != "EXPANDED"


def test_entity_amplification_in_utf16_is_refused_not_expanded() -> None:
    source = '<?xml version="1.0" encoding="UTF-16"?>\n' + LAUGHS.split("\n", 1)[1]
    with pytest.raises(ChartError):
        load_chart(source.encode("utf-16"))


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_external_entity_never_reaches_the_chart_whatever_the_encoding(
    secret_file: Path, encoding: str
) -> None:
    label = {"utf-16": "UTF-16", "utf-16-le": "UTF-16LE", "utf-16-be": "UTF-16BE"}[encoding]
    source = f'<?xml version="1.0" encoding="{label}"?>\n' + xxe(secret_file)
    try:
        chart = load_chart(source.encode(encoding))
    except ChartError as exc:
        assert SECRET not in str(exc)
        return
    assert SECRET not in repr(chart)
    session = MemoryDriver().start(chart)
    assert SECRET not in json.dumps(session.state.to_dict() if session.state else {})
    assert SECRET not in repr(session.effects)


def test_undeclared_entity_is_malformed_xml_with_its_position() -> None:
    source = f"""<scxml xmlns="{NS}" version="1.0">
  <state id="a">&undeclared;</state>
</scxml>"""
    error = refused(source)
    assert len(error.problems) == 1
    problem = error.problems[0]
    assert problem.line == 2
    assert problem.message.startswith("not well-formed XML: ")
    assert "undeclared" in problem.message


# ---- XInclude ------------------------------------------------------------------------------

XI = "http://www.w3.org/2001/XInclude"


def test_xinclude_among_states_is_ignored_with_a_warning(secret_file: Path) -> None:
    source = f"""<scxml xmlns="{NS}" xmlns:xi="{XI}" version="1.0" datamodel="ecmascript">
  <state id="a">
    <xi:include href="{secret_file.name}" parse="text"/>
    <xi:include href="{secret_file.as_uri()}" parse="text"/>
  </state>
</scxml>"""
    chart = load_chart(source, base_path=secret_file.parent)
    assert [(p.line, p.column, p.severity) for p in chart.warnings] == [
        (3, 5, "warning"),
        (4, 5, "warning"),
    ]
    assert all("<include> is not an SCXML element" in p.message for p in chart.warnings)
    assert SECRET not in repr(chart)
    session = MemoryDriver().start(chart)
    assert session.configuration == {"a"}
    assert SECRET not in json.dumps(session.state.to_dict() if session.state else {})


def test_xinclude_inside_data_stays_inert_markup(secret_file: Path) -> None:
    source = f"""<scxml xmlns="{NS}" xmlns:xi="{XI}" version="1.0" datamodel="ecmascript">
  <datamodel>
    <data id="d"><xi:include href="{secret_file.as_uri()}" parse="text"/></data>
  </datamodel>
  <state id="a">
    <onentry>
      <log label="text" expr="d.textContent"/>
      <send event="e"><content><xi:include href="{secret_file.name}" parse="text"/></content></send>
    </onentry>
    <transition event="e" target="b"><log label="data" expr="String(_event.data)"/></transition>
  </state>
  <state id="b"/>
</scxml>"""
    session = MemoryDriver().start(load_chart(source, base_path=secret_file.parent))
    assert session.configuration == {"b"}
    assert session.logs[0] == ("text", "")
    everything = json.dumps(session.state.to_dict() if session.state else {})
    assert "include" in everything  # the element is kept as markup ...
    assert SECRET not in everything  # ... and nothing was included
    assert SECRET not in repr(session.effects)
    assert SECRET not in repr(session.logs)


def test_xinclude_element_in_the_scxml_namespace_is_an_unknown_element(
    secret_file: Path,
) -> None:
    source = f"""<scxml xmlns="{NS}" version="1.0">
  <state id="a">
    <include href="{secret_file.as_uri()}" parse="text"/>
  </state>
</scxml>"""
    error = refused(source)
    assert messages(error) == ["3:5: unknown SCXML element <include>"]
    assert SECRET not in str(error)


# ---- size and depth ------------------------------------------------------------------------


def _padded(total_bytes: int, filler: str = "x") -> str:
    head = f'<scxml xmlns="{NS}" version="1.0"><state id="a"/><!--'
    tail = "--></scxml>"
    room = total_bytes - len(head.encode()) - len(tail.encode())
    return head + filler * (room // len(filler.encode())) + tail


def test_document_at_the_size_bound_is_accepted() -> None:
    source = _padded(MAX_DOCUMENT_BYTES)
    assert len(source.encode()) == MAX_DOCUMENT_BYTES
    assert load_chart(source).ids.keys() == {"a"}


def test_document_over_the_size_bound_is_refused() -> None:
    source = _padded(MAX_DOCUMENT_BYTES + 1)
    error = refused(source)
    assert messages(error) == [
        f"1:1: document is {MAX_DOCUMENT_BYTES + 1} bytes; the limit is {MAX_DOCUMENT_BYTES}"
    ]


def test_size_bound_counts_utf8_bytes_not_characters() -> None:
    source = _padded(MAX_DOCUMENT_BYTES + 2, filler="é")
    assert len(source) < MAX_DOCUMENT_BYTES
    error = refused(source)
    assert "the limit is" in error.problems[0].message


def _nested(states: int) -> str:
    return f'<scxml xmlns="{NS}" version="1.0">' + "<state>" * states + "</state>" * states + (
        "</scxml>"
    )


def test_nesting_at_the_depth_bound_is_accepted() -> None:
    chart = load_chart(_nested(MAX_DEPTH - 1))  # <scxml> is depth 1
    assert len(chart.states) == MAX_DEPTH


def test_nesting_deeper_than_the_bound_is_refused() -> None:
    error = refused(_nested(MAX_DEPTH))
    assert messages(error) == [f"1:1: document nesting exceeds the limit of {MAX_DEPTH}"]


def test_absurd_nesting_is_refused_without_recursion_errors() -> None:
    error = refused(_nested(100_000))
    assert len(error.problems) == 1
    assert error.problems[0].line == 1


# ---- malformed XML -------------------------------------------------------------------------


def test_mismatched_tag_reports_line_and_column() -> None:
    source = f"""<scxml xmlns="{NS}" version="1.0">
  <state id="a">
  </stat>
</scxml>"""
    error = refused(source)
    assert [(p.line, p.column) for p in error.problems] == [(3, 10)]
    assert error.problems[0].message.startswith(
        "not well-formed XML: Opening and ending tag mismatch: state line 2 and stat"
    )


def test_unquoted_attribute_reports_line_and_column() -> None:
    source = f"""<scxml xmlns="{NS}" version="1.0">

  <state id=a/>
</scxml>"""
    error = refused(source)
    assert [(p.line, p.column) for p in error.problems] == [(3, 13)]
    assert error.problems[0].message.startswith("not well-formed XML: ")


def test_garbage_after_the_root_is_malformed() -> None:
    error = refused(f'<scxml xmlns="{NS}" version="1.0"/>\n<scxml/>')
    assert [p.line for p in error.problems] == [2]
    assert "Extra content" in error.problems[0].message


def test_empty_document_is_malformed() -> None:
    error = refused("")
    assert len(error.problems) == 1
    assert error.problems[0].message.startswith("not well-formed XML")


# ---- the default resolver ------------------------------------------------------------------


ONLY_RELATIVE = (
    "only relative references inside the chart's folder are allowed (lib.js or file:lib.js)"
)


@pytest.fixture
def chart_dir(tmp_path: Path, secret_file: Path) -> Path:
    folder = tmp_path / "charts"
    (folder / "sub").mkdir(parents=True)
    (folder / "ok.js").write_text("var fromfile = 7;")
    (folder / "sub" / "nested.js").write_text("var nested = 1;")
    os.symlink(secret_file, folder / "link.txt")
    return folder


def test_default_resolver_reads_relative_files_inside_the_folder(chart_dir: Path) -> None:
    assert default_resolver("file:ok.js", str(chart_dir)) == "var fromfile = 7;"
    assert default_resolver("file:./sub/nested.js", str(chart_dir)) == "var nested = 1;"
    assert default_resolver("file:sub/../ok.js", str(chart_dir)) == "var fromfile = 7;"


def test_a_relative_reference_without_a_scheme_resolves_like_file(chart_dir: Path) -> None:
    assert default_resolver("ok.js", str(chart_dir)) == "var fromfile = 7;"
    assert default_resolver("sub/nested.js", str(chart_dir)) == "var nested = 1;"
    assert default_resolver("./sub/../ok.js", str(chart_dir)) == "var fromfile = 7;"


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        ("file:{secret}", ONLY_RELATIVE),
        ("file://{secret}", ONLY_RELATIVE),
        ("file://localhost{secret}", ONLY_RELATIVE),
        ("{secret}", ONLY_RELATIVE),
        ("file:C:/Windows/win.ini", ONLY_RELATIVE),
        ("file:../secret.txt", "it leaves the chart's folder"),
        ("file:sub/../../secret.txt", "it leaves the chart's folder"),
        ("file:./../secret.txt", "it leaves the chart's folder"),
        ("file:link.txt", "it leaves the chart's folder"),  # a symlink pointing outside
        ("file:.", "it leaves the chart's folder"),
        ("http://example.com/chart.scxml", ONLY_RELATIVE),
        ("https://example.com/chart.scxml", ONLY_RELATIVE),
        ("ftp://example.com/chart.scxml", ONLY_RELATIVE),
        ("data:text/plain,hello", ONLY_RELATIVE),
        # the same without a scheme: absolute, escaping, a drive letter, a UNC path
        ("../secret.txt", "it leaves the chart's folder"),
        ("sub/../../secret.txt", "it leaves the chart's folder"),
        ("link.txt", "it leaves the chart's folder"),
        ("C:/Windows/win.ini", ONLY_RELATIVE),
        ("c:ok.js", ONLY_RELATIVE),
        ("\\\\server\\share\\x.js", ONLY_RELATIVE),
        ("//example.com/x.js", ONLY_RELATIVE),
        ("", ONLY_RELATIVE),
        ("FILE:ok.js", ONLY_RELATIVE),
    ],
)
def test_default_resolver_refuses(chart_dir: Path, secret_file: Path, uri: str,
                                  reason: str) -> None:
    uri = uri.format(secret=secret_file)
    with pytest.raises(ResolveError) as info:
        default_resolver(uri, str(chart_dir))
    assert str(info.value) == f"cannot resolve {uri!r}: {reason}"
    assert SECRET not in str(info.value)


def test_default_resolver_needs_a_folder() -> None:
    with pytest.raises(ResolveError, match="the chart was not loaded from a folder"):
        default_resolver("file:ok.js", None)


def test_default_resolver_reports_unreadable_files(chart_dir: Path) -> None:
    with pytest.raises(ResolveError) as info:
        default_resolver("file:missing.js", str(chart_dir))
    assert str(info.value) == "cannot read 'file:missing.js': No such file or directory"
    # percent-escapes are not decoded into a way out of the folder
    with pytest.raises(ResolveError, match="cannot read"):
        default_resolver("file:%2e%2e/secret.txt", str(chart_dir))


def test_refuse_all_refuses_everything(chart_dir: Path) -> None:
    for uri in ("file:ok.js", "http://example.com/x", "file:../secret.txt"):
        with pytest.raises(ResolveError) as info:
            refuse_all(uri, str(chart_dir))
        assert str(info.value) == f"cannot resolve {uri!r}: external documents are disabled"


# ---- the resolver as used by charts ------------------------------------------------------


def test_script_src_escaping_the_folder_refuses_the_chart(chart_dir: Path) -> None:
    source = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript">
  <state id="a"/>
  <script src="file:../secret.txt"/>
</scxml>"""
    error = refused(source, base_path=chart_dir)
    assert messages(error) == [
        "3:3: cannot resolve 'file:../secret.txt': it leaves the chart's folder"
    ]


def test_script_src_inside_the_folder_runs(chart_dir: Path) -> None:
    source = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript">
  <script src="file:ok.js"/>
  <state id="a"/>
</scxml>"""
    session = MemoryDriver().start(load_chart(source, base_path=chart_dir))
    assert session.datamodel == {"fromfile": 7}


def test_data_src_outside_the_folder_becomes_error_execution(
    chart_dir: Path, secret_file: Path
) -> None:
    source = f"""<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript">
  <datamodel>
    <data id="d" src="{secret_file.as_uri()}"/>
  </datamodel>
  <state id="a"><transition event="error.execution" target="failed"/></state>
  <state id="failed"/>
</scxml>"""
    chart = load_chart(source, base_path=chart_dir)
    assert [(p.line, p.column, p.severity) for p in chart.warnings] == [(3, 5, "warning")]
    session = MemoryDriver().start(chart)
    assert session.configuration == {"failed"}
    assert SECRET not in json.dumps(session.state.to_dict() if session.state else {})


@pytest.mark.parametrize("use_refuse_all", [False, True], ids=["escape", "refuse_all"])
def test_invoke_src_that_cannot_resolve_becomes_error_execution(
    chart_dir: Path, use_refuse_all: bool
) -> None:
    (chart_dir / "child.scxml").write_text(
        f'<scxml xmlns="{NS}" version="1.0"><final id="f"/></scxml>'
    )
    src = "file:child.scxml" if use_refuse_all else "file:../child.scxml"
    source = f"""<scxml xmlns="{NS}" version="1.0">
  <state id="a">
    <invoke src="{src}"/>
    <transition event="error.execution" target="failed"/>
    <transition event="done.invoke" target="invoked"/>
  </state>
  <state id="failed"/>
  <state id="invoked"/>
</scxml>"""
    driver = MemoryDriver(resolver=refuse_all) if use_refuse_all else MemoryDriver()
    session = driver.start(driver.load(source, base_path=chart_dir))
    assert session.configuration == {"failed"}
    assert list(driver.sessions) == [session.session_id]  # no child was started
