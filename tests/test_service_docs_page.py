"""``/docs`` renders the service's OpenAPI 3.1 in a real headless Chromium, from assets the
server itself serves (Swagger UI 5 of the ``fastapi-offline`` package): no CDN, no
"Unable to render this definition"."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from test_service_harness import ServerProcess
from test_service_page import browser  # noqa: F401 (the fixture)

pytestmark = pytest.mark.browser


def test_docs_lists_every_operation_offline(
    browser: webdriver.Chrome,  # noqa: F811
    tmp_path: Path,
) -> None:
    with ServerProcess(tmp_path / "store") as srv:
        spec = httpx.get(srv.url + "/openapi.json").json()
        assert spec["openapi"].startswith("3.1")
        operations = {
            (method.upper(), path) for path, item in spec["paths"].items() for method in item
        }
        assert ("POST", "/v1/check-and-add") in operations and len(operations) >= 10
        browser.get(srv.url + "/docs")
        WebDriverWait(browser, 30).until(
            lambda d: (
                len(d.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")) >= len(operations)
            )
        )
        shown = {
            (
                block.find_element(By.CSS_SELECTOR, ".opblock-summary-method").text.strip(),
                block.find_element(By.CSS_SELECTOR, ".opblock-summary-path").get_attribute(
                    "data-path"
                ),
            )
            for block in browser.find_elements(By.CSS_SELECTOR, ".opblock-summary")
        }
        assert shown == operations
        body = browser.find_element(By.TAG_NAME, "body").text
        assert "Unable to render" not in body and "neardup" in body
        # every script and style the page loaded came from this server
        sources = browser.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
        )
        assert sources and all(s.startswith(srv.url) for s in sources), sources


@pytest.mark.parametrize(
    ("flags", "shown"),
    [
        ((), "MinHash bands of 5-character shingles, then jaccard ≥ 0.80 (k unused)"),
        (("--k", "7"), "within k = 7 bits, then jaccard ≥ 0.80"),
    ],
)
def test_the_page_shows_the_effective_candidate_rule(
    browser: webdriver.Chrome,  # noqa: F811
    tmp_path: Path,
    flags: tuple[str, ...],
    shown: str,
) -> None:
    with ServerProcess(tmp_path / "store", *flags) as srv:
        browser.get(srv.url + "/")
        WebDriverWait(browser, 20).until(
            lambda d: d.find_element(By.ID, "stat-k").text not in ("", "…")
        )
        assert browser.find_element(By.ID, "stat-k").text == shown
