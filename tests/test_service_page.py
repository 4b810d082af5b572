"""The web page at ``/`` in a real headless Chromium (selenium + Debian's chromium-driver)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _helpers import near_copy, words
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait
from test_service_harness import ServerProcess

pytestmark = pytest.mark.browser


TOKEN = "page-token-0123456789"


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    driver_path = shutil.which("chromedriver")
    assert driver_path, "chromedriver missing: run scripts/setup-test.sh (chromium-driver)"
    options = webdriver.ChromeOptions()
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,1000",
    ):
        options.add_argument(arg)
    chromium = shutil.which("chromium")
    if chromium:
        options.binary_location = chromium
    driver = webdriver.Chrome(service=webdriver.ChromeService(driver_path), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def wait_text(driver: webdriver.Chrome, element_id: str, text: str, timeout: float = 20) -> None:
    WebDriverWait(driver, timeout).until(
        ec.text_to_be_present_in_element((By.ID, element_id), text)
    )


def paste(driver: webdriver.Chrome, text: str) -> None:
    # set the value directly (send_keys of a long text is slow)
    area = driver.find_element(By.ID, "text")
    driver.execute_script("arguments[0].value = arguments[1];", area, text)


def test_page_checks_adds_and_shows_a_diff(browser: webdriver.Chrome, tmp_path: Path) -> None:
    base = "新闻 " + words(77, n=60)
    copy = near_copy(base, 4)
    changed = set(copy.split()) - set(base.split())
    assert changed == {"changed"}
    with ServerProcess(tmp_path / "store", "--retention", "2d") as srv:
        browser.get(srv.url + "/")
        assert browser.title == "neardup"
        wait_text(browser, "stat-count", "0")
        wait_text(browser, "stat-retention", "2.0 d")

        # add the original through the page
        paste(browser, base)
        browser.find_element(By.ID, "docid").send_keys("original-1")
        browser.find_element(By.ID, "checkadd").click()
        wait_text(browser, "status", "added as original-1")
        wait_text(browser, "stat-count", "1")

        # a near-copy: Check lists the original with its distance and shows the diff
        paste(browser, copy)
        browser.find_element(By.ID, "check").click()
        wait_text(browser, "status", "1 near-duplicate(s)")
        rows = browser.find_elements(By.CSS_SELECTOR, "#results tbody tr")
        assert len(rows) == 1
        cells = [c.text for c in rows[0].find_elements(By.TAG_NAME, "td")]
        assert cells[0] == "original-1"
        assert 0 <= int(cells[1]) <= 64
        assert 0.8 <= float(cells[2]) <= 1.0
        wait_text(browser, "diff-right-title", "original-1")
        left_changes = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#diff-left del")]
        right_changes = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#diff-right ins")]
        assert left_changes == ["changed"]
        assert len(right_changes) == 1 and right_changes[0] in base.split()
        assert browser.find_element(By.ID, "diff-left").text.replace("changed", "") == copy.replace(
            "changed", ""
        )

        # Check and add of the near-copy is refused and says why
        browser.find_element(By.ID, "docid").clear()
        browser.find_element(By.ID, "docid").send_keys("copy-1")
        browser.find_element(By.ID, "checkadd").click()
        wait_text(browser, "status", "not added: 1 near-duplicate(s) stored")

        # an error from the API is shown, not swallowed
        paste(browser, "   ")
        browser.find_element(By.ID, "check").click()
        wait_text(browser, "status", "empty_text")
        assert browser.find_element(By.ID, "status").get_attribute("class") == "error"

        # an unrelated text has no near-duplicates
        paste(browser, words(5000))
        browser.find_element(By.ID, "check").click()
        wait_text(browser, "status", "0 near-duplicate(s)")
        assert browser.find_element(By.ID, "empty").text == "No near-duplicate stored."
        wait_text(browser, "stat-added", "1")
        # an integer id past 2^53 keeps all its digits on the page and its diff loads
        big_id, big_text = 2**60 + 1, words(6000)
        httpx.post(srv.url + "/v1/add", json={"id": big_id, "text": big_text}, timeout=30)
        paste(browser, near_copy(big_text, 1))
        browser.find_element(By.ID, "check").click()
        wait_text(browser, "status", "1 near-duplicate(s)")
        cell = browser.find_element(By.CSS_SELECTOR, "#results tbody tr td")
        assert cell.text == str(big_id)
        wait_text(browser, "diff-right-title", str(big_id))
        WebDriverWait(browser, 20).until(
            lambda b: b.find_element(By.ID, "diff-right").text.replace("\n", " ").strip() != ""
        )
        assert browser.find_elements(By.CSS_SELECTOR, "#diff-left del")

        # no script error (the 422 of the blank text is logged as a failed load: expected)
        errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert [m for m in errors if "status of 422" not in m] == []


def test_page_behind_a_token(browser: webdriver.Chrome, tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "store", "--token", TOKEN) as srv:
        browser.delete_all_cookies()
        browser.get(srv.url + "/")
        assert browser.find_elements(By.ID, "login"), "the login form is shown"
        browser.find_element(By.ID, "token").send_keys("wrong-token-xyz")
        browser.find_element(By.ID, "login").click()
        WebDriverWait(browser, 20).until(ec.presence_of_element_located((By.ID, "wrong")))

        browser.find_element(By.ID, "token").send_keys(TOKEN)
        browser.find_element(By.ID, "login").click()
        WebDriverWait(browser, 20).until(ec.presence_of_element_located((By.ID, "check")))
        assert TOKEN not in browser.current_url
        wait_text(browser, "stat-count", "0")  # the page's own API calls carry the cookie
        paste(browser, words(9))
        browser.find_element(By.ID, "checkadd").click()
        wait_text(browser, "status", "added as page-")
        wait_text(browser, "stat-count", "1")
        cookie = browser.get_cookie("neardup_token")
        assert cookie is not None and cookie["httpOnly"] is True
