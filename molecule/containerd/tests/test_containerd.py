# SPDX-License-Identifier: GPL-3.0-or-later
"""testinfra checks for the containerd scenario: real upgrades, answered over the socket."""

import json

import pytest

testinfra_hosts = ["nodefix-ctrd-archive", "nodefix-ctrd-pkg", "nodefix-ctrd-v2"]

EXPECTED = {"nodefix-ctrd-archive": "1.7.24", "nodefix-ctrd-pkg": "1.7.24", "nodefix-ctrd-v2": "2.1.9"}


def name(host):
    return host.check_output("hostname")


def server_version(host):
    out = host.check_output("ctr --address /run/containerd/containerd.sock --timeout 5s version")
    return out.split("Server:")[1].split("Version:")[1].split()[0]


def test_containerd_active_with_new_server_version(host):
    assert host.check_output("systemctl is-active containerd") == "active"
    assert server_version(host).lstrip("v").startswith(EXPECTED[name(host)])


def test_binary_on_path_is_new(host):
    out = host.check_output("containerd --version")
    assert EXPECTED[name(host)] in out


def test_archive_layout_and_previous_binaries_kept(host):
    if name(host) == "nodefix-ctrd-pkg":
        pytest.skip("package node")
    assert host.file("/usr/local/bin/containerd").mode == 0o755
    dropin = host.file("/etc/systemd/system/containerd.service.d/10-nodefix-binary.conf")
    assert "ExecStart=/usr/local/bin/containerd" in dropin.content_string
    # the previous package binary is untouched
    assert "1.6.20" in host.check_output("/usr/bin/containerd --version")
    # prepare planted an unverified releases/<ver>/bin/containerd: the verified archive's binary was installed
    assert "stale-unverified" not in host.check_output("/usr/local/bin/containerd --version")
    assert host.file("/usr/local/bin/containerd").size > 1000000
    # the download and its extraction lived in a temporary directory that is gone
    assert host.check_output("find /tmp -maxdepth 1 -name '*.nodefix-containerd'") == ""


def test_package_pinned(host):
    if name(host) != "nodefix-ctrd-pkg":
        pytest.skip("archive node")
    assert host.check_output("dpkg-query -W -f '${Version}' containerd") == "1.7.24~ds1-6+deb13u1"
    assert not host.file("/usr/sbin/policy-rc.d").exists
    assert not host.file("/etc/systemd/system/containerd.service.d/10-nodefix-binary.conf").exists


def test_last_good_snapshot_is_the_new_state(host):
    manifest = json.loads(host.file("/var/lib/nodefix/containerd/last-good/manifest.json").content_string)
    assert manifest["version"].startswith(EXPECTED[name(host)])


def test_systemd_cgroup_kept(host):
    text = host.file("/etc/containerd/config.toml").content_string
    assert "SystemdCgroup = true" in text


def test_v2_config_migrated_with_runsc(host):
    if name(host) != "nodefix-ctrd-v2":
        pytest.skip("1.x node")
    text = host.file("/etc/containerd/config.toml").content_string
    assert text.startswith("version = 3")
    assert "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runsc]" in text
    assert "ConfigPath = '/etc/containerd/runsc.toml'" in text
    dump = host.check_output("containerd config dump")
    assert "runtimes.runsc" in dump
