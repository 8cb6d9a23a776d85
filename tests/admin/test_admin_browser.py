"""End to end, in a real browser: headless Chromium logs into the admin of a live server, opens an
execution, sends an event through the page's form and sees the highlight move in the diagram.

The browser is Debian's Chromium driven through Debian's ChromeDriver (packages chromium and
chromium-driver, installed by scripts/_chromium.sh, which scripts/test runs first). A missing
browser is a failure, never a skip. The first test saves a screenshot of the page after the event
and prints its path; the second walks the README's "Thirty seconds" path and leaves one screenshot
per step in reports/screenshots/readme-<database>/ (git-ignored), so a person can look at what a
user sees.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.urls import reverse
from pytest_django.live_server_helper import LiveServer
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from statecharts.models import Chart, Execution, HistoryEntry

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WAIT_SECONDS = 20

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'
FLOW = f"""<scxml {NS} name="flow" datamodel="ecmascript" initial="idle">
  <datamodel><data id="total" expr="0"/></datamodel>
  <state id="idle">
    <onentry><send id="nudge" event="nudge" delay="1d"/></onentry>
    <transition event="pay" target="paid"><assign location="total" expr="_event.data.amount"/>
    </transition>
  </state>
  <state id="paid"><transition event="ship" target="shipped"/></state>
  <final id="shipped"/>
</scxml>"""


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    """Headless Chromium, started through ChromeDriver; quit after the test."""
    for binary in (CHROMIUM, CHROMEDRIVER):
        if not (binary.is_file() and shutil.which(str(binary))):
            pytest.fail(
                f"{binary} is missing: the browser test needs Debian's chromium and "
                "chromium-driver (bash scripts/_chromium.sh installs them)"
            )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
        "--disable-gpu",
        "--disable-dev-shm-usage",
        # This machine's network is closed: no background calls home, updates or sync.
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--no-first-run",
        "--window-size=1280,1100",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    # A driver path given to the Service: Selenium Manager (which would download one) is skipped.
    service = Service(
        executable_path=str(CHROMEDRIVER), log_output=str(tmp_path / "chromedriver.log")
    )
    driver = webdriver.Chrome(service=service, options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait(driver: WebDriver) -> WebDriverWait[WebDriver]:
    return WebDriverWait(driver, WAIT_SECONDS)


def state(driver: WebDriver, state_id: str) -> WebElement:
    """The diagram's group for one state (inside the page's <div id="diagram"><svg>)."""
    return driver.find_element(By.CSS_SELECTOR, f'#diagram svg g.sc-state[data-state="{state_id}"]')


def is_active(driver: WebDriver, state_id: str) -> bool:
    return "active" in (state(driver, state_id).get_attribute("class") or "").split()


def box_fill(driver: WebDriver, state_id: str) -> str:
    """The fill the browser paints the state's box with (its computed style, not the markup)."""
    box = state(driver, state_id).find_element(By.CSS_SELECTOR, ":scope > .sc-box")
    fill = driver.execute_script("return getComputedStyle(arguments[0]).fill;", box)
    assert isinstance(fill, str) and fill, f"no computed fill for {state_id}'s box"
    return fill


def overlapping(driver: WebDriver, css: str, others: str) -> list[str]:
    """The texts of the ``others`` elements whose painted box meets the ``css`` element's."""
    found = driver.execute_script(
        """
        const a = document.querySelector(arguments[0]).getBoundingClientRect();
        return [...document.querySelectorAll(arguments[1])].filter(e => {
            const b = e.getBoundingClientRect();
            return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
        }).map(e => e.textContent.trim());
        """,
        css,
        others,
    )
    assert isinstance(found, list)
    return found


