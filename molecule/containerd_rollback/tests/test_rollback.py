# SPDX-License-Identifier: GPL-3.0-or-later
"""After the faulty play: every node runs containerd; faulty ones on the previous version/config."""

testinfra_hosts = ["nodefix-ctrdrb-ok", "nodefix-ctrdrb-validate", "nodefix-ctrdrb-startup"]


def server_version(host):
    out = host.check_output("ctr --address /run/containerd/containerd.sock --timeout 5s version")
    return out.split("Server:")[1].split("Version:")[1].split()[0]


def test_containerd_active_everywhere(host):
    assert host.check_output("systemctl is-active containerd") == "active"


def test_versions(host):
    want = "1.7.24" if host.check_output("hostname") == "nodefix-ctrdrb-ok" else "1.6.20"
    assert server_version(host).startswith(want)


def test_faulty_hosts_back_on_previous_files(host):
    name = host.check_output("hostname")
    if name == "nodefix-ctrdrb-ok":
        assert host.file("/usr/local/bin/containerd").exists
        return
    config = host.file("/etc/containerd/config.toml").content_string
    assert config.startswith("version = 2") or "\nversion = 2\n" in config
    assert 'root = "/var/lib/containerd"' in config
    assert not host.file("/usr/local/bin/containerd").exists
    assert not host.file("/etc/systemd/system/containerd.service.d/10-nodefix-binary.conf").exists
    assert "1.6.20" in host.check_output("containerd --version")


def test_validation_failure_never_restarted_containerd(host):
    if host.check_output("hostname") != "nodefix-ctrdrb-validate":
        return
    before = host.file("/root/containerd-mainpid.before").content_string.strip()
    assert host.check_output("systemctl show -p MainPID --value containerd") == before
