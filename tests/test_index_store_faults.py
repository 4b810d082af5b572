"""neardup.Index.open under faults: a full disk during a checkpoint or a write, a process killed
with SIGKILL, lost or damaged files. What an open finds must hold every acknowledged write, or
be an error: never an index with less in it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from neardup import CorruptIndexError, Index

WAL0 = "wal-0000000000000000.log"


def _full_disk(tmp_path: Path, inner: str, check: str) -> dict:
    """Runs `inner` (killed with SIGKILL at its end) then `check` (which prints one JSON line)
    in a private mount namespace with a 256 KiB tmpfs at `M`; skipped where that is not
    allowed."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=256k tmpfs '{mnt}'"],
        capture_output=True,
    )
    if probe.returncode != 0:
        pytest.skip("a private mount namespace with a tmpfs is not allowed here")
    head = f"import os, signal, sys, json\nfrom neardup import Index\nM = {str(mnt)!r}\n"
    script = f'mount -t tmpfs -o size=256k tmpfs \'{mnt}\' && {{ "$0" -c "$1"; "$0" -c "$2"; }}'
    r = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, sys.executable, head + inner, head + check],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = r.stdout.strip().splitlines()
    assert lines, r.stderr
    return json.loads(lines[-1])


FILL = """
def fill(spare):
    st = os.statvfs(M)
    with open(M + "/filler", "wb") as f:
        f.write(b"\\0" * max(0, st.f_bavail * st.f_frsize - spare))
"""

CHECK = """
import warnings
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    try:
        idx = Index.open(M + "/idx")
        out = {"ids": sorted(i for i in range(5000) if i in idx), "len": len(idx)}
    except Exception as e:
        out = {"error": f"{type(e).__name__}: {e}"}
out["warnings"] = [str(x.message) for x in w]
print(json.dumps(out))
"""


def test_a_checkpoint_failing_on_a_full_disk_loses_no_later_write(tmp_path: Path) -> None:
    # A checkpoint of each index fails at another step (from no room at all to just too little
    # for the snapshot); the acknowledged adds after it must survive a SIGKILL.
    inner = (
        FILL
        + """
failed = 0
for spare in range(4):
    idx = Index.open(f"{M}/idx{spare}", k=3)
    idx.add_many(list(range(300)), [i * 0x9E3779B97F4A7C15 % 2**64 for i in range(300)], 1.0)
    fill(spare * 4096)
    try:
        idx.checkpoint()
    except OSError:
        failed += 1
    os.remove(M + "/filler")
    for i in range(1000, 1010):
        idx.add(i, i, 2.0)  # acknowledged (sync="always")
with open(M + "/failed", "w") as f:
    f.write(str(failed))
os.kill(os.getpid(), signal.SIGKILL)
"""
    )
    check = """
import warnings
out = {"failed": int(open(M + "/failed").read()), "lost": {}, "said": []}
for spare in range(4):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            idx = Index.open(f"{M}/idx{spare}")
            lost = [i for i in [*range(300), *range(1000, 1010)] if i not in idx]
        except Exception as e:
            lost = f"{type(e).__name__}: {e}"
    out["lost"][spare] = lost
    out["said"] += [str(x.message) for x in w]
print(json.dumps(out))
"""
    out = _full_disk(tmp_path, inner, check)
    assert out["failed"] >= 2, out  # (the disk was full enough)
    assert out["lost"] == {str(s): [] for s in range(4)} and out["said"] == [], out


def test_a_write_failing_on_a_full_disk_is_taken_back_out_of_the_log(tmp_path: Path) -> None:
    inner = (
        FILL
        + """
idx = Index.open(M + "/idx", k=3)
idx.add(1, 1, 1000.0)
fill(3 * 4096)
n = 2000  # a record of about 48 KiB: it does not fit
try:
    idx.add_many(list(range(100, 100 + n)), list(range(n)), 2000.0)
    said = None
except OSError as e:
    said = [e.errno, e.filename]
os.remove(M + "/filler")
idx.add(2, 2, 3000.0)  # acknowledged, after the failure
with open(M + "/said.json", "w") as f:
    json.dump(said, f)
os.kill(os.getpid(), signal.SIGKILL)
"""
    )
    check = CHECK + 'print(json.dumps({**out, "said": json.load(open(M + "/said.json"))}))\n'
    out = _full_disk(tmp_path, inner, check)
    errno, filename = out["said"]
    assert errno == 28 and filename.endswith("/idx/" + WAL0), out
    assert "error" not in out, out
    assert out["ids"] == [1, 2] and out["warnings"] == []


