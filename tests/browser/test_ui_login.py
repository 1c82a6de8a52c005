"""Logging in to the explorer in chromium: the beings page, a being token's reach, logging out."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.by import By

from tests.browser.conftest import Site, click_and_wait, log_in, screenshot


def test_an_admin_logs_in_and_sees_every_being(browser: Any, site: Site) -> None:
    log_in(browser, site, site.admin, "/ui/beings")
    names = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#beings tbody td:first-child a")]
    assert names == ["Aria", "Bruno"]
    cookie = browser.get_cookie("engram_ui_token")
    assert cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    screenshot(browser, "beings")


def test_a_wrong_token_stays_on_the_login_form(browser: Any, site: Site) -> None:
    log_in(browser, site, "eng_not_a_token", "/ui/beings")
    assert browser.current_url.endswith("/ui/login")
    assert "not valid" in browser.find_element(By.CSS_SELECTOR, "p.error").text


def test_a_being_token_sees_its_being_only_and_is_refused_another(browser: Any, site: Site) -> None:
    log_in(browser, site, site.tokens["Bruno"], "/ui/beings")
    names = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#beings tbody td:first-child a")]
    assert names == ["Bruno"]
    browser.get(site.url("/ui/beings/Aria"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "Not allowed"


def test_logging_out_goes_back_to_the_login_form(browser: Any, site: Site) -> None:
    log_in(browser, site, site.admin, "/ui/beings")
    click_and_wait(browser, browser.find_element(By.CSS_SELECTOR, "form.logout button"))
    assert browser.current_url.endswith("/ui/login")
    browser.get(site.url("/ui/beings"))
    assert "/ui/login" in browser.current_url
