"""A memory's page in chromium (ADR 0086): from a note to its node, the node's timeline, the "state
as of" slider showing an older version, the planted `<script>` never running."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.browser.conftest import Site, click_and_wait, log_in, screenshot, wait_for


def test_a_note_leads_to_its_node_whose_slider_shows_an_older_state(browser: Any, site: Site) -> None:
    planted = site.notes["Aria"][2]  # the note whose scene holds <script>window.__pwned=1</script>
    log_in(browser, site, site.admin, f"/ui/beings/Aria/notes/{planted}")
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith("Note")
    assert "<script>window.__pwned=1</script>" in browser.find_element(By.ID, "state").text  # shown as text
    assert browser.execute_script("return window.__pwned === undefined") is True

    click_and_wait(browser, browser.find_element(By.CSS_SELECTOR, "#links a[href*='/nodes/']"))
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith("Node")
    rows = browser.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")
    assert len(rows) >= 2 and "created" in rows[0].text
    assert browser.find_element(By.CSS_SELECTOR, "#as-of h2").text == "State now"
    assert browser.find_element(By.CSS_SELECTOR, "#lineage svg.lineage") is not None
    screenshot(browser, "node")

    slider = browser.find_element(By.ID, "as-of-version")
    slider.send_keys(Keys.HOME)  # to version 1: the change submits the form (data-autosubmit)
    wait_for(browser, lambda d: "as_of=1" in d.current_url)
    wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#as-of h2").text == "State as of version 1")
    assert browser.find_element(By.CSS_SELECTOR, "#timeline tr.shown").get_attribute("id") == "v1"
    assert browser.execute_script("return window.__pwned === undefined") is True


def test_another_beings_token_is_refused_a_node_page(browser: Any, site: Site) -> None:
    planted = site.notes["Aria"][0]
    log_in(browser, site, site.tokens["Bruno"], "/ui/beings")
    browser.get(site.url(f"/ui/beings/Aria/notes/{planted}"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "Not allowed"