@pytest.mark.django_db(transaction=True)  # the live server's thread must see committed rows
def test_sending_an_event_in_the_browser_moves_the_highlight_in_the_diagram(
    live_server: LiveServer, browser: WebDriver, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    User.objects.create_superuser("admin", "admin@example.com", "correct horse")
    execution = Execution.objects.start(Chart.objects.load(FLOW), business_key="order-7")
    assert execution.configuration == ["idle"]

    # Log in through the admin's own login form.
    browser.get(f"{live_server.url}/admin/login/")
    browser.find_element(By.ID, "id_username").send_keys("admin")
    browser.find_element(By.ID, "id_password").send_keys("correct horse")
    browser.find_element(By.CSS_SELECTOR, '#login-form [type="submit"]').click()
    wait(browser).until(ec.presence_of_element_located((By.ID, "logout-form")))
    assert "Site administration" in browser.title

    # The execution's page: the diagram highlights idle.
    change_url = reverse("admin:statecharts_execution_change", args=[execution.pk])
    browser.get(f"{live_server.url}{change_url}")
    diagram = wait(browser).until(
        ec.visibility_of_element_located((By.CSS_SELECTOR, "#diagram svg"))
    )
    assert diagram.size["width"] > 0 and diagram.size["height"] > 0
    assert browser.title.startswith("flow v1 · order-7 |")  # not the session id
    assert browser.find_element(By.ID, "where").text == "status: active; in state idle"
    assert is_active(browser, "idle")
    assert not is_active(browser, "paid") and not is_active(browser, "shipped")
    highlighted, plain = box_fill(browser, "idle"), box_fill(browser, "paid")
    assert highlighted != plain, "the active state's box is painted like an inactive one"
    assert not overlapping(browser, ".object-tools", "table.statecharts-history tbody tr td")

    # Pick pay from the events idle accepts, as a user would: the data field then shows the
    # data pay's transition reads; type it and send.
    form = browser.find_element(By.ID, "send-event")
    data = form.find_element(By.NAME, "data")
    form.find_element(By.CSS_SELECTOR, 'button.sc-pick[data-event="pay"]').click()
    assert form.find_element(By.NAME, "name").get_attribute("value") == "pay"
    assert data.get_attribute("placeholder") == '{"amount": …}'
    data.send_keys('{"amount": 12}')
    page = browser.find_element(By.TAG_NAME, "html")
    form.find_element(By.CSS_SELECTOR, 'input[type="submit"][value="Send event"]').click()
    wait(browser).until(ec.staleness_of(page))  # the POST redirects back to a new page

    message = wait(browser).until(
        ec.visibility_of_element_located((By.CSS_SELECTOR, "ul.messagelist li.success"))
    )
    assert message.text == "Sent pay: applied (status: active; in state paid)"
    assert browser.current_url == f"{live_server.url}{change_url}"
    assert browser.find_element(By.ID, "where").text == "status: active; in state paid"
    assert is_active(browser, "paid")
    assert not is_active(browser, "idle") and not is_active(browser, "shipped")
    # What the user sees: the highlight moved from idle's box to paid's.
    assert box_fill(browser, "paid") == highlighted
    assert box_fill(browser, "idle") == plain
    # The history shows the event's data as JSON, as the datamodel panel does.
    newest = browser.find_element(By.CSS_SELECTOR, "table.statecharts-history tbody tr td.sc-data")
    assert newest.text == '{"amount": 12}'
    execution.refresh_from_db()
    assert execution.configuration == ["paid"] and execution.steps == 2

    # A picture of what the user sees now, for a person to look at.
    browser.execute_script("window.scrollTo(0, 0);")
    screenshot = tmp_path / f"execution-{connection.vendor}.png"
    assert browser.save_screenshot(str(screenshot)), "Chromium took no screenshot"
    assert screenshot.stat().st_size > 10_000  # a rendered page, not an empty image
    with capsys.disabled():
        print(f"\nscreenshot of the execution page after sending pay: {screenshot}")


SIGNUP = Path(__file__).resolve().parents[2] / "docs" / "examples" / "signup.scxml"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "reports" / "screenshots"


@pytest.mark.django_db(transaction=True)  # the live server's thread must see committed rows
def test_the_readme_thirty_second_path_in_the_browser(
    live_server: LiveServer, browser: WebDriver, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's "Thirty seconds", step by step, as a user does it in the browser: the
    chart page, *Start* with a 10 s nudge, the pending timer, the timer firing (on the
    injected clock: the test fires what is due ten seconds later, it never waits), *Send*
    signed_up, the completed execution, the API docs page. Each step leaves a screenshot in
    ``reports/screenshots/readme-<database>/`` (git-ignored) for a person to look at."""
    from timers.firing import fire_due
    from timers.models import Timer

    folder = SCREENSHOTS / f"readme-{connection.vendor}"
    folder.mkdir(parents=True, exist_ok=True)

    def shot(name: str) -> None:
        browser.execute_script("window.scrollTo(0, 0);")
        path = folder / f"{name}.png"
        assert browser.save_screenshot(str(path)), f"Chromium took no screenshot of {name}"
        assert path.stat().st_size > 10_000  # a rendered page, not an empty image

    User.objects.create_superuser("admin", "admin@example.com", "correct horse")
    chart = Chart.objects.load(SIGNUP.read_text())

    # 1. Log in.
    browser.get(f"{live_server.url}/admin/login/")
    browser.find_element(By.ID, "id_username").send_keys("admin")
    browser.find_element(By.ID, "id_password").send_keys("correct horse")
    browser.find_element(By.CSS_SELECTOR, '#login-form [type="submit"]').click()
    wait(browser).until(ec.presence_of_element_located((By.ID, "logout-form")))

    # 2. Charts -> signup: its diagram and source; start with a 10 s nudge.
    browser.get(f"{live_server.url}{reverse('admin:statecharts_chart_changelist')}")
    browser.find_element(By.LINK_TEXT, "signup").click()
    wait(browser).until(
        ec.visibility_of_element_located((By.CSS_SELECTOR, ".statecharts-diagram svg"))
    )
    assert "nudge_after" in browser.find_element(By.CSS_SELECTOR, "table.statecharts-source").text
    shot("1-chart")
    start = browser.find_element(By.CSS_SELECTOR, "form.statecharts-start")
    start.find_element(By.NAME, "data").send_keys('{"nudge_after": "10s"}')
    page = browser.find_element(By.TAG_NAME, "html")
    start.find_element(By.CSS_SELECTOR, 'input[type="submit"][value="Start"]').click()
    wait(browser).until(ec.staleness_of(page))

    # 3. The execution's page: invited is highlighted, the nudge timer is pending.
    wait(browser).until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#diagram svg")))
    execution = Execution.objects.get(chart=chart)
    change_url = reverse("admin:statecharts_execution_change", args=[execution.pk])
    assert browser.current_url == f"{live_server.url}{change_url}"
    assert browser.find_element(By.ID, "where").text == "status: active; in state invited"
    assert is_active(browser, "invited") and not is_active(browser, "nudged")
    pending = browser.find_element(By.CSS_SELECTOR, "table.statecharts-timers tr.sc-timer-pending")
    assert "nudge.due" in pending.text and "pending" in pending.text
    shot("2-started")

    # Ten seconds later on the injected clock, the worker's pass fires the nudge.
    timer = Timer.objects.get(execution=execution)
    report = fire_due(now=timer.due + timedelta(seconds=1))
    assert report.fired == 1, report

    # Reload: the timer is fired and the diagram highlights nudged.
    browser.refresh()
    wait(browser).until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#diagram svg")))
    assert browser.find_element(By.ID, "where").text == "status: active; in state nudged"
    assert is_active(browser, "nudged") and not is_active(browser, "invited")
    timers = browser.find_element(By.CSS_SELECTOR, "table.statecharts-timers").text
    assert "fired" in timers and "pending" not in timers
    shot("3-nudged")

    # 4. Send signed_up with an e-mail: the execution completes with that donedata.
    form = browser.find_element(By.ID, "send-event")
    form.find_element(By.CSS_SELECTOR, 'button.sc-pick[data-event="signed_up"]').click()
    form.find_element(By.NAME, "data").send_keys('{"email": "ada@example.com"}')
    page = browser.find_element(By.TAG_NAME, "html")
    form.find_element(By.CSS_SELECTOR, 'input[type="submit"][value="Send event"]').click()
    wait(browser).until(ec.staleness_of(page))
    message = wait(browser).until(
        ec.visibility_of_element_located((By.CSS_SELECTOR, "ul.messagelist li.success"))
    )
    assert message.text.startswith("Sent signed_up: applied"), message.text
    assert "completed" in browser.find_element(By.ID, "where").text
    assert "ada@example.com" in browser.find_element(By.TAG_NAME, "body").text
    execution.refresh_from_db()
    assert execution.status == "completed" and execution.donedata == {"email": "ada@example.com"}
    shot("4-completed")

    # The same through the API: its documentation page renders its operations.
    browser.get(f"{live_server.url}/api/docs/")
    wait(browser).until(
        ec.visibility_of_element_located((By.CSS_SELECTOR, ".swagger-ui .opblock"))
    )
    assert "/api/executions/" in browser.find_element(By.CSS_SELECTOR, ".swagger-ui").text
    shot("5-api-docs")
    with capsys.disabled():
        print(f"\nscreenshots of the README's path: {folder}")


EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
SHOTS = Path("/tmp/h32-shots")  # outside the repository: for a person to look at
PROJECT_APPS = {"statecharts", "timers", "invocations", "routes"}


def horizontal_overflow(driver: WebDriver) -> int:
    """How many pixels the page, or a list's own scrolling box (the changelist's
    ``.results``), scrolls sideways (0: it fits the window)."""
    overflow = driver.execute_script(
        """
        return Math.max(0, ...[document.documentElement, ...document.querySelectorAll('.results')]
            .map(e => e.scrollWidth - e.clientWidth));
        """
    )
    assert isinstance(overflow, int)
    return overflow


def broken_tokens(driver: WebDriver) -> list[str]:
    """The history table's JSON tokens (and effect names) the browser paints on more than one
    line: each one's client rects counted, one rect per painted line."""
    found = driver.execute_script(
        """
        return [...document.querySelectorAll(
            'table.statecharts-history td.sc-data .sc-token,'
            + ' table.statecharts-history td.sc-effects .sc-token'
        )].filter(e => e.getClientRects().length > 1).map(e => e.textContent);
        """
    )
    assert isinstance(found, list)
    return found


@pytest.mark.parametrize("width", [1280, 1600])
@pytest.mark.django_db(transaction=True)  # the live server's thread must see committed rows
def test_no_admin_page_scrolls_sideways_at_desktop_widths(
    live_server: LiveServer, browser: WebDriver, width: int
) -> None:
    """Every admin list and an execution's page fit a 1280 and a 1600 px window: nothing scrolls
    sideways, and the history table never breaks a JSON token or an effect name across lines.
    The pages are filled as the demo fills them (its examples, a few inputs each, a pending
    timer, long JSON data). Screenshots go to /tmp/h32-shots for a person to look at."""
    from django.contrib import admin

    User.objects.create_superuser("admin", "admin@example.com", "correct horse")
    charts = {
        path.stem: Chart.objects.load(path.read_text(), name=path.stem)
        for path in sorted(EXAMPLES.glob("*.scxml"))
    }
    signup = Execution.objects.start(
        charts["signup"], business_key="ada-lovelace-invitation", data={"nudge_after": "10s"}
    )
    signup.send("signed_up", {"email": "ada@example.com", "name": "Ada King, Countess of Lovelace"})
    waiting = Execution.objects.start(charts["signup"], business_key="grace-hopper-invitation")
    waiting.send("unknown.event", {"note": "x" * 120, "tags": ["alpha", "beta", "gamma"]})
    Execution.objects.start(charts["order"], business_key="order-2024-000017")
    loan = Execution.objects.start(charts["loan"], business_key="loan-application-77")
    loan.send("documents.uploaded", {"files": ["passport-scan.pdf", "utility-bill.pdf"]})
    loan.send("score.ready", {"score": 640, "bureau": "experian", "reference": "a" * 40})

    browser.set_window_size(width, 1000)
    browser.get(f"{live_server.url}/admin/login/")
    browser.find_element(By.ID, "id_username").send_keys("admin")
    browser.find_element(By.ID, "id_password").send_keys("correct horse")
    browser.find_element(By.CSS_SELECTOR, '#login-form [type="submit"]').click()
    wait(browser).until(ec.presence_of_element_located((By.ID, "logout-form")))
    SHOTS.mkdir(parents=True, exist_ok=True)

    def visit(url: str, name: str) -> int:
        browser.get(f"{live_server.url}{url}")
        wait(browser).until(ec.presence_of_element_located((By.ID, "content")))
        overflow = horizontal_overflow(browser)
        # The whole page in one picture: the window as tall as the page, then back.
        height = browser.execute_script("return document.documentElement.scrollHeight;")
        browser.set_window_size(width, min(int(height) + 100, 6000))
        browser.save_screenshot(str(SHOTS / f"{width}-{name}.png"))
        browser.set_window_size(width, 1000)
        return overflow

    overflowing: dict[str, int] = {}
    for model in admin.site._registry:
        opts = model._meta
        if opts.app_label not in PROJECT_APPS:
            continue
        name = f"{opts.app_label}_{opts.model_name}"
        if overflow := visit(reverse(f"admin:{name}_changelist"), f"list-{name}"):
            overflowing[f"list {name}"] = overflow
    chart_url = reverse("admin:statecharts_chart_change", args=[charts["loan"].pk])
    if overflow := visit(chart_url, "chart-loan"):
        overflowing["chart loan"] = overflow
    # The start form is laid out as an admin form: inputs aligned, help in the help style,
    # nothing prefilled.
    start = browser.find_element(By.CSS_SELECTOR, "form.statecharts-start")
    inputs = start.find_elements(By.CSS_SELECTOR, "textarea, input[type=text]")
    assert len(inputs) == 2 and len({field.location["x"] for field in inputs}) == 1
    assert all(field.get_attribute("value") == "" for field in inputs)
    help_text = start.find_element(By.CSS_SELECTOR, ".help")
    assert "top-level data" in help_text.text
    label = start.find_element(By.CSS_SELECTOR, "label")
    size = "return parseFloat(getComputedStyle(arguments[0]).fontSize);"
    assert browser.execute_script(size, help_text) < browser.execute_script(size, label)
    entry = HistoryEntry.objects.filter(execution=signup).order_by("seq").last()
    assert entry is not None
    entry_url = reverse("admin:statecharts_historyentry_change", args=[entry.pk])
    if overflow := visit(entry_url, "history-entry"):
        overflowing["history entry"] = overflow
    broken: dict[str, list[str]] = {}
    for execution in (signup, waiting, loan):
        url = reverse("admin:statecharts_execution_change", args=[execution.pk])
        key = str(execution.business_key)
        if overflow := visit(url, f"execution-{key}"):
            overflowing[f"execution {key}"] = overflow
        assert browser.find_elements(By.CSS_SELECTOR, "table.statecharts-history .sc-token")
        if tokens := broken_tokens(browser):
            broken[key] = tokens
        dates = browser.find_elements(By.CSS_SELECTOR, "table.statecharts-history td.sc-when")
        assert len(dates) == HistoryEntry.objects.filter(execution=execution).count()
        lines = [
            browser.execute_script("return arguments[0].getClientRects().length;", date)
            for date in browser.find_elements(
                By.CSS_SELECTOR, "table.statecharts-history td.sc-when time"
            )
        ]
        assert lines and set(lines) == {1}, f"a date in {key}'s history wraps: {lines}"
    assert not overflowing, f"scrolls sideways at {width} px (pixels): {overflowing}"
    assert not broken, f"tokens broken across lines at {width} px: {broken}"
