# SPDX-License-Identifier: GPL-3.0-or-later
"""nodefix.k8s.npd_files as Ansible runs it (its main(), the real AnsibleModule's atomic_move and backup): the
result the npd role reads, check mode and --diff through the module's options, and a failure that leaves through the
one exit naming the problem. The guarantees themselves: tests/unit/plugins/module_utils/test_npd_install.py."""

import os

from ansible_collections.nodefix.k8s.plugins.modules import npd_files


def args(tmp_path, **over):
    lib = str(tmp_path / "lib" / "nodefix-npd")
    a = {
        "directories": [{"path": lib}],
        "files": [{"path": lib + "/nodefix-npd", "content": "#!/bin/bash\n", "mode": "0755", "drop_cache": True},
                  {"path": str(tmp_path / "units" / "nodefix-npd-textfile.timer"), "content": "[Timer]\n",
                   "mode": "0644"}],
        "cache_dir": str(tmp_path / "cache"),
    }
    a.update(over)
    return a


def test_writes_reports_and_is_idempotent(run_module, tmp_path):
    (tmp_path / "units").mkdir()
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "tick").write_text("t\n")
    result, failed, _t = run_module(npd_files, args(tmp_path))
    assert not failed and result["changed"]
    lib = tmp_path / "lib" / "nodefix-npd"
    assert (lib / "nodefix-npd").read_text() == "#!/bin/bash\n"
    assert oct(os.stat(str(lib / "nodefix-npd")).st_mode & 0o7777) == oct(0o755)
    assert oct(os.stat(str(lib)).st_mode & 0o7777) == oct(0o755)  # the directory's default mode
    assert result["changed_directories"] == [str(lib)]
    assert result["changed_files"] == [str(lib / "nodefix-npd"), str(tmp_path / "units" / "nodefix-npd-textfile.timer")]
    assert result["cache_dropped"] == [str(tmp_path / "cache" / "tick")] and not (tmp_path / "cache" / "tick").exists()
    again, failed, _t = run_module(npd_files, args(tmp_path))
    assert not failed and not again["changed"] and again["changed_files"] == []


def test_check_mode_with_diff_writes_nothing(run_module, tmp_path):
    (tmp_path / "units").mkdir()
    result, failed, _t = run_module(npd_files, args(tmp_path), check_mode=True, diff=True)
    assert not failed and result["changed"]
    assert not (tmp_path / "lib").exists() and os.listdir(str(tmp_path / "units")) == []
    assert isinstance(result["diff"], list) and len(result["diff"]) == 4  # lib, lib/nodefix-npd, and the two files
    assert [d["after"] for d in result["diff"] if "after_header" in d] == ["#!/bin/bash\n", "[Timer]\n"]


def test_bad_input_fails_naming_it_and_writes_nothing(run_module, tmp_path):
    (tmp_path / "units").mkdir()
    result, failed, _t = run_module(npd_files, args(tmp_path, textfile=str(tmp_path / "node-exporter" / "nodefix.prom")))
    assert failed
    assert "--collector.textfile.directory" in result["msg"] and "nothing was written" in result["msg"]
    assert result["path"] == str(tmp_path / "node-exporter")
    assert not (tmp_path / "lib").exists()
