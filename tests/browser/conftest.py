"""The explorer in a real browser: Debian's `chromium` driven by `chromium-driver` through Selenium,
against a real `engram serve` process (ADR 0084).

Without chromium on the machine these tests skip — except in CI (`CI` set), where `.ci/run`
installs it and a missing browser is a failure, not a skip.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.integration.http_support import Server, base_env, cli, scene

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


@dataclass
class Site:
    """A served data dir with beings, notes and tokens, shared by one module's browser tests."""

    server: Server
    env: dict[str, str]
    admin: str
    tokens: dict[str, str] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return self.server.url + path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("ui")
    env = base_env(root / "data")
    cli(env, "being", "create", "Aria")
    cli(env, "being", "create", "Bruno")
    notes: dict[str, list[str]] = {"Aria": [], "Bruno": []}
    for name, actions in {
        "Aria": [
            "Planted tomatoes with Mina",
            "Fixed the bike's brakes",
            "<script>window.__pwned=1</script> met Leo",
        ],
        "Bruno": ["Learnt the cello scale"],
    }.items():
        for action in actions:
            done = cli(env, "note", name, "--scene", scene(action=action), "--json")
            notes[name].append(_note_id(done.stdout))
    cli(env, "patrol", "Aria")
    admin = _token(env, "--admin")
    tokens = {n: _token(env, "--being", n) for n in ("Aria", "Bruno")}
    server = Server(env, root / "server.log")
    try:
        yield Site(server=server, env=env, admin=admin, tokens=tokens, notes=notes)
    finally:
        server.stop()


def _token(env: dict[str, str], *scope: str) -> str:
    issued = json.loads(cli(env, "token", "create", *scope, "--label", "ui tests", "--json").stdout)
    token: str = issued["token"]
    return token


def _note_id(stdout: str) -> str:
    data: Any = json.loads(stdout)
    found = data.get("note_id") or data.get("id") or (data.get("note_ids") or [None])[0]
    assert isinstance(found, str), stdout
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None or DRIVER is None:
        if os.environ.get("CI"):
            pytest.fail(
                "chromium and chromium-driver are not installed: scripts/test.sh installs them as root"
            )
        pytest.skip("chromium / chromium-driver not installed (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def log_in(driver: Any, site: Site, token: str, path: str = "/ui/") -> None:
    """Through the login form, as a person does."""
    from selenium.webdriver.common.by import By

    driver.delete_all_cookies()
    driver.get(site.url(path))
    driver.find_element(By.ID, "token").send_keys(token)
    old = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.ID, "login").click()
    wait_for(driver, lambda d: _stale(old))


def _stale(element: Any) -> bool:
    from selenium.common.exceptions import WebDriverException

    try:
        element.tag_name  # noqa: B018  (raises once the page it belonged to is gone)
    except WebDriverException:
        # Stale, or (chromium, mid-navigation) "Node with given id does not belong to the document":
        # either way the page it belonged to is gone.
        return True
    return False


def wait_for(driver: Any, condition: Any, timeout: float = 15.0) -> Any:
    """Until `condition(driver)` is truthy (a page load, a live part's refresh)."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)


def click_and_wait(driver: Any, element: Any) -> None:
    """Click something that loads a new page, and wait until it has."""
    from selenium.webdriver.common.by import By

    old = driver.find_element(By.TAG_NAME, "html")
    element.click()
    wait_for(driver, lambda d: _stale(old))


def screenshot(driver: Any, name: str) -> None:
    """With ENGRAM_UI_SCREENSHOTS=DIR (scripts/ui_screenshots.sh), the page as it looks, for docs/ui/."""
    target = os.environ.get("ENGRAM_UI_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(target) / f"{name}.png"))
