"""The ``neardup dedup --report`` pages: rendered from a real run in a real headless Chromium
(selenium + Debian's chromium-driver), read through the DOM and screenshotted; bounded in size
however many clusters the corpus has."""

from __future__ import annotations

import html
import io
import json
import re
import urllib.parse
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _helpers import near_copy, neardup, words
from neardup import report
from neardup.corpus import CorpusDeduper
from neardup.dedup import Policy
from PIL import Image
from selenium import webdriver
from selenium.webdriver.common.by import By
from test_service_page import browser  # noqa: F401 (the headless Chromium fixture)

pytestmark = pytest.mark.browser

N_EXACT_ONLY = N_NEAR_ONLY = N_BOTH = 70  # clusters of each kind, plus one of 8 near copies
BLANKS = ["", "   ", "\n"]


def corpus() -> list[dict[str, Any]]:
    """Originals and their planted copies: 70 clusters of exact copies only, 70 of near copies
    only, 70 with one of each, one of 7 near copies (the largest), 3 blank texts, 2 pages."""
    originals = [f"café {words(1000 + i, n=60)}" for i in range(300)]
    docs = [{"id": f"o{i:03d}", "text": t} for i, t in enumerate(originals)]
    for i in range(N_EXACT_ONLY + N_NEAR_ONLY + N_BOTH):
        t = originals[i]
        kind = i % 3
        if kind in (0, 2):
            docs.append({"id": f"x{i:03d}", "text": t})
        if kind in (1, 2):
            docs.append({"id": f"n{i:03d}", "text": near_copy(t, i)})
    big = originals[250]
    docs += [{"id": f"big{j}", "text": near_copy(near_copy(big, j), j + 50)} for j in range(7)]
    docs += [{"id": f"blank{j}", "text": t} for j, t in enumerate(BLANKS)]
    # two pages: one of link lists only (its main text falls back to the visible text)
    links = "".join(f"<li><a href=p{i}>qemu-img {w}</a></li>" for i, w in enumerate("abc"))
    docs.append({"id": "page-links", "text": f"<html><body><ul>{links}</ul></body></html>"})
    article = f"<html><body><nav><a href=h>Home</a></nav><p>{words(999, n=50)}</p></body></html>"
    docs.append({"id": "page-article", "text": article})
    return docs


def table(driver: webdriver.Chrome, section: str) -> dict[str, str]:
    cells = driver.find_elements(By.CSS_SELECTOR, f"#{section} table.s tr")
    return {
        r.find_element(By.TAG_NAME, "th").text: r.find_element(By.TAG_NAME, "td").text
        for r in cells
    }


