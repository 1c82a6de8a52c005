"""The search, log and admin pages in chromium: a search's score breakdown, a rebuild followed to
its end, the planted `<script>` shown as text and never run (search results, the log)."""

from __future__ import annotations

from typing import Any

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.browser.conftest import Site, click_and_wait, log_in, screenshot, wait_for

PLANTED = "<script>window.__pwned=1</script>"


def _search(browser: Any, kind: str, text: str) -> None:
    Select(browser.find_element(By.ID, "kind")).select_by_value(kind)
    field = browser.find_element(By.ID, "q")
    field.clear()
    field.send_keys(text)
    click_and_wait(browser, browser.find_element(By.ID, "run"))


def test_a_search_shows_each_hits_score_broken_down(browser: Any, site: Site) -> None:
    log_in(browser, site, site.admin, "/ui/beings/Aria/search")
    _search(browser, "query", "tomatoes with Mina")
    hits = browser.find_elements(By.CSS_SELECTOR, "li.hit")
    assert hits, browser.page_source
    first = hits[0]
    assert "Planted tomatoes with Mina" in first.text
    parts = {
        row.get_attribute("data-part"): float(row.find_element(By.TAG_NAME, "td").text)
        for row in first.find_elements(By.CSS_SELECTOR, "tr.part")
    }
    assert "lexical" in parts and "semantic" in parts
    score = float(first.find_element(By.CSS_SELECTOR, ".score").text.split()[-1])
    assert abs(sum(parts.values()) - score) < 1e-3  # the parts add up to the score shown
    assert "reactivated nothing" in browser.find_element(By.ID, "reactivation").text
    assert first.find_elements(By.CSS_SELECTOR, "svg.bar rect")  # the stacked bar
    screenshot(browser, "search")


def _finished_job(driver: Any) -> Any:
    """The job's state line once it says it is done; the live block may swap it while we look."""
    try:
        found = driver.find_element(By.ID, "job-state")
        return found if found.get_attribute("data-live-done") is not None else False
    except StaleElementReferenceException:
        return False


def test_a_rebuild_started_on_the_admin_page_runs_to_its_end(browser: Any, site: Site) -> None:
    log_in(browser, site, site.admin, "/ui/admin")
    assert browser.find_element(By.CSS_SELECTOR, '#projections tr[data-view="memory"]')
    screenshot(browser, "admin")
    browser.execute_script("window.confirm = () => true;")  # the form's data-confirm question
    click_and_wait(browser, browser.find_element(By.ID, "rebuild-memory"))
    assert "/ui/admin/jobs/" in browser.current_url
    # The page reloads its own block (data-live) until the job says it is done.
    state = wait_for(
        browser,
        lambda d: (
            (el := d.find_element(By.ID, "job-state")).get_attribute("data-live-done") is not None and el
        ),
        timeout=120,
    )
    assert "Done: memory rebuilt" in state.text
    assert browser.find_element(By.ID, "job-progress").get_attribute("value") == "100"


def test_planted_script_never_runs_in_search_results_or_the_log(browser: Any, site: Site) -> None:
    log_in(browser, site, site.admin, "/ui/beings/Aria/search")
    _search(browser, "search", "Leo")
    hit = browser.find_element(By.CSS_SELECTOR, "li.hit .hit-head a")
    assert PLANTED in hit.text  # shown as text
    assert browser.execute_script("return window.__pwned") is None
    browser.get(site.url("/ui/log?limit=20"))
    assert browser.find_elements(By.CSS_SELECTOR, "#events tr.event")
    assert browser.find_element(By.ID, "live")  # following new events
    screenshot(browser, "log")
    browser.get(site.url("/ui/log?type=Noted&limit=50"))
    payloads = browser.find_elements(By.CSS_SELECTOR, "#events details")
    for details in payloads:
        browser.execute_script("arguments[0].open = true;", details)
    assert any(PLANTED in d.text for d in payloads), browser.page_source[:2000]
    assert browser.execute_script("return window.__pwned") is None