def _killed_writer(path: Path, code: str) -> None:
    """Runs `code` on `idx` (the index at `path`) in a subprocess killed with SIGKILL once it
    is done: no close, no destructor."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom neardup import Index\n"
            f"idx = Index.open({str(path)!r})\n{code}\n"
            "print('done', flush=True)\ntime.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "done"
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_the_lost_log_of_an_index_never_checkpointed_is_an_error(tmp_path: Path) -> None:
    d = tmp_path / "i"
    _killed_writer(d, "idx.add_many(list(range(100)), list(range(100)), 1.0)")
    assert sorted(p.name for p in d.iterdir()) == ["LOCK", "index.meta", WAL0]
    (d / WAL0).unlink()
    with pytest.raises(CorruptIndexError, match=f"{WAL0} is missing"):
        Index.open(d)
    assert sorted(p.name for p in d.iterdir()) == ["LOCK", "index.meta"]  # (nothing made)


def test_a_lost_snapshot_and_log_together_are_an_error(tmp_path: Path) -> None:
    d = tmp_path / "i"
    with Index.open(d, k=3) as idx:
        idx.add_many(list(range(100)), list(range(100)), 1.0)
    for p in [*d.glob("snapshot-*"), *d.glob("wal-*")]:
        p.unlink()
    with pytest.raises(CorruptIndexError, match="missing"):
        Index.open(d)


def test_an_index_whose_creation_was_cut_short_opens_as_new(tmp_path: Path) -> None:
    # Creating an index writes wal-0 (its header), then index.meta: a crash in between leaves
    # wal-0 alone (and maybe a temporary meta file).
    d = tmp_path / "i"
    _killed_writer(d, "")
    (d / "index.meta").unlink()
    (d / "index.meta.tmp").write_bytes(b"NDUPMETA")
    with Index.open(d, k=5) as idx:
        assert idx.k == 5 and len(idx) == 0
        idx.add(1, 1, 1.0)
    assert sorted(p.name for p in d.iterdir() if "tmp" in p.name) == []
    with Index.open(d) as idx:
        assert idx.k == 5 and 1 in idx
    # A wal-0 with records in it and no index.meta is damage.
    _killed_writer(d, "idx.add(2, 2, 1.0)")
    (d / "index.meta").unlink()
    with pytest.raises(CorruptIndexError, match="no index.meta"):
        Index.open(d)


def test_damage_that_no_crash_leaves_is_an_error_not_a_torn_write(tmp_path: Path) -> None:
    # A bit flip in the last record (synced before remove() returned), one disk sector long.
    d = tmp_path / "flip"
    _killed_writer(d, "idx.add_many(list(range(10)), list(range(10)), 1.0)\nidx.remove(5)")
    (wal,) = d.glob("wal-*.log")
    b = bytearray(wal.read_bytes())
    b[-3] ^= 0x01
    wal.write_bytes(bytes(b))
    with pytest.raises(CorruptIndexError, match="fails its checksum"):
        Index.open(d)
    assert wal.read_bytes() == bytes(b)  # (not cut)
    # The log of generation 1, cut below its header: logs are created whole.
    for cut in (0, 10):
        d = tmp_path / f"cut{cut}"
        _killed_writer(d, "idx.add(1, 1, 1.0)\nidx.checkpoint()\nidx.add(2, 2, 1.0)")
        (wal,) = d.glob("wal-*.log")
        os.truncate(wal, cut)
        with pytest.raises(CorruptIndexError, match="cut short|magic"):
            Index.open(d)
    # A torn write (a record cut short at the end) is still dropped with a warning.
    d = tmp_path / "torn"
    _killed_writer(d, "idx.add(1, 1, 1.0)\nidx.add(2, 2, 1.0)")
    (wal,) = d.glob("wal-*.log")
    os.truncate(wal, wal.stat().st_size - 3)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        idx = Index.open(d)
    assert 1 in idx and 2 not in idx
    assert any("torn write" in str(x.message) for x in w)
    idx.close()


@pytest.mark.parametrize("victim", ["snapshot-*", "wal-*", "index.meta", "LOCK"])
def test_a_directory_in_place_of_a_file_is_damage_naming_it(tmp_path: Path, victim: str) -> None:
    d = tmp_path / "i"
    with Index.open(d) as idx:
        idx.add(1, 1, 1.0)
    (p,) = d.glob(victim)
    p.unlink()
    p.mkdir()
    with pytest.raises(CorruptIndexError, match=str(p)):
        Index.open(d)


def test_an_os_error_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "plain").write_bytes(b"x")
    under = tmp_path / "plain" / "sub"
    with pytest.raises(NotADirectoryError) as e:
        Index.open(under)
    assert e.value.filename == str(under) and e.value.errno == 20
