"""What the README and docs/installation.md say about supported Django versions is what
pyproject.toml declares: no sentence promises a version outside the declared range, and each
page names every declared feature release."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "docs" / "installation.md"]
# "Django 5.2", "Django 5.2 or 6.0", "Django 5.2, 6.0 and 6.1", "Django 5.2-6.0",
# "Django 5.2, or Django 6.0": every number of such a run is a version the sentence names.
VERSION = r"\d+(?:\.\d+){0,2}"
# "Django 5.2 or newer" (or "or later", "and up", "5.2+") names every later version too.
MENTION = re.compile(
    rf"Django\s+{VERSION}(?:(?:\s*(?:,|or|and|to|through|-|\u2013))+\s*(?:Django\s+)?{VERSION}\b)*"
    r"(?P<open>\+|\s+(?:or\s+newer|or\s+later|and\s+up|and\s+newer|and\s+later))?"
)
LATER = "999.0"
# Django's feature releases are x.0, x.1 and x.2.
SERIES = [f"{major}.{minor}" for major in range(2, 9) for minor in range(3)]


def declared_django() -> SpecifierSet:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (django,) = (
        Requirement(line) for line in project["dependencies"] if Requirement(line).name == "django"
    )
    return django.specifier


def declared_series(specifier: SpecifierSet) -> list[str]:
    return [series for series in SERIES if Version(series) in specifier]


def named_versions(text: str) -> list[tuple[str, str]]:
    """Each Django version the text names, with the words that name it ("or newer" names
    every later version, as LATER)."""
    found = []
    for mention in MENTION.finditer(" ".join(text.split())):
        words = mention.group()
        versions = re.findall(VERSION, words.replace("Django", ""))
        found += [(version, words) for version in versions]
        if mention.group("open"):
            found.append((LATER, words))
    return found


def releases(version: str) -> list[str]:
    """The releases a version names: "6" is every feature release of Django 6."""
    return [f"{version}.{minor}" for minor in range(3)] if "." not in version else [version]


def outside(text: str, specifier: SpecifierSet) -> list[str]:
    """The mentions of a Django version the specifier does not accept."""
    return [
        f"{words!r} names {version}"
        for version, words in named_versions(text)
        if any(Version(release) not in specifier for release in releases(version))
    ]


def test_the_declared_range_is_the_classifiers() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    classifiers = [
        c.rsplit(" ", 1)[1]
        for c in project["classifiers"]
        if c.startswith("Framework :: Django :: ")
    ]
    assert classifiers == declared_series(declared_django())


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_page_states_support_only_inside_the_declared_range(page: Path) -> None:
    specifier = declared_django()
    text = page.read_text()
    assert named_versions(text), f"{page.name} names no Django version"
    assert outside(text, specifier) == []
    named = {version for version, _ in named_versions(text)}
    missing = [series for series in declared_series(specifier) if series not in named]
    assert missing == [], f"{page.name} never names declared Django {missing}"


@pytest.mark.parametrize(
    ("sentence", "wrong"),
    [
        ("Python 3.11 or newer, Django 5.2 or 6.1.", ["6.1"]),
        ("Supported: Django 4.2, 5.2 and 6.0.", ["4.2"]),
        ("Django 5.2, or Django 7.0 on Python 3.14.", ["7.0"]),
        ("Runs on Django 6.", ["6"]),
        ("Django 5.2\u20136.1.", ["6.1"]),
        ("Django 5.2 or newer.", ["999.0"]),
        ("Django 5.2+ only.", ["999.0"]),
        ("Django 5.2 and 6.0 (6.0 on Python 3.12 or newer).", []),
    ],
)
def test_a_sentence_outside_the_range_is_caught(sentence: str, wrong: list[str]) -> None:
    found = outside(sentence, SpecifierSet(">=5.2,<6.1"))
    assert [line.rsplit(" ", 1)[1] for line in found] == wrong


def test_the_installation_page_counts_and_names_the_apps_the_wheel_holds() -> None:
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    apps = [name for name in find["packages"]["find"]["include"] if "." not in name]
    opening = (ROOT / "docs" / "installation.md").read_text().split("\n\n")[1]
    words = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
    assert f"holds {words[len(apps)]} Django apps" in " ".join(opening.split())
    assert [app for app in apps if f"`{app}`" not in opening] == []