def test_report_of_a_real_run_in_chromium(
    browser: webdriver.Chrome,  # noqa: F811
    tmp_path: Path,
) -> None:
    docs = corpus()
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), "utf-8")
    page = tmp_path / "report.html"
    r = neardup("dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--report", str(page), "-q")
    assert r.returncode == 0, r.stderr
    kept_ids = {json.loads(x)["id"] for x in (tmp_path / "o.jsonl").read_text().splitlines()}
    removed = [d for d in docs if d["id"] not in kept_ids]
    assert {d["id"][0] for d in removed} == {"x", "n", "b"}  # the planted copies, no blank
    n_exact = sum(d["id"].startswith("x") for d in removed)
    assert n_exact == N_EXACT_ONLY + N_BOTH

    # the verifier's own similarities of the removed near copies, for the audit section
    deduper = CorpusDeduper(Policy.default())
    deduper.feed([d["text"] for d in docs])
    result = deduper.result()
    near_rows = [
        row
        for row, rep in enumerate(result.representative.tolist())
        if rep != row and docs[row]["text"] != docs[rep]["text"]
    ]
    lowest = sorted(float(result.similarity[row]) for row in near_rows)[:20]

    browser.get(page.as_uri())
    assert browser.title == "neardup dedup report"
    sections = ("removed", "similarity", "distances", "audit", "largest", "clusters", "summary")
    for section in sections:
        assert browser.find_elements(By.ID, section), section

    shown = table(browser, "removed")
    assert shown["documents read"] == f"{len(docs):,}"
    assert shown["exact copies removed (same text as the kept one)"] == str(n_exact)
    assert shown["near copies removed"] == str(len(removed) - n_exact)
    assert shown["empty documents (no text to compare; never a copy)"] == "3"
    assert shown["empty documents dropped (--empty drop)"] == "0"
    assert shown["pages whose main text fell back to all their visible text"] == "1"
    chars = sum(len(d["text"]) for d in removed)
    nbytes = sum(len(d["text"].encode()) for d in removed)
    assert nbytes > chars  # (the é)
    total_chars = sum(len(d["text"]) for d in docs)
    assert shown["characters removed"].startswith(f"{chars:,} of {total_chars:,} (")
    assert shown["bytes of text removed (UTF-8)"].startswith(f"{nbytes:,} of ")
    assert shown["clusters"] == str(N_EXACT_ONLY + N_NEAR_ONLY + N_BOTH + 1)
    assert shown["clusters of exact copies only"] == str(N_EXACT_ONLY)

    # similarity histogram with the threshold marked at 0.8 of the axis
    svg = browser.find_element(By.CSS_SELECTOR, "#similarity svg")
    line = svg.find_element(By.CSS_SELECTOR, "line.threshold")
    x = float(line.get_attribute("x1") or "nan")
    assert x == pytest.approx(56 + 0.8 * (640 - 56 - 10), abs=0.1)
    assert "threshold 0.80" in svg.text
    assert svg.find_elements(By.CSS_SELECTOR, "rect.b1")

    # the pairs closest to the threshold: the lowest similarities, lowest first, with diffs
    metas = [
        e.text for e in browser.find_elements(By.CSS_SELECTOR, "#audit p.meta") if "vs" in e.text
    ]
    audited = [float(m) for t in metas for m in re.findall(r"similarity (\d\.\d+)", t)]
    assert audited == pytest.approx(lowest, abs=5e-4)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#audit div.pair")) == len(audited)
    assert browser.find_elements(By.CSS_SELECTOR, "#audit ins")

    # the largest cluster first, with its diffs
    first = browser.find_element(By.CSS_SELECTOR, "#largest h3").text
    assert first.startswith("#1: 8 documents (0 exact copies), kept o250")

    # screenshot: not blank
    png = browser.get_screenshot_as_png()
    (tmp_path / "report.png").write_bytes(png)
    image = Image.open(io.BytesIO(png)).convert("RGB")
    lo, hi = zip(*image.getextrema())
    assert max(hi) - min(lo) > 200  # dark text on a light page
    assert len(image.getcolors(1 << 20) or []) > 50  # text, bars, tables: not one flat colour

    # every cluster on pages of 200: 211 clusters, one line for a cluster of exact copies
    browser.find_element(By.LINK_TEXT, "page 1").click()
    assert browser.title.endswith("clusters, page 1")
    lines = browser.find_elements(By.CSS_SELECTOR, "ol.clusters > li")
    assert len(lines) == 200
    exact_lines = browser.find_elements(By.CSS_SELECTOR, "ol.clusters > li.exact")
    for li in exact_lines:
        assert not li.find_elements(By.TAG_NAME, "table")
        assert re.match(r"kept o\d{3}: \d+ exact (copy|copies) removed \(x\d{3}\)", li.text)
    assert all(li.find_elements(By.TAG_NAME, "tr") for li in lines if li not in exact_lines)
    assert lines[0].text.startswith("kept o250: 7 removed, 0 exact and 7 near")
    n_exact_lines = len(exact_lines)
    browser.find_element(By.CSS_SELECTOR, "a[rel=next]").click()
    assert browser.title.endswith("clusters, page 2")
    lines = browser.find_elements(By.CSS_SELECTOR, "ol.clusters > li")
    assert len(lines) == 11
    n_exact_lines += len(browser.find_elements(By.CSS_SELECTOR, "ol.clusters > li.exact"))
    assert n_exact_lines == N_EXACT_ONLY
    assert not browser.find_elements(By.CSS_SELECTOR, "a[rel=next]")
    browser.find_element(By.LINK_TEXT, "report").click()
    assert browser.title == "neardup dedup report"


