"""Validation: every message of ``statecharts.core.validate`` (and its ``element_rules``), each at
its exact line:column.

Each case is a small multi-line document and the exact list of errors it must produce, so a
test fails both when a problem is missed and when a spurious one is added.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from statecharts.core import ChartError, Problem, load_chart
from statecharts.core.resolve import refuse_all

NS = "http://www.w3.org/2005/07/scxml"
ROOT = f'<scxml xmlns="{NS}" version="1.0"'
ROOT_JS = f'<scxml xmlns="{NS}" version="1.0" datamodel="ecmascript"'

Triple = tuple[int, int, str]


def refused(source: str, **kwargs: object) -> ChartError:
    with pytest.raises(ChartError) as info:
        load_chart(source, **kwargs)  # type: ignore[arg-type]
    return info.value


def errors(source: str) -> list[Triple]:
    return [(p.line, p.column, p.message) for p in refused(source).problems]


def warnings_of(source: str) -> list[Triple]:
    chart = load_chart(source)
    return [(p.line, p.column, p.message) for p in chart.warnings if p.severity == "warning"]


# ---- one mistake per document ------------------------------------------------------------

CASES: dict[str, tuple[str, list[Triple]]] = {
    "unknown transition target": (
        f"""{ROOT}>
  <state id="a">
    <transition event="go" target="nowhere"/>
  </state>
</scxml>""",
        [(3, 5, "transition target 'nowhere' does not exist")],
    ),
    "one of several targets unknown": (
        f"""{ROOT}>
  <parallel id="p">
    <state id="x"/>
    <state id="y"><transition event="go" target="x zz"/></state>
  </parallel>
</scxml>""",
        [(4, 19, "transition target 'zz' does not exist")],
    ),
    "duplicate id names where it was first defined": (
        f"""{ROOT}>
  <state id="a">
    <state id="inner"/>
  </state>
      <final id="inner"/>
</scxml>""",
        [(5, 7, "duplicate id 'inner' (first defined at 3:5)")],
    ),
    "invalid id": (
        f"""{ROOT}>
  <state id="1abc"/>
</scxml>""",
        [(2, 3, "'1abc' is not a valid id")],
    ),
    "root initial does not exist": (
        f"""{ROOT} initial="ghost">
  <state id="a"/>
</scxml>""",
        [(1, 1, "initial state 'ghost' does not exist")],
    ),
    "state initial does not exist": (
        f"""{ROOT}>
  <state id="a" initial="ghost">
    <state id="a1"/>
  </state>
</scxml>""",
        [(2, 3, "initial state 'ghost' does not exist")],
    ),
    "state initial is not a descendant": (
        f"""{ROOT}>
  <state id="a" initial="b">
    <state id="a1"/>
  </state>
  <state id="b"/>
</scxml>""",
        [(2, 3, "initial state 'b' is not a descendant of 'a'")],
    ),
    "initial element target is not a descendant": (
        f"""{ROOT}>
  <state id="a">
    <initial><transition target="b"/></initial>
    <state id="a1"/>
  </state>
  <state id="b"/>
</scxml>""",
        [(3, 14, "<initial> target 'b' is not a descendant of 'a'")],
    ),
    "initial element target does not exist": (
        f"""{ROOT}>
  <state id="a">
    <initial>
      <transition target="ghost"/>
    </initial>
    <state id="a1"/>
  </state>
</scxml>""",
        [(4, 7, "transition target 'ghost' does not exist")],
    ),
    "initial element without a transition": (
        f"""{ROOT}>
  <state id="a">
    <initial/>
    <state id="a1"/>
  </state>
</scxml>""",
        [(3, 5, "<initial> must contain exactly one <transition>")],
    ),
    "initial element transition with event and no target": (
        f"""{ROOT}>
  <state id="a">
    <initial>
      <transition event="go"/>
    </initial>
    <state id="a1"/>
  </state>
