# SPDX-License-Identifier: GPL-3.0-or-later
"""lab/zip_code_cache.py, the lab nodes' cache of code compiled from zipped modules: run in a
child interpreter (it patches zipimport process-wide) against a real zip on sys.path."""

import json
import os
import subprocess
import sys
import zipfile

HOOK = os.path.join(os.path.dirname(__file__), "..", "..", "lab", "zip_code_cache.py")

CHILD = r"""
import json, os, sys, traceback
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import zip_code_cache                      # the hook, as the nodes' .pth file imports it
sys.path.insert(0, sys.argv[2])            # the payload zip
import payload_mod
try:
    payload_mod.boom()
except ValueError:
    where = traceback.extract_tb(sys.exc_info()[2])[-1].filename
print(json.dumps({"answer": payload_mod.answer(), "file": payload_mod.__file__, "where": where,
                  "nested": payload_mod.answer.__code__.co_filename}))
"""


def payload(tmp_path, name, body):
    path = tmp_path / name / "payload.zip"
    path.parent.mkdir()
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("payload_mod.py", body)
    return str(path)


def run(tmp_path, zip_path, cache, make=True, **env):
    if make:
        os.makedirs(cache, exist_ok=True)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    full = dict(os.environ, NODEFIX_LAB_ZIPCODE_DIR=str(cache), PYTHONDONTWRITEBYTECODE="1", **env)
    out = subprocess.run([sys.executable, str(script), os.path.abspath(HOOK), zip_path], env=full,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def cached(cache):
    return sorted(f for _top, _dirs, files in os.walk(cache) for f in files)


BODY = "def answer():\n    return %d\n\n\ndef boom():\n    raise ValueError('x')\n"


def test_the_second_run_uses_the_cached_code_under_its_own_path(tmp_path):
    cache = tmp_path / "cache"
    first = run(tmp_path, payload(tmp_path, "run1", BODY % 1), cache)
    entries = cached(cache)
    assert first["answer"] == 1 and len(entries) == 1
    # a later run: another temporary path, the same source -> the cached code, renamed to this path
    second_zip = payload(tmp_path, "run2", BODY % 1)
    os.utime(os.path.join(cache, entries[0][:2], entries[0]), (1, 1))
    second = run(tmp_path, second_zip, cache)
    assert cached(cache) == entries
    assert os.stat(os.path.join(cache, entries[0][:2], entries[0])).st_mtime == 1      # read, not rewritten
    assert second["answer"] == 1
    for key in ("file", "where", "nested"):
        assert second[key].startswith(second_zip + os.sep), second


def test_changed_source_is_compiled_again(tmp_path):
    cache = tmp_path / "cache"
    run(tmp_path, payload(tmp_path, "run1", BODY % 1), cache)
    changed = run(tmp_path, payload(tmp_path, "run2", BODY % 2), cache)
    assert changed["answer"] == 2 and len(cached(cache)) == 2


def test_a_damaged_cache_entry_is_compiled_again(tmp_path):
    cache = tmp_path / "cache"
    run(tmp_path, payload(tmp_path, "run1", BODY % 1), cache)
    (entry,) = cached(cache)
    with open(os.path.join(cache, entry[:2], entry), "wb") as fh:
        fh.write(b"\x00not marshal")
    again = run(tmp_path, payload(tmp_path, "run2", BODY % 1), cache)
    assert again["answer"] == 1


def test_turned_off_it_writes_nothing(tmp_path):
    cache = tmp_path / "cache"
    assert run(tmp_path, payload(tmp_path, "run1", BODY % 1), cache, NODEFIX_LAB_ZIPCODE="0")["answer"] == 1
    assert cache.is_dir() and not cached(cache)


def test_without_its_directory_it_acts_not(tmp_path):
    # a node without the directory (the benchmarks' containers mount none) runs as a real node does
    cache = tmp_path / "cache"
    assert run(tmp_path, payload(tmp_path, "run1", BODY % 1), cache, make=False)["answer"] == 1
    assert not cache.exists()


def test_nodes_sharing_the_directory_leave_no_temporary_files(tmp_path):
    # several interpreters filling the same entries at once (as the lab's nodes do through one mounted directory)
    cache = tmp_path / "cache"
    os.makedirs(cache)
    zips = [payload(tmp_path, "run%d" % i, BODY % 7) for i in range(6)]
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, NODEFIX_LAB_ZIPCODE_DIR=str(cache), PYTHONDONTWRITEBYTECODE="1")
    procs = [subprocess.Popen([sys.executable, str(script), os.path.abspath(HOOK), z], env=env,
                              stdout=subprocess.PIPE, text=True) for z in zips]
    answers = [json.loads(p.communicate()[0])["answer"] for p in procs]
    assert answers == [7] * 6 and all(p.returncode == 0 for p in procs)
    entries = cached(cache)
    assert len(entries) == 1 and not entries[0].endswith(".tmp"), entries