def plan_for(texts: list[str], **limits: int) -> report.ReportPlan:
    deduper = CorpusDeduper(Policy.default())
    deduper.feed(texts)
    result = deduper.result()
    nbytes, digests, _ = report.measure(texts, Policy.default())
    return report.ReportPlan(
        result,
        result.kept,
        np.array([len(t) for t in texts], dtype=np.int64),
        np.array(nbytes, dtype=np.int64),
        np.array(digests, dtype=np.int64),
        Policy.default(),
        **limits,
    )


def write_plan(plan: report.ReportPlan, texts: list[str], path: Path) -> None:
    for row in np.flatnonzero(plan.needs).tolist():
        plan.take(row, texts[row])
    plan.write(str(path), {"read": len(texts)}, {})


def test_report_size_does_not_follow_the_corpus(tmp_path: Path) -> None:
    def texts(clusters: int) -> list[str]:
        out = []
        for i in range(clusters):
            t = words(50_000 + i, n=40)
            out += [t, near_copy(t, i)]
        return out

    small, large = texts(300), texts(3000)
    sizes = {}
    for name, corpus_texts in (("small", small), ("large", large)):
        plan = plan_for(corpus_texts)
        assert plan.c_rep.size == len(corpus_texts) // 2
        path = tmp_path / f"{name}.html"
        write_plan(plan, corpus_texts, path)
        pages = sorted((tmp_path / f"{name}-clusters").iterdir())
        assert [p.name for p in pages][-1] == f"page-{len(pages):04d}.html"
        assert len(pages) == -(-plan.c_rep.size // report.PAGE_CLUSTERS)
        assert max(p.stat().st_size for p in pages) < 150_000
        sizes[name] = path.stat().st_size
    # ten times the clusters: the main page stays the same size (within its varying texts)
    assert sizes["large"] < 1.2 * sizes["small"] < 400_000

    # the listing stops at its limit, says so, and a new report clears the former pages
    plan = plan_for(large, page_clusters=100, listed_clusters=250)
    write_plan(plan, large, tmp_path / "large.html")
    pages = sorted((tmp_path / "large-clusters").iterdir())
    assert [p.name for p in pages] == ["page-0001.html", "page-0002.html", "page-0003.html"]
    assert pages[-1].read_text("utf-8").count('<li class="near">') == 50
    main = (tmp_path / "large.html").read_text("utf-8")
    assert "2,750 smaller clusters are not listed" in main


def test_a_run_without_copies_and_without_verifier(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": words(i)}) + "\n" for i in range(30)), "utf-8")
    page = tmp_path / "r.html"
    r = neardup("dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--report", str(page), "-q")
    assert r.returncode == 0, r.stderr
    html = page.read_text("utf-8")
    assert html.count("No near-duplicates were found.") == 1
    assert "No near copies were removed." in html
    listing = (tmp_path / "r-clusters" / "page-0001.html").read_text("utf-8")
    assert "No near-duplicates were found." in listing
    copies = [words(7), near_copy(words(7), 1), words(8)]
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in copies), "utf-8")
    r = neardup(
        "dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--report", str(page), "-q",
        "--verifier", "none",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    html = page.read_text("utf-8")
    assert "--verifier none: every candidate within the SimHash radius is a copy" in html
    # the one near copy: among those closest to the radius, and in the largest cluster
    assert "farthest in SimHash bits" in html and html.count('class="pair"') == 2


def test_links_between_report_and_cluster_pages_resolve_whatever_the_name(tmp_path: Path) -> None:
    """A report named with '#', '?', '%' or a space: its links are URL-quoted file names."""
    copies = [words(7), near_copy(words(7), 1), words(8)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in copies), "utf-8")
    page = tmp_path / "report #1?%25.html"
    r = neardup("dedup", str(src), "-o", str(tmp_path / "o.jsonl"), "--report", str(page), "-q")
    assert r.returncode == 0, r.stderr
    listing = tmp_path / "report #1?%25-clusters" / "page-0001.html"
    for source, html_text in (
        (page, page.read_text("utf-8")),
        (listing, listing.read_text("utf-8")),
    ):
        hrefs = re.findall(r'href="([^"#][^"]*)"', html_text)
        local = [h for h in hrefs if "://" not in h]
        assert local, source
        for h in local:
            target = urllib.parse.urlsplit(html.unescape(h))
            assert (source.parent / urllib.parse.unquote(target.path)).is_file(), h