</scxml>""",
        [
            (4, 7, "the <transition> of <initial> may not have 'event' or 'cond'"),
            (4, 7, "the <transition> of <initial> needs a target"),
        ],
    ),
    "initial attribute and initial element": (
        f"""{ROOT}>
  <state id="a" initial="a1">
    <initial><transition target="a1"/></initial>
    <state id="a1"/>
  </state>
</scxml>""",
        [(2, 3, "a state may not have both an 'initial' attribute and <initial>")],
    ),
    "two initial elements": (
        f"""{ROOT}>
  <state id="a">
    <initial><transition target="a1"/></initial>
    <initial><transition target="a1"/></initial>
    <state id="a1"/>
  </state>
</scxml>""",
        [(4, 5, "a state may have at most one <initial>")],
    ),
    "atomic state with an initial": (
        f"""{ROOT}>
  <state id="a" initial="a">
  </state>
</scxml>""",
        [
            (2, 3, "an atomic state cannot have an initial state"),
            (2, 3, "initial state 'a' is not a descendant of 'a'"),
        ],
    ),
    "shallow history default must be a child": (
        f"""{ROOT}>
  <state id="p">
    <history id="h">
      <transition target="grandchild"/>
    </history>
    <state id="c"><state id="grandchild"/></state>
  </state>
</scxml>""",
        [(4, 7, "history default 'grandchild' must be a child of the history's parent state")],
    ),
    "deep history default must be a descendant": (
        f"""{ROOT}>
  <state id="p">
    <history id="h" type="deep">
      <transition target="outside"/>
    </history>
    <state id="c"><state id="grandchild"/></state>
  </state>
  <state id="outside"/>
</scxml>""",
        [(4, 7, "history default 'outside' must be a descendant of the history's parent state")],
    ),
    "history default target does not exist": (
        f"""{ROOT}>
  <state id="p">
    <history id="h"><transition target="ghost"/></history>
    <state id="c"/>
  </state>
</scxml>""",
        [(3, 21, "transition target 'ghost' does not exist")],
    ),
    "history type, second default, event on default, missing target": (
        f"""{ROOT}>
  <state id="p">
    <history id="h" type="medium">
      <transition event="e" target="c"/>
      <transition/>
    </history>
    <state id="c"/>
  </state>
</scxml>""",
        [
            (3, 5, 'history type must be "shallow" or "deep", not "medium"'),
            (4, 7, "a history default transition may not have 'event' or 'cond'"),
            (5, 7, "<history> may have at most one default <transition>"),
            (5, 7, "a history default transition needs a target"),
        ],
    ),
    "malformed delay": (
        f"""{ROOT}>
  <state id="a">
    <onentry>
       <send event="tick" delay="soon"/>
    </onentry>
  </state>
</scxml>""",
        [(4, 8, "malformed delay 'soon' (use e.g. 500ms, 2s, 1.5s, 5m, 3h, 3d)")],
    ),
    "delay without a unit": (
        f"""{ROOT}>
  <state id="a"><onentry><send event="tick" delay="5"/></onentry></state>
</scxml>""",
        [(2, 26, "malformed delay '5' (use e.g. 500ms, 2s, 1.5s, 5m, 3h, 3d)")],
    ),
    "unknown datamodel": (
        f"""<scxml xmlns="{NS}" datamodel="python">
  <state id="a"/>
</scxml>""",
        [(1, 1, 'unknown datamodel "python" (supported: null, ecmascript)')],
    ),
    "unsupported version": (
        f"""<scxml xmlns="{NS}" version="2.0">
  <state id="a"/>
</scxml>""",
        [(1, 1, 'version="2.0" is not supported (only "1.0")')],
    ),
    "bad binding": (
        f"""{ROOT} binding="lazy">
  <state id="a"/>
</scxml>""",
        [(1, 1, 'binding must be "early" or "late", not "lazy"')],
    ),
    "root is not scxml": (
        f"""<state xmlns="{NS}" id="a">
</state>""",
        [(1, 1, "the root element must be <scxml>, not <state>")],
    ),
    "root in a foreign namespace": (
        """<scxml xmlns="urn:not-scxml">
  <state id="a"/>
