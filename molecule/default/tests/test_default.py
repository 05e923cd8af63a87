# SPDX-License-Identifier: GPL-3.0-or-later
"""testinfra checks for the default scenario (nodefix.k8s.pid_limits)."""


def test_pid_max_persisted(host):
    conf = host.file("/etc/sysctl.d/60-nodefix-pid-max.conf")
    assert conf.exists
    assert conf.mode == 0o644
    assert conf.content_string.strip() == "kernel.pid_max=4194304"


def test_systemd_is_pid1(host):
    assert host.process.get(pid=1).comm == "systemd"
