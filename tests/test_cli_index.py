"""`neardup index build/query` end to end over a persistent index directory.

The durable index (``Index.open``) comes with the index core; until a build has it, the tests
that need it are expected to fail (strictly: they run and must pass once it is there)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _helpers import SAMPLE, neardup, run_unprivileged
from neardup import Index, hamming
from neardup.dedup import Deduplicator, Policy

needs_durable_index = pytest.mark.xfail(
    not hasattr(Index, "open"),
    reason="Index.open (the durable index) is not in this build yet",
    strict=True,
)


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    with open(SAMPLE, encoding="utf-8") as f:
        return [json.loads(line) for line in f][:400]


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )


def _brute(fps: dict[Any, int], fp: int, k: int) -> set[tuple[Any, int]]:
    return {(i, hamming(fp, x)) for i, x in fps.items() if hamming(fp, x) <= k}


@needs_durable_index
def test_build_then_query(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    policy = Policy.default()
    f = policy.make_fingerprinter()
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write(a, rows[:300])
    _write(b, rows[300:])
    idx = tmp_path / "idx"
    r = neardup("index", "build", str(idx), str(a), "--k", "3", "--time-field", "published")
    assert r.returncode == 0, r.stderr
    assert "added 300 documents" in r.stderr
    # a second build adds to the same directory (reopened from disk)
    r = neardup("index", "build", str(idx), str(b))
    assert r.returncode == 0, r.stderr
    assert "holds 400" in r.stderr
    # texts are fingerprinted as the deduplicators do
    values = policy.fingerprint_many(f, [x["text"] for x in rows]).tolist()
    fps = {x["id"]: v for x, v in zip(rows, values)}

    # a text's matches are the stored documents it is a near-copy of, verified as the
    # deduplicators decide, best first; the text is not echoed
    d = Deduplicator()
    d.add_many([x["id"] for x in rows], [x["text"] for x in rows])
    text = rows[10]["text"]
    r = neardup("index", "query", str(idx), "--text", text)
    assert r.returncode == 0, r.stderr
    (result,) = [json.loads(line) for line in r.stdout.splitlines()]
    assert "query" not in result and result["fingerprint"] == f"{fps[rows[10]['id']]:016x}"
    assert [(m["id"], m["distance"], m["similarity"]) for m in result["matches"]] == [
        (m.id, m.distance, round(m.similarity or 0, 6)) for m in d.check(text)
    ]
    assert result["matches"][0] == {"id": rows[10]["id"], "distance": 0, "similarity": 1.0}

    probe = fps[rows[20]["id"]] ^ 0b101  # two bits away
    r = neardup("index", "query", str(idx), "--fingerprint", f"{probe:016x}", "--k", "6")
    assert r.returncode == 0, r.stderr
    (result,) = [json.loads(line) for line in r.stdout.splitlines()]
    assert {(m["id"], m["distance"]) for m in result["matches"]} == _brute(fps, probe, 6)
    assert (rows[20]["id"], 2) in {(m["id"], m["distance"]) for m in result["matches"]}
    assert {m["similarity"] for m in result["matches"]} == {None}  # (no text: not verified)

    q = tmp_path / "q.jsonl"
    _write(q, rows[:30])
    out = tmp_path / "res.jsonl"
    r = neardup("index", "query", str(idx), str(q), "-o", str(out), "--k", "3")
    assert r.returncode == 0, r.stderr
    results = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [x["query"] for x in results] == [x["id"] for x in rows[:30]]
    for x, res in zip(rows[:30], results):
        # with --k: the stored documents within k bits that pass the verifier
        got = {(m["id"], m["distance"]) for m in res["matches"]}
        assert got == {(m.id, m.distance) for m in d.check(x["text"], k=3)}
        assert got <= _brute(fps, fps[x["id"]], 3) and (x["id"], 0) in got


@needs_durable_index
def test_build_refuses_another_preset(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    src = tmp_path / "a.jsonl"
    _write(src, rows[:10])
    assert neardup("index", "build", str(tmp_path / "idx"), str(src)).returncode == 0
    r = neardup("index", "build", str(tmp_path / "idx"), str(src), "--preset", "seed000")
    assert r.returncode == 2 and "was built with preset" in r.stderr


def test_query_errors(tmp_path: Path) -> None:
    r = neardup("index", "query", str(tmp_path / "nowhere"), "--text", "x")
    assert r.returncode == 1 and "no such index directory" in r.stderr
    (tmp_path / "empty").mkdir()
    r = neardup("index", "query", str(tmp_path / "empty"), "--text", "x")
    assert r.returncode == 1 and "build it with `neardup index build`" in r.stderr
    r = neardup("index", "query", str(tmp_path / "empty"))
    assert r.returncode == 2 and "one of the arguments" in r.stderr
    r = neardup("index", "query", str(tmp_path / "empty"), "--text", "x", "--k", "99")
    assert r.returncode == 2 and "--k 99 is out of range" in r.stderr
    r = neardup("index", "build", str(tmp_path / "i"), str(tmp_path / "missing.jsonl"))
    assert r.returncode == 1 and "missing.jsonl: no such file or directory" in r.stderr


@needs_durable_index
def test_query_bad_fingerprint(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    src = tmp_path / "a.jsonl"
    _write(src, rows[:5])
    assert neardup("index", "build", str(tmp_path / "idx"), str(src)).returncode == 0
    r = neardup("index", "query", str(tmp_path / "idx"), "--fingerprint", "xyz")
    assert r.returncode == 2 and "--fingerprint 'xyz' is not 16 hex digits" in r.stderr
    r = neardup("index", "query", str(tmp_path / "idx"), "--fingerprint", str(1 << 64))
    assert r.returncode == 2 and "out of range" in r.stderr


@needs_durable_index
def test_build_refuses_an_id_repeated_among_its_inputs(
    tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    # Stored, the second document of an id would silently replace the first: within one build
    # it is a bad record, named with where the id came first (an id already in the directory
    # from an earlier build is still replaced: that is how a directory is updated).
    from neardup.textstore import SqliteTextStore

    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    _write(a, [{"id": "q1", "text": rows[0]["text"]}, {"id": "q2", "text": rows[1]["text"]}])
    _write(b, [{"id": "q2", "text": rows[2]["text"]}, {"id": "q3", "text": rows[3]["text"]}])
    _write(c, [{"id": 7, "text": rows[4]["text"]}, {"id": 7, "text": rows[5]["text"]}])
    idx = tmp_path / "idx"
    r = neardup("index", "build", str(idx), str(a), str(b))
    assert r.returncode == 1
    assert f"{b}:1: id 'q2' repeats the id of {a}:2: ids must be unique" in r.stderr
    r = neardup("index", "build", str(tmp_path / "idx-c"), str(c))
    assert r.returncode == 1 and f"{c}:2: id 7 repeats the id of {c}:1" in r.stderr
    # --on-error skip: the later one is left out, and counted
    r = neardup("index", "build", str(idx), str(a), str(b), "--on-error", "skip")
    assert r.returncode == 0, r.stderr
    assert f"skipped {b}:1: id 'q2' repeats the id of {a}:2" in r.stderr
    assert "added 3 documents (1 repeated id skipped); " in r.stderr
    store = SqliteTextStore(str(idx / "texts.sqlite"))
    try:
        assert store.get("q2") == rows[1]["text"] and len(store) == 3
    finally:
        store.close()
    # a later build replaces an id already there
    _write(c, [{"id": "q2", "text": rows[6]["text"]}])
    r = neardup("index", "build", str(idx), str(c))
    assert r.returncode == 0 and "holds 3" in r.stderr
    store = SqliteTextStore(str(idx / "texts.sqlite"))
    try:
        assert store.get("q2") == rows[6]["text"]
    finally:
        store.close()


def _files(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())}


def _read_only(directory: Path, read_only: bool) -> None:
    for p in [*directory.iterdir(), directory]:
        p.chmod((0o555 if p.is_dir() else 0o444) if read_only else (0o755 if p.is_dir() else 0o644))


@needs_durable_index
def test_a_query_reads_the_directory_with_its_k_whether_or_not_it_can_be_written(
    tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    import shutil

    policy = Policy.default()
    src = tmp_path / "a.jsonl"
    _write(src, rows[:50])
    idx = tmp_path / "idx"
    r = neardup("index", "build", str(idx), str(src), "--k", "5", "-q")
    assert r.returncode == 0, r.stderr
    settings = json.loads((idx / "neardup-cli.json").read_text("utf-8"))
    assert settings["k"] == 5  # (recorded for the queries, which do not open the index)
    fps = dict(
        zip(
            [x["id"] for x in rows[:50]],
            policy.fingerprint_many(
                policy.make_fingerprinter(), [x["text"] for x in rows[:50]]
            ).tolist(),
        )
    )
    probe = fps[rows[7]["id"]] ^ 0b1111  # four bits away: within the directory's k, not 3
    queries = [
        ("--fingerprint", f"{probe:016x}"),
        ("--text", rows[7]["text"]),
        ("--text", rows[7]["text"], "--k", "4"),
    ]
    before = _files(idx)
    answers = []
    for q in queries:
        r = neardup("index", "query", str(idx), *q, "-q")
        assert r.returncode == 0, r.stderr
        answers.append(r.stdout)
    (hit,) = [json.loads(line) for line in answers[0].splitlines()]
    assert {(m["id"], m["distance"]) for m in hit["matches"]} == _brute(fps, probe, 5)
    assert (rows[7]["id"], 4) in {(m["id"], m["distance"]) for m in hit["matches"]}
    # the query wrote nothing: the files are as they were (SQLite's read-only readers may
    # leave the store's -shm/-wal side files)
    after = _files(idx)
    assert {n: after[n] for n in before} == before
    assert set(after) - set(before) <= {"texts.sqlite-shm", "texts.sqlite-wal"}
    # a directory last built before the settings recorded k: read from the index's meta file
    old = tmp_path / "old"
    shutil.copytree(idx, old)
    del settings["k"]
    (old / "neardup-cli.json").write_text(json.dumps(settings), "utf-8")
    r = neardup("index", "query", str(old), *queries[0], "-q")
    assert r.returncode == 0 and r.stdout == answers[0], r.stderr
    # the same answers from a directory that cannot be written (one path: the store read
    # read-only, an index in memory with the directory's k), and nothing changed in it
    before = _files(idx)
    _read_only(idx, True)
    try:
        for q, expect in zip(queries, answers):
            r = neardup("index", "query", str(idx), *q, "-q", unprivileged=True)
            assert r.returncode == 0, r.stderr
            assert r.stdout == expect
    finally:
        _read_only(idx, False)
    assert _files(idx) == before


@needs_durable_index
def test_a_permission_failure_of_the_index_is_a_permission_error(
    tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    import sys

    src = tmp_path / "a.jsonl"
    _write(src, rows[:5])
    raw = tmp_path / "raw"
    assert neardup("index", "build", str(raw), str(src), "--raw", "-q").returncode == 0
    _read_only(raw, True)
    try:
        # the binding raises PermissionError (errno EACCES), not an OSError to read the text of
        opened = run_unprivileged(
            sys.executable,
            "-c",
            "import sys\nfrom neardup import Index\ntry:\n    Index.open(sys.argv[1])\n"
            "except OSError as e:\n    print(type(e).__name__, e.errno, e)\n",
            str(raw),
        )
        assert opened.returncode == 0, opened.stderr
        assert opened.stdout.startswith("PermissionError 13 [Errno 13] Permission denied")
        # a directory of fingerprints only has no store to read: the index is opened for
        # writing, which is refused with what to do
        r = neardup("index", "query", str(raw), "--text", rows[0]["text"], unprivileged=True)
        assert r.returncode == 1
        assert "is opened for writing; copy it somewhere writable" in r.stderr
    finally:
        _read_only(raw, False)


def test_query_output_must_not_be_an_input_nor_in_a_missing_directory(tmp_path: Path) -> None:
    """`index query DIR in.jsonl -o in.jsonl` emptied the input (the output was opened first); a
    missing output directory failed with a traceback after all texts were loaded."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(f'{{"id": {i}, "text": "text number {i} here"}}\n' for i in range(20)))
    r = neardup("index", "build", str(tmp_path / "idx"), str(src))
    assert r.returncode == 0, r.stderr
    r = neardup("index", "query", str(tmp_path / "idx"), str(src), "-o", str(src))
    assert r.returncode == 2 and "is both an input and an output" in r.stderr
    assert len(src.read_text().splitlines()) == 20
    r = neardup(
        "index", "query", str(tmp_path / "idx"), str(src), "-o", str(tmp_path / "no/q.jsonl")
    )
    assert r.returncode == 2 and "no directory" in r.stderr and "Traceback" not in r.stderr
    r = neardup("index", "query", str(tmp_path / "idx"), str(src), "-o", str(tmp_path / "idx/x"))
    assert r.returncode == 2 and "is inside the input" in r.stderr
    r = neardup("index", "query", str(tmp_path / "idx"), str(src), "-o", "-", cwd=tmp_path)
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 20
    assert not (tmp_path / "-").exists()