</scxml>""",
        [(1, 1, f"<scxml> is in namespace 'urn:not-scxml', expected '{NS}'")],
    ),
    "executable content directly in a state": (
        f"""{ROOT}>
  <state id="a">
    <log expr="'x'"/>
  </state>
</scxml>""",
        [(3, 5, "executable content <log> is not allowed inside <state>; "
                "put it in <onentry>, <onexit> or a <transition>")],
    ),
    "executable content at the top level": (
        f"""{ROOT}>
  <raise event="x"/>
  <state id="a"/>
</scxml>""",
        [(2, 3, "executable content <raise> is not allowed inside <scxml>; "
                "put it in <onentry>, <onexit> or a <transition>")],
    ),
    "structure inside executable content": (
        f"""{ROOT}>
  <state id="a">
    <onentry>
      <transition target="a"/>
    </onentry>
  </state>
</scxml>""",
        [(4, 7, "<transition> is not executable content and cannot appear inside <onentry>")],
    ),
    "element not allowed in this parent": (
        f"""{ROOT}>
  <final id="f">
    <datamodel/>
  </final>
</scxml>""",
        [(3, 5, "<datamodel> is not allowed inside <final>")],
    ),
    "unknown SCXML element": (
        f"""{ROOT}>
  <state id="a">
    <frobnicate/>
  </state>
</scxml>""",
        [(3, 5, "unknown SCXML element <frobnicate>")],
    ),
    "else outside if": (
        f"""{ROOT}>
  <state id="a">
    <onentry>
      <else/>
    </onentry>
  </state>
</scxml>""",
        [(4, 7, "<else> may only appear inside <if>")],
    ),
    "elseif outside if": (
        f"""{ROOT_JS}>
  <state id="a">
    <transition event="e">
      <foreach array="[1]" item="i"><elseif cond="true"/></foreach>
    </transition>
  </state>
</scxml>""",
        [(4, 37, "<elseif> may only appear inside <if>")],
    ),
    "two else and elseif after else": (
        f"""{ROOT_JS}>
  <state id="a"><onentry>
    <if cond="true">
      <else/>
      <elseif cond="false"/>
      <else/>
    </if>
  </onentry></state>
</scxml>""",
        [
            (5, 7, "<elseif> may not follow <else>"),
            (6, 7, "<if> may have only one <else>"),
        ],
    ),
    "assign with both expr and body": (
        f"""{ROOT_JS}>
  <datamodel><data id="x"/></datamodel>
  <state id="a"><onentry>
    <assign location="x" expr="1">2</assign>
  </onentry></state>
</scxml>""",
        [(4, 5, "<assign> may not have both 'expr' and a body")],
    ),
    "assign with neither expr nor body": (
        f"""{ROOT_JS}>
  <datamodel><data id="x"/></datamodel>
  <state id="a"><onentry>
    <assign location="x"/>
  </onentry></state>
</scxml>""",
        [(4, 5, "<assign> needs 'expr' or a body")],
    ),
    "content with both expr and body": (
        f"""{ROOT_JS}>
  <state id="a"><onentry>
    <send event="e">
      <content expr="1">two</content>
    </send>
  </onentry></state>
</scxml>""",
        [(4, 7, "<content> may not have both 'expr' and a body")],
    ),
    "data with both expr and body": (
        f"""{ROOT_JS}>
  <datamodel>
    <data id="x" expr="1">2</data>
  </datamodel>
  <state id="a"/>
</scxml>""",
        [(3, 5, "<data> may have only one of 'expr', 'src' and a body")],
    ),
    "data with both src and expr": (
        f"""{ROOT_JS}>
  <datamodel>
    <data id="x" src="file:x.json" expr="1"/>
  </datamodel>
  <state id="a"/>
</scxml>""",
        [(3, 5, "<data> may not have both 'src' and 'expr'")],
    ),
    "data id is not an ECMAScript identifier": (
        f"""{ROOT_JS}>
  <datamodel>
    <data id="my-var" expr="1"/>
  </datamodel>
  <state id="a"/>
