# SPDX-License-Identifier: GPL-3.0-or-later
"""scripts/k8s_clients.py (a set-up step) when the package index does not answer: a machine that already
installed both ends of THIS range keeps them (set-up goes on offline); otherwise set-up fails, naming why."""

import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def script(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("k8s_clients", os.path.join(ROOT, "scripts", "k8s_clients.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "DEST", str(tmp_path))
    monkeypatch.setattr(mod, "released", lambda: None)   # the index did not answer
    installs = []
    monkeypatch.setattr(mod, "install", installs.append)
    mod.installs = installs
    return mod


def record(dest, req, floor="24.2.0", newest="37.0.3", dirs=("24.2.0", "37.0.3")):
    for version in dirs:
        os.makedirs(os.path.join(str(dest), version, "kubernetes-%s.dist-info" % version))
    with open(os.path.join(str(dest), "tested.json"), "w", encoding="utf-8") as fh:
        json.dump({"range": str(req.specifier), "floor": floor, "newest": newest, "queried": "2026-12-06"}, fh)


def test_offline_keeps_an_earlier_set_up_of_the_same_range(script, tmp_path, capsys):
    record(tmp_path, script.declared())
    script.main()
    assert "the index did not answer; keeping 24.2.0 and 37.0.3" in capsys.readouterr().out
    assert script.installs == []


@pytest.mark.parametrize("case", ["nothing installed", "other range", "a release missing"])
def test_offline_without_both_ends_of_this_range_fails_naming_why(script, tmp_path, case):
    req = script.declared()
    if case == "other range":
        record(tmp_path, type(req)("kubernetes>=1.0"))
    elif case == "a release missing":
        record(tmp_path, req, dirs=("24.2.0",))
    with pytest.raises(SystemExit) as failed:
        script.main()
    assert "cannot list kubernetes releases" in str(failed.value)