def test_later_builds_keep_the_stored_k_and_refuse_what_they_cannot_keep(tmp_path: Path) -> None:
    """A directory built with --k 5 takes more texts without --k again (the default 3 used to be
    passed and refused); --raw into a directory of prepared fingerprints is refused (it was
    ignored); a file given as the directory is named, not a traceback."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"id": 1, "text": "hello world"}\n')
    b.write_text('{"id": 2, "text": "another document"}\n')
    idx = tmp_path / "idx"
    assert neardup("index", "build", str(idx), str(a), "--k", "5").returncode == 0
    r = neardup("index", "build", str(idx), str(b))
    assert r.returncode == 0, r.stderr
    assert Index.open(str(idx)).k == 5
    r = neardup("index", "build", str(idx), str(b), "--k", "7")
    assert r.returncode == 2 and "leave --k out to keep it" in r.stderr
    r = neardup("index", "build", str(idx), str(b), "--raw")
    assert r.returncode == 2 and "built without --raw" in r.stderr
    r = neardup("index", "build", str(a), str(b))
    assert r.returncode == 2 and "is a file, not an index directory" in r.stderr


def test_a_directory_whose_texts_are_gone_is_refused_not_refilled(
    tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    """(with texts.sqlite deleted, a build made a new, empty one and said "holds 300": queries
    then verified against the few texts added since, and --against said the directory "holds
    fingerprints only")"""
    src, more, ix = tmp_path / "in.jsonl", tmp_path / "more.jsonl", tmp_path / "ix"
    _write(src, rows[:40])
    _write(more, [{**r, "id": f"new-{r['id']}"} for r in rows[40:45]])
    assert neardup("index", "build", str(ix), str(src), "-q").returncode == 0
    for f in ix.glob("texts.sqlite*"):
        f.unlink()
    for args in (
        ("index", "build", str(ix), str(more)),
        ("index", "query", str(ix), str(src)),
        ("dedup", str(src), "-o", str(tmp_path / "k.jsonl"), "--against", str(ix)),
    ):
        r = neardup(*args)
        assert r.returncode == 1 and "texts.sqlite is missing" in r.stderr, (args, r.stderr)
    assert not (ix / "texts.sqlite").exists() and not (tmp_path / "k.jsonl").exists()
    assert len(Index.open(str(ix))) == 40


def test_a_bad_id_or_time_field_is_refused_before_anything_is_stored(tmp_path: Path) -> None:
    """(an int id beyond 64 bits stopped the build with a traceback, --on-error skip could not
    skip it and its whole chunk was lost; --time-field on text lines stored the texts, then
    failed with a traceback before indexing them)"""
    src = tmp_path / "big.jsonl"
    src.write_text(
        '{"id": 9223372036854775808, "text": "alpha beta gamma delta"}\n'
        '{"id": 2, "text": "another text entirely"}\n'
    )
    r = neardup("index", "build", str(tmp_path / "a"), str(src))
    assert r.returncode == 1 and "big.jsonl:1: id must fit in a signed 64-bit" in r.stderr
    r = neardup("index", "build", str(tmp_path / "b"), str(src), "--on-error", "skip")
    assert r.returncode == 0 and "1 bad record skipped" in r.stderr, r.stderr
    assert Index.open(str(tmp_path / "b")).query(0, 64)[0][0] == 2
    lines = tmp_path / "a.txt"
    lines.write_text("first line of text\nsecond line of text\n")
    r = neardup("index", "build", str(tmp_path / "c"), str(lines), "--time-field", "t")
    assert r.returncode == 2 and "--time-field needs records with fields" in r.stderr
    assert not (tmp_path / "c").exists()


def test_a_damaged_text_store_is_named_not_a_traceback(
    tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    """(a stored text that is not UTF-8 gave sqlite3's traceback in index query and dedup
    --against)"""
    import sqlite3

    src, ix = tmp_path / "in.jsonl", tmp_path / "ix"
    _write(src, rows[:30])
    assert neardup("index", "build", str(ix), str(src), "-q").returncode == 0
    (ix / "texts.engine").unlink()  # (else the texts are not read)
    db = sqlite3.connect(ix / "texts.sqlite")
    db.execute("UPDATE texts SET text = CAST(x'ff41' AS TEXT) WHERE seq = 1")
    db.commit()
    db.close()
    for args in (
        ("index", "query", str(ix), "--text", "hello"),
        ("dedup", str(src), "-o", str(tmp_path / "k.jsonl"), "--against", str(ix)),
    ):
        r = neardup(*args)
        assert r.returncode == 1 and "texts.sqlite' is damaged" in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr


@pytest.mark.parametrize("raw", [False, pytest.param(True, marks=needs_durable_index)])
def test_a_query_output_that_cannot_be_opened_is_said_not_a_traceback(
    tmp_path: Path, rows: list[dict[str, Any]], raw: bool
) -> None:
    """(-o naming a directory gave IsADirectoryError's traceback, with exit 1), for a directory
    with its texts and one of fingerprints only (--raw)"""
    src, ix, out = tmp_path / "in.jsonl", tmp_path / "ix", tmp_path / "out"
    _write(src, rows[:30])
    build = ["--raw"] if raw else []
    assert neardup("index", "build", str(ix), str(src), *build, "-q").returncode == 0
    out.mkdir()
    r = neardup("index", "query", str(ix), "--text", "hello", "-o", str(out), "-q")
    assert r.returncode == 2 and f"-o {out} is a directory" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not list(out.iterdir())
    # one that no check foresees (under /proc, written in place): said when it is opened
    r = neardup("index", "query", str(ix), "--text", "hello", "-o", "/proc/neardup-no-such", "-q")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "neardup index query: -o /proc/neardup-no-such: " in r.stderr


def test_a_hand_edited_settings_file_is_named_not_a_traceback(
    tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    src, ix = tmp_path / "in.jsonl", tmp_path / "ix"
    _write(src, rows[:5])
    assert neardup("index", "build", str(ix), str(src), "-q").returncode == 0
    settings = json.loads((ix / "neardup-cli.json").read_text())
    settings["fingerprint"]["preset"] = 5
    (ix / "neardup-cli.json").write_text(json.dumps(settings))
    for args in (
        ("index", "query", str(ix), "--text", "hello"),
        ("index", "build", str(ix), str(src)),
    ):
        r = neardup(*args)
        assert r.returncode in (1, 2) and "neardup-cli.json: preset must be str" in r.stderr
        assert "Traceback" not in r.stderr


def test_a_warning_of_the_index_is_said_as_the_command_says_things(tmp_path: Path) -> None:
    """(a torn write at the end of the log was reported as Python's RuntimeWarning: a source
    path and line of neardup/cli/index.py)"""
    import subprocess
    import sys

    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1, "text": "The quick brown fox jumps over the lazy dog."}\n')
    assert neardup("index", "build", str(tmp_path / "i"), str(src), "--raw", "-q").returncode == 0
    torn = (
        "import glob, os\n"
        "from neardup import Index\n"
        f"i = Index.open({str(tmp_path / 'i')!r}); i.add(77, 5, 1.0); i.add(78, 6, 1.0)\n"
        f"w = sorted(glob.glob({str(tmp_path / 'i' / 'wal-*')!r}))[-1]\n"
        "os.truncate(w, os.path.getsize(w) - 3)\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", torn], check=True)
    r = neardup("index", "query", str(tmp_path / "i"), "--fingerprint", "0", "--k", "64")
    assert r.returncode == 0, r.stderr
    assert "neardup index: warning: " in r.stderr and "dropped a torn write" in r.stderr
    assert ".py:" not in r.stderr and "RuntimeWarning" not in r.stderr, r.stderr