</scxml>""",
        [(3, 5, "data id 'my-var' is not a valid ECMAScript identifier")],
    ),
    "script with both src and body": (
        f"""{ROOT_JS}>
  <script src="file:x.js">var x = 1;</script>
  <state id="a"/>
</scxml>""",
        [(2, 3, "<script> may not have both 'src' and a body")],
    ),
    "missing required attributes": (
        f"""{ROOT_JS}>
  <datamodel><data/></datamodel>
  <state id="a"><onentry>
    <raise/>
    <assign expr="1"/>
    <if><log/></if>
  </onentry></state>
</scxml>""",
        [
            (2, 14, "<data> requires the attribute 'id'"),
            (4, 5, "<raise> requires the attribute 'event'"),
            (5, 5, "<assign> requires the attribute 'location'"),
            (6, 5, "<if> requires the attribute 'cond'"),
        ],
    ),
    "elseif without cond": (
        f"""{ROOT_JS}>
  <state id="a"><onentry>
    <if cond="true"><elseif/></if>
  </onentry></state>
</scxml>""",
        [(3, 21, "<elseif> requires the attribute 'cond'")],
    ),
    "param without name and without value": (
        f"""{ROOT_JS}>
  <state id="a"><onentry>
    <send event="e">
      <param expr="1"/>
      <param name="p"/>
    </send>
  </onentry></state>
</scxml>""",
        [
            (4, 7, "<param> requires the attribute 'name'"),
            (5, 7, "<param> needs 'expr' or 'location'"),
        ],
    ),
    "param with both expr and location": (
        f"""{ROOT_JS}>
  <state id="a"><onentry>
    <send event="e"><param name="p" expr="1" location="x"/></send>
  </onentry></state>
</scxml>""",
        [(3, 21, "<param> may not have both 'expr' and 'location'")],
    ),
    "send mutually exclusive attributes": (
        f"""{ROOT_JS}>
  <state id="a"><onentry>
    <send event="e" eventexpr="'e'" delay="1s" delayexpr="'1s'"/>
  </onentry></state>
</scxml>""",
        [
            (3, 5, "<send> may not have both 'event' and 'eventexpr'"),
            (3, 5, "<send> may not have both 'delay' and 'delayexpr'"),
        ],
    ),
    "send without any event": (
        f"""{ROOT}>
  <state id="a"><onentry>
    <send target="#_internal"/>
  </onentry></state>
</scxml>""",
        [(3, 5, "<send> needs 'event', 'eventexpr' or a <content> child")],
    ),
    "send with content and param, two contents, namelist and content": (
        f"""{ROOT_JS}>
  <state id="a"><onentry>
    <send event="e" namelist="x">
      <content>1</content>
      <content>2</content>
      <param name="p" expr="1"/>
    </send>
  </onentry></state>
</scxml>""",
        [
            (3, 5, "<send> may not have both <content> and <param>"),
            (3, 5, "<send> may have at most one <content>"),
            (3, 5, "<send> may not have both 'namelist' and <content>"),
        ],
    ),
    "donedata with content and param": (
        f"""{ROOT_JS}>
  <final id="f">
    <donedata><content>1</content><param name="p" expr="1"/></donedata>
  </final>
</scxml>""",
        [(3, 5, "<donedata> may not have both <content> and <param>")],
    ),
    "cancel with sendid and sendidexpr": (
        f"""{ROOT_JS}>
  <state id="a"><onentry>
    <cancel sendid="x" sendidexpr="'x'"/>
  </onentry></state>
</scxml>""",
        [(3, 5, "<cancel> may not have both 'sendid' and 'sendidexpr'")],
    ),
    "invoke problems": (
        f"""{ROOT_JS}>
  <state id="a">
    <invoke autoforward="yes" src="file:c.scxml">
      <content>x</content>
      <content>y</content>
      <finalize/>
      <finalize><raise event="r"/><send event="s"/></finalize>
    </invoke>
  </state>
