"""A being's overview in chromium: from the beings page to the cluster tree and the plots."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.by import By

from tests.browser.conftest import Site, click_and_wait, log_in, screenshot


def test_an_admin_opens_a_being_and_sees_its_tree_plots_and_patrol_runs(browser: Any, site: Site) -> None:
    log_in(browser, site, site.admin, "/ui/beings")
    row = browser.find_element(By.CSS_SELECTOR, "#beings tbody tr:first-child")
    assert row.find_element(By.CSS_SELECTOR, "td.notes").text == "3"
    assert row.find_element(By.CSS_SELECTOR, "td.alive").text == "3"
    click_and_wait(browser, row.find_element(By.CSS_SELECTOR, "td:first-child a"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "Aria"
    roots = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#cluster-tree > li > a")]
    assert sorted(roots) == ["Business", "Private"]
    # The histogram is drawn (its bars have a size) and the patrol's changes plotted.
    bars = browser.find_elements(By.CSS_SELECTOR, "#plot-importance svg rect.alive")
    assert len(bars) == 20 and max(b.size["height"] for b in bars) > 10
    assert browser.find_elements(By.CSS_SELECTOR, "#plot-changes svg circle.dot")
    steps = browser.find_element(By.CSS_SELECTOR, '#patrol-runs tr[data-cycle="1"]').text
    assert "notes_to_nodes" in steps and "nodes_created 3" in steps
    # A scene holds `<script>`: shown as text in the page, never run.
    assert browser.execute_script("return window.__pwned === undefined")
    screenshot(browser, "being")