</scxml>""",
        [
            (3, 5, 'autoforward must be "true" or "false", not "yes"'),
            (3, 5, "<invoke> may not have both 'src'/'srcexpr' and <content>"),
            (5, 7, "<invoke> may have at most one <content>"),
            (7, 7, "<invoke> may have at most one <finalize>"),
            (7, 17, "<raise> is not allowed inside <finalize>"),
            (7, 35, "<send> is not allowed inside <finalize>"),
        ],
    ),
    "invoke id and idlocation": (
        f"""{ROOT_JS}>
  <state id="a">
    <invoke id="i" idlocation="x" src="file:c.scxml"/>
  </state>
</scxml>""",
        [(3, 5, "<invoke> may not have both 'id' and 'idlocation'")],
    ),
    "transition type and event descriptors": (
        f"""{ROOT}>
  <state id="a">
    <transition event="" type="sideways"/>
    <transition event=".x a..b *a ok.*"/>
  </state>
</scxml>""",
        [
            (3, 5, 'transition type must be "internal" or "external", not "sideways"'),
            (3, 5, "the 'event' attribute is empty"),
            (4, 5, "'.x' is not a valid event descriptor"),
            (4, 5, "'a..b' is not a valid event descriptor"),
            (4, 5, "'*a' is not a valid event descriptor"),
        ],
    ),
    "raise with an invalid event name": (
        f"""{ROOT}>
  <state id="a"><onentry>
    <raise event=""/>
  </onentry></state>
</scxml>""",
        [(3, 5, "'' is not a valid event name")],
    ),
    "null datamodel refuses data, assign, script, foreach and expressions": (
        f"""{ROOT}>
  <datamodel><data id="x"/></datamodel>
  <state id="a">
    <onentry>
      <assign location="x" expr="1"/>
      <script>x = 1</script>
      <foreach array="xs" item="i"/>
      <if cond="x &gt; 1"/>
    </onentry>
    <transition event="e" cond="In('a')" target="a"/>
    <transition event="e" cond="x == 1" target="a"/>
  </state>
</scxml>""",
        [
            (2, 14, "the null datamodel has no <data>"),
            (5, 7, "the null datamodel has no locations to <assign> to"),
            (6, 7, "the null datamodel cannot run <script>"),
            (7, 7, "the null datamodel cannot iterate with <foreach>"),
            (8, 7, "the null datamodel only understands In('stateid'), not 'x > 1'"),
            (11, 5, "the null datamodel only understands In('stateid'), not 'x == 1'"),
        ],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_problem_at_its_position(name: str) -> None:
    source, expected = CASES[name]
    assert errors(source) == expected


def test_failed_script_src_refuses_the_chart_at_the_script(tmp_path: Path) -> None:
    source = f"""{ROOT_JS}>
  <state id="a"/>
    <script src="file:missing.js"/>
</scxml>"""
    error = refused(source, base_path=tmp_path)
    assert [(p.line, p.column) for p in error.problems] == [(3, 5)]
    assert error.problems[0].message == "cannot read 'file:missing.js': No such file or directory"


def test_script_src_with_refuse_all_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ok.js").write_text("var fromfile = 1;")
    source = f"""{ROOT_JS}>
  <script src="file:ok.js"/>
  <state id="a"/>
</scxml>"""
    load_chart(source, base_path=tmp_path)  # resolvable with the default resolver
    error = refused(source, base_path=tmp_path, resolver=refuse_all)
    assert [str(p) for p in error.problems] == [
        "2:3: cannot resolve 'file:ok.js': external documents are disabled"
    ]


def test_failed_data_src_is_only_a_warning(tmp_path: Path) -> None:
    source = f"""{ROOT_JS}>
  <datamodel>
    <data id="d" src="file:missing.json"/>
  </datamodel>
  <state id="a"/>
</scxml>"""
    chart = load_chart(source, base_path=tmp_path)
    assert [(p.line, p.column, p.severity) for p in chart.warnings] == [(3, 5, "warning")]


# ---- several mistakes at once ------------------------------------------------------------

MANY = f"""<scxml xmlns="{NS}" version="1.0" datamodel="python" initial="nope">
  <state id="a" initial="b">
    <transition event="go" target="zz"/>
    <log expr="1"/>
  </state>
  <state id="b">
    <onentry><else/><send event="x" delay="soon"/></onentry>
  </state>
  <state id="a" bogus="1"/>
</scxml>"""


def test_one_error_carries_every_problem_sorted_by_position() -> None:
    error = refused(MANY)
    assert [(p.line, p.column, p.message) for p in error.problems] == [
        (1, 1, 'unknown datamodel "python" (supported: null, ecmascript)'),
        (1, 1, "initial state 'nope' does not exist"),
        (2, 3, "an atomic state cannot have an initial state"),
        (2, 3, "initial state 'b' is not a descendant of 'a'"),
        (3, 5, "transition target 'zz' does not exist"),
        (4, 5, "executable content <log> is not allowed inside <state>; "
               "put it in <onentry>, <onexit> or a <transition>"),
        (7, 14, "<else> may only appear inside <if>"),
        (7, 21, "malformed delay 'soon' (use e.g. 500ms, 2s, 1.5s, 5m, 3h, 3d)"),
        (9, 3, "duplicate id 'a' (first defined at 2:3)"),
    ]
    positions = [(p.line, p.column) for p in error.problems]
    assert positions == sorted(positions)
    assert all(p.severity == "error" for p in error.problems)
    # Warnings found alongside are kept apart, not mixed into the errors.
    assert [(p.line, p.column, p.message) for p in error.warnings] == [
        (9, 3, "<state> has no attribute 'bogus'; it is ignored")
    ]


def test_error_message_lists_every_problem_with_its_position() -> None:
    text = str(refused(MANY, source_name="many.scxml"))
    assert text.startswith("invalid SCXML (9 problems):\n")
    assert "  many.scxml: 3:5: transition target 'zz' does not exist" in text
    assert "  many.scxml: 9:3: duplicate id 'a' (first defined at 2:3)" in text
    assert "bogus" not in text  # warnings are not part of the refusal


def test_problems_are_plain_values() -> None:
    problem = refused(CASES["unknown transition target"][0]).problems[0]
    assert problem == Problem(3, 5, "transition target 'nowhere' does not exist")
    assert str(problem) == "3:5: transition target 'nowhere' does not exist"


# ---- positions stay exact around comments, CDATA and non-ASCII text ---------------------


def test_columns_ignore_markup_inside_comments_and_cdata() -> None:
    source = f"""{ROOT_JS}>
  <!-- <state id="fake"> --><state id="a">
    <onentry><script><![CDATA[ var s = "<state>"; ]]></script></onentry>
  </state><?pi <state?>   <state id="b"><transition target="ghost"/></state>
</scxml>"""
    assert errors(source) == [(4, 41, "transition target 'ghost' does not exist")]


def test_columns_count_characters_not_bytes() -> None:
    source = f"""{ROOT}>
  <state id="a"><onentry><log label="déjà vu, ça"/></onentry><transition target="x"/></state>
</scxml>"""
    # 61 characters precede <transition>; counting UTF-8 bytes would give 64.
    assert errors(source) == [(2, 62, "transition target 'x' does not exist")]


def test_columns_survive_an_element_whose_name_starts_with_a_non_ascii_letter() -> None:
    # <élan> is a legal XML name; a foreign element must not degrade every column to 1.
    source = f"""{ROOT}>
  <state id="a">
    <élan xmlns="urn:example"/>
    <transition event="go" target="nowhere"/>
  </state>
</scxml>"""
    error = refused(source)
    assert [(p.line, p.column) for p in error.problems] == [(4, 5)]
    assert [(p.line, p.column) for p in error.warnings] == [(3, 5)]


def test_multi_line_start_tags_keep_exact_positions() -> None:
    # Long start tags are routinely wrapped. A problem is reported where its element's
    # start tag begins, and one wrapped tag must not cost every other problem its column.
    source = f"""<scxml xmlns="{NS}" version="1.0"
        datamodel="python">
  <state id="a"
         initial="a1">
    <state id="a1"/>
  </state>
  <state id="b"><transition event="go" target="nowhere"/></state>
</scxml>"""
    assert errors(source) == [
        (1, 1, 'unknown datamodel "python" (supported: null, ecmascript)'),
        (7, 17, "transition target 'nowhere' does not exist"),
    ]


# ---- validator corner: what counts as a child of the history's parent -------------------


def test_shallow_history_default_is_checked_against_child_states_not_other_ids() -> None:
    # An <invoke id="elsewhere"> inside the parent is not a child *state*: the default
    # target 'elsewhere' (a sibling of the parent) must still be refused.
    source = f"""{ROOT} initial="p">
  <state id="p">
    <history id="h"><transition target="elsewhere"/></history>
    <invoke id="elsewhere" src="file:child.scxml"/>
    <state id="c1"/>
  </state>
  <state id="elsewhere"/>
</scxml>"""
    assert errors(source) == [
        (3, 21, "history default 'elsewhere' must be a child of the history's parent state")
    ]


# ---- warnings do not refuse the chart ----------------------------------------------------


def test_warnings_do_not_refuse_the_chart() -> None:
    source = """<scxml version="1.0" foo="bar" initial="a">
  <state id="a" color="red">
    <transition event=".*" target="a"/>
    <x:ext xmlns:x="urn:example"/>
    <invoke type="http" src="file:x"/>
  </state>
</scxml>"""
    assert warnings_of(source) == [
        (1, 1, '<scxml> has no namespace; expected xmlns="http://www.w3.org/2005/07/scxml"'),
        (1, 1, "<scxml> has no attribute 'foo'; it is ignored"),
        (2, 3, "<state> has no attribute 'color'; it is ignored"),
        (3, 5, "'.*' is read as '*' (any event)"),
        (4, 5, "<ext> is not an SCXML element; it is ignored"),
        (5, 5, "invoke type 'http' needs a host-registered invoke handler"),
    ]
    chart = load_chart(source)
    assert chart.ids.keys() == {"a"}


def test_attributes_in_other_namespaces_are_silent_extensions() -> None:
    source = f"""<scxml xmlns="{NS}" xmlns:x="urn:example" version="1.0" x:anything="1">
  <state id="a" x:color="red"/>
</scxml>"""
    assert warnings_of(source) == []


def test_foreach_missing_both_required_attributes() -> None:
    source = f"""{ROOT_JS}>
  <state id="a"><onentry>
    <foreach/>
  </onentry></state>
</scxml>"""
    found = errors(source)
    # Both at the same position; their relative order is not part of the contract.
    assert sorted(found) == [
        (3, 5, "<foreach> requires the attribute 'array'"),
        (3, 5, "<foreach> requires the attribute 'item'"),
    ]


def test_problems_come_in_the_same_order_whatever_the_hash_seed() -> None:
    """An element missing several required attributes reports them in one order (by name),
    not in the order of a set, which changes with Python's string hash seed."""
    import subprocess
    import sys

    program = (
        "from statecharts.core import ChartError, load_chart\n"
        "try:\n"
        "    load_chart('<scxml xmlns=\"http://www.w3.org/2005/07/scxml\" version=\"1.0\""
        " datamodel=\"ecmascript\"><state id=\"a\"><onentry><foreach/></onentry></state>"
        "</scxml>')\n"
        "except ChartError as exc:\n"
        "    print([p.message for p in exc.problems if 'requires' in p.message])\n"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", program],
            env={**__import__("os").environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(6)
    }
    assert outputs == {
        "[\"<foreach> requires the attribute 'array'\", "
        "\"<foreach> requires the attribute 'item'\"]\n"
    }
