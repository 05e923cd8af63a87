# SPDX-License-Identifier: GPL-3.0-or-later
"""kubelet_config on messy nodes: flags as systemd and the shell read them, confinement, bounds, symlinks.

The node trees are copies of the kubelet test double's kubeadm layout (lab/kubelet-double/layouts:
kubeadm's own unit, drop-in and flag files); the kubelet binary is a stub that is never executed
(``kubelet_version`` is given), so this is a double of kubelet only for its version.
"""

import os
import shutil

import pytest

from ansible_collections.nodefix.k8s.plugins.modules import kubelet_config
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import plan as kubelet_plan
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import node as kubelet_node
from ansible_collections.nodefix.k8s.tests.badinput.conftest import read, refused, snapshot

HERE = os.path.dirname(os.path.abspath(__file__))
LAYOUTS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "lab", "kubelet-double", "layouts")
DROPIN = "etc/systemd/system/kubelet.service.d/10-kubeadm.conf"
FLAGS_ENV = "var/lib/kubelet/kubeadm-flags.env"
DEFAULTS = "etc/default/kubelet"
CONFIG = "var/lib/kubelet/config.yaml"
QPS = {"kubeAPIQPS": 60}


@pytest.fixture
def node(tmp_path):
    base = tmp_path / "case"
    root = base / "root"
    shutil.copytree(os.path.join(LAYOUTS, "kubeadm"), str(root), symlinks=True)
    return str(base), str(root)


def put(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def run(run_module, root, settings=None, **kw):
    args = {"root": root, "settings": QPS if settings is None else settings, "kubelet_version": "1.29.3"}
    args.update(kw)
    return run_module(kubelet_config, args)


def effective_qps(root):
    node = kubelet_node.discover(None, root, use_systemctl=False)
    node.version, node.version_text = (1, 29, 3), "1.29.3"
    config, _sources = kubelet_plan.reread(node, root)
    return config["kubeAPIQPS"]


# ---- flags parsed as systemd and the shell parse them --------------------------------------------------

def test_flag_value_on_the_next_line_is_removed_with_its_flag(run_module, node):
    _base, root = node
    put(root, DEFAULTS, "")
    put(root, DROPIN, read(os.path.join(root, DROPIN)).replace(
        "ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS",
        "ExecStart=/usr/bin/kubelet --kube-api-qps \\\n    7 \\\n    $KUBELET_KUBECONFIG_ARGS"))
    result, failed, _t = run(run_module, root)
    assert not failed, result
    text = read(os.path.join(root, DROPIN))
    assert "--kube-api-qps" not in text and "\n    7" not in text
    assert result["effective"]["kubeAPIQPS"] == {"value": 60, "source": "config", "path": "/" + CONFIG}
    assert effective_qps(root) == 60  # what kubelet would read from the files as written


def test_continued_quoted_env_value(run_module, node):
    _base, root = node
    put(root, DEFAULTS, 'KUBELET_EXTRA_ARGS="--v=2 \\\n  --kube-api-qps 7 \\\n  --max-pods=90"\n')
    result, failed, _t = run(run_module, root)
    assert not failed, result
    assert "--kube-api-qps" not in read(os.path.join(root, DEFAULTS))
    assert "--v=2" in read(os.path.join(root, DEFAULTS)) and "--max-pods=90" in read(os.path.join(root, DEFAULTS))
    assert effective_qps(root) == 60


@pytest.mark.parametrize("rel,line", [
    (DEFAULTS, 'KUBELET_EXTRA_ARGS=--node-labels=note=--kube-api-qps=7 --kube-api-qps=5'),
    (DEFAULTS, 'KUBELET_EXTRA_ARGS="--node-labels note=--kube-api-qps=7 --kube-api-qps 5"'),
    (DEFAULTS, "KUBELET_EXTRA_ARGS='--node-labels=note=--kube-api-qps=7' --kube-api-qps=5"),
    (FLAGS_ENV, 'KUBELET_KUBEADM_ARGS="--kube-api-qps=5 --node-labels=note=--kube-api-qps=7"'),
])
def test_another_flags_value_is_never_touched(run_module, node, rel, line):
    _base, root = node
    if rel != DEFAULTS:
        put(root, DEFAULTS, "")
    put(root, rel, line + "\n")
    result, failed, _t = run(run_module, root)
    assert not failed, result
    after = read(os.path.join(root, rel))
    assert "note=--kube-api-qps=7" in after and "qps=5" not in after and "qps 5" not in after
    node_ = kubelet_node.discover(None, root, use_systemctl=False)
    assert [f["value"] for f in node_.flags if f["name"] == "node-labels"] == ["note=--kube-api-qps=7"]
    assert [f for f in node_.flags if f["name"] == "kube-api-qps"] == []
    assert effective_qps(root) == 60


def test_quoted_execstart_word_is_one_word(run_module, node):
    _base, root = node
    put(root, DEFAULTS, "")
    put(root, DROPIN, read(os.path.join(root, DROPIN)).replace(
        "ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS",
        'ExecStart=/usr/bin/kubelet "--node-labels=a=b --kube-api-qps=7" --kube-api-qps=5 $KUBELET_KUBECONFIG_ARGS'))
    result, failed, _t = run(run_module, root)
    assert not failed, result
    assert '"--node-labels=a=b --kube-api-qps=7" $KUBELET' in read(os.path.join(root, DROPIN))
    assert effective_qps(root) == 60


def test_rewrite_mode_keeps_continuations(run_module, node):
    _base, root = node
    put(root, DEFAULTS, "")
    put(root, DROPIN, read(os.path.join(root, DROPIN)).replace(
        "ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS",
        "ExecStart=/usr/bin/kubelet \\\n    --kube-api-qps \\\n    7 \\\n    $KUBELET_KUBECONFIG_ARGS"))
    result, failed, _t = run(run_module, root, stale_flags="rewrite")
    assert not failed, result
    assert "--kube-api-qps=60 \\\n    $KUBELET_KUBECONFIG_ARGS" in read(os.path.join(root, DROPIN))
    assert effective_qps(root) == 60


def test_flag_split_over_two_variables_is_refused(run_module, node):
    """--kube-api-qps in one variable, its value in the next: removing the flag would leave a stray word."""
    base, root = node
    put(root, DEFAULTS, 'KUBELET_EXTRA_ARGS=--kube-api-qps\n')
    put(root, FLAGS_ENV, 'KUBELET_KUBEADM_ARGS="7 --container-runtime-endpoint=unix:///run/containerd/containerd.sock"\n')
    dropin = read(os.path.join(root, DROPIN)).replace("$KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS",
                                                      "$KUBELET_EXTRA_ARGS $KUBELET_KUBEADM_ARGS")
    put(root, DROPIN, dropin)
    refused(run_module, kubelet_config, {"root": root, "settings": QPS, "kubelet_version": "1.29.3"}, base,
            ["stray word", "7"])


# systemd skips comment lines inside a continued line and goes on after them (systemd.syntax(7);
# tests/unit/plugins/module_utils/test_unit_syntax_systemd.py holds the reader to systemd-analyze)
COMMENTED = ("ExecStart=/usr/bin/kubelet \\\n"
             "#    --kube-api-qps=5 (removed in the last change) \\\n"
             "    --kube-api-qps 7 \\\n"
             "  ; --event-qps=1\n"
             "    $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS")
ORIGINAL_EXEC = "ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS"


def test_a_comment_inside_a_continued_execstart_is_not_read_and_not_edited(run_module, node):
    _base, root = node
    put(root, DEFAULTS, "")
    put(root, DROPIN, read(os.path.join(root, DROPIN)).replace(ORIGINAL_EXEC, COMMENTED))
    before = kubelet_node.discover(None, root, use_systemctl=False)
    assert [(f["name"], f["value"]) for f in before.flags if f["name"] in ("kube-api-qps", "event-qps")] == \
        [("kube-api-qps", "7")]
    assert "--config" in [w for w, _o in before.argv][-1] or before.config_path  # the words after the comments
    result, failed, _t = run(run_module, root)
    assert not failed, result
    text = read(os.path.join(root, DROPIN))
    # the live flag and its value are gone; both comment lines are byte for byte where they were
    assert "--kube-api-qps 7" not in text and "\n    7" not in text
    assert "\n#    --kube-api-qps=5 (removed in the last change) \\\n" in text
    assert "\n  ; --event-qps=1\n" in text
    assert [e["old"] for e in result["flag_edits"]] == ["--kube-api-qps 7"], result["flag_edits"]
    after = kubelet_node.discover(None, root, use_systemctl=False)
    assert [f for f in after.flags if f["name"] in ("kube-api-qps", "event-qps")] == []
    assert after.config_path == "/var/lib/kubelet/config.yaml"
    assert effective_qps(root) == 60


def test_a_flag_only_in_a_comment_is_left_alone(run_module, node):
    _base, root = node
    put(root, DEFAULTS, "")
    put(root, DROPIN, read(os.path.join(root, DROPIN)).replace(ORIGINAL_EXEC, COMMENTED.replace(
        "    --kube-api-qps 7 \\\n", "")))
    dropin = read(os.path.join(root, DROPIN))
    result, failed, _t = run(run_module, root)
    assert not failed, result
    assert read(os.path.join(root, DROPIN)) == dropin
    assert not [e for e in result.get("flag_edits", []) if "qps" in e["flag"]], result.get("flag_edits")


def test_a_quoted_environment_value_continued_in_the_unit(run_module, node):
    """Environment="NAME=... \\ newline ..." in a drop-in: the value's words map back to their raw text."""
    _base, root = node
    put(root, DEFAULTS, "")
    path = put(root, "etc/systemd/system/kubelet.service.d/90-extra.conf",
               '[Service]\nEnvironment="KUBELET_EXTRA_ARGS=--v=2 \\\n'
               '# an old limit: --event-qps=1 \\\n'
               '  --kube-api-qps=7 --max-pods=90"\n')
    dropin = read(os.path.join(root, DROPIN))
    put(root, DROPIN, dropin.replace("EnvironmentFile=-/etc/default/kubelet\n", ""))
    node_ = kubelet_node.discover(None, root, use_systemctl=False)
    assert [(f["name"], f["value"]) for f in node_.flags if f["name"] in ("v", "kube-api-qps", "event-qps", "max-pods")] \
        == [("v", "2"), ("kube-api-qps", "7"), ("max-pods", "90")]
    result, failed, _t = run(run_module, root)
    assert not failed, result
    assert read(path) == ('[Service]\nEnvironment="KUBELET_EXTRA_ARGS=--v=2 \\\n'
                          '# an old limit: --event-qps=1 \\\n'
                          '  --max-pods=90"\n')
    assert effective_qps(root) == 60


def test_flag_in_a_runtime_unit_dropin_is_removed_too(run_module, node):
    """A stale flag from a unit drop-in under /run/systemd/system is found and removed there."""
    base, root = node
    put(root, DEFAULTS, "")
    put(root, "run/systemd/system/kubelet.service.d/90-x.conf",
        '[Service]\nEnvironment="KUBELET_EXTRA_ARGS=--kube-api-qps=7"\n')
    result, failed, _t = run(run_module, root)
    assert not failed, result
    assert "--kube-api-qps" not in read(os.path.join(root, "run/systemd/system/kubelet.service.d/90-x.conf"))
    assert effective_qps(root) == 60


def test_percent_in_unit_file_is_a_systemd_specifier_escape(run_module, node):
    _base, root = node
    put(root, DEFAULTS, "")
    put(root, DROPIN, read(os.path.join(root, DROPIN)).replace(
        "ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS",
        "ExecStart=/usr/bin/kubelet --eviction-hard=memory.available<5%% $KUBELET_KUBECONFIG_ARGS"))
    result, failed, _t = run(run_module, root, settings={"evictionHard": {"memory.available": "10%"}},
                             stale_flags="rewrite")
    assert not failed, result
    assert "--eviction-hard=memory.available<10%% $KUBELET" in read(os.path.join(root, DROPIN))
    node_ = kubelet_node.discover(None, root, use_systemctl=False)
    assert [f["value"] for f in node_.flags if f["name"] == "eviction-hard"] == ["memory.available<10%"]


# ---- confinement: paths from the node's files stay under root ------------------------------------------
# Chroot semantics (_core.paths.in_root): on the node, /../x is /x and a symlink's
# absolute target starts at the node's /, so under a root they name files inside
# it, never the same path on the machine running the module.

@pytest.mark.parametrize("rel,old,new,message", [
    (DROPIN, "--config=/var/lib/kubelet/config.yaml", "--config=/../outside/config.yaml",
     "/../outside/config.yaml does not exist"),
    (DROPIN, "EnvironmentFile=-/etc/default/kubelet", "EnvironmentFile=/../../outside/env",
     "/../../outside/env of kubelet.service does not exist"),
])
def test_dotdot_paths_name_files_inside_root(run_module, node, rel, old, new, message):
    # the files exist next to root, not in it: the node has none there, so it is refused
    base, root = node
    put(base, "outside/config.yaml", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
    put(base, "outside/env", "X=1\n")
    put(root, rel, read(os.path.join(root, rel)).replace(old, new))
    refused(run_module, kubelet_config, {"root": root, "settings": QPS, "kubelet_version": "1.29.3"}, base,
            [message])


def test_dotdot_config_path_reads_and_writes_the_nodes_file(run_module, node):
    base, root = node
    put(base, "outside/config.yaml", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
    shutil.move(os.path.join(root, CONFIG), os.path.join(root, "outside.yaml"))
    put(root, DROPIN, read(os.path.join(root, DROPIN)).replace("--config=/var/lib/kubelet/config.yaml",
                                                               "--config=/../../outside.yaml"))
    result, failed, _t = run(run_module, root)
    assert not failed and result["changed"], result
    assert "kubeAPIQPS: 60" in read(os.path.join(root, "outside.yaml"))
    assert "kubeAPIQPS" not in read(os.path.join(base, "outside/config.yaml"))


@pytest.mark.parametrize("target", [
    "{base}/elsewhere.yaml",               # a path of the machine running the module: not the node's
    "../../../../../../../elsewhere.yaml",  # climbs no higher than the node's /
    "/nonexistent/config.yaml",
])
def test_symlink_to_nothing_on_the_node_is_dangling(run_module, node, target):
    # absolute targets are the node's paths (chroot semantics under root): none of these exists there
    base, root = node
    put(base, "elsewhere.yaml", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
    os.remove(os.path.join(root, CONFIG))
    os.symlink(target.format(base=base), os.path.join(root, CONFIG))
    refused(run_module, kubelet_config, {"root": root, "settings": QPS, "kubelet_version": "1.29.3"}, base,
            ["dangling symlink"])


def test_absolute_symlink_inside_the_node_is_read_and_written(run_module, node):
    # the node-problem-detector DaemonSet's /host layout: config.yaml -> /etc/kubernetes/real/kc.yaml
    base, root = node
    real = os.path.join(root, "etc/kubernetes/real/kc.yaml")
    os.makedirs(os.path.dirname(real))
    shutil.move(os.path.join(root, CONFIG), real)
    os.symlink("/etc/kubernetes/real/kc.yaml", os.path.join(root, CONFIG))
    result, failed, _t = run(run_module, root)
    assert not failed and result["changed"], result
    assert os.readlink(os.path.join(root, CONFIG)) == "/etc/kubernetes/real/kc.yaml"
    assert "kubeAPIQPS: 60" in read(real)
    assert effective_qps(root) == 60


# ---- symlinks, encodings, sizes -------------------------------------------------------------------------

@pytest.mark.parametrize("rel", [CONFIG, DEFAULTS, DROPIN])
def test_symlinked_files_are_edited_through_the_link(run_module, node, rel):
    _base, root = node
    real = os.path.join(root, "srv/managed", os.path.basename(rel))
    os.makedirs(os.path.dirname(real))
    shutil.move(os.path.join(root, rel), real)
    target = "/srv/managed/" + os.path.basename(rel)   # the node's path (chroot semantics under root)
    os.symlink(target, os.path.join(root, rel))
    if rel == DROPIN:  # put the stale flag where the link points
        put(root, "srv/managed/" + os.path.basename(rel), read(real).replace(
            "ExecStart=/usr/bin/kubelet ", "ExecStart=/usr/bin/kubelet --kube-api-qps=3 "))
    result, failed, _t = run(run_module, root)
    assert not failed and result["changed"], result
    assert os.path.islink(os.path.join(root, rel)) and os.readlink(os.path.join(root, rel)) == target
    assert effective_qps(root) == 60


@pytest.mark.parametrize("rel", [CONFIG, DEFAULTS, FLAGS_ENV, DROPIN])
def test_non_utf8_files_are_refused(run_module, node, rel):
    base, root = node
    with open(os.path.join(root, rel), "ab") as fh:
        fh.write(b"\n# \xff\xfe\n")
    refused(run_module, kubelet_config, {"root": root, "settings": QPS, "kubelet_version": "1.29.3"}, base,
            ["not UTF-8", "/" + rel])


def test_ten_megabyte_config_is_refused(run_module, node):
    base, root = node
    with open(os.path.join(root, CONFIG), "a") as fh:
        fh.write("# padding\n" * (1024 * 1024))
    refused(run_module, kubelet_config, {"root": root, "settings": QPS, "kubelet_version": "1.29.3"}, base,
            ["larger than 1048576 bytes"])


def test_empty_config_gets_api_version_and_kind(run_module, node):
    _base, root = node
    put(root, CONFIG, "")
    put(root, DEFAULTS, "")
    result, failed, _t = run(run_module, root)
    assert not failed, result
    text = read(os.path.join(root, CONFIG))
    assert "apiVersion: kubelet.config.k8s.io/v1beta1" in text and "kind: KubeletConfiguration" in text
    assert "kubeAPIQPS: 60" in text


# ---- values bounded as kubelet bounds them --------------------------------------------------------------

BAD_SETTINGS = [
    ({"kubeAPIQPS": 2 ** 31}, ["kubeAPIQPS", "int32"]),
    ({"podPidsLimit": 2 ** 63}, ["podPidsLimit", "int64"]),
    ({"kubeAPIQPS": -1}, ["kubeAPIQPS", "negative"]),
    ({"kubeAPIQPS": "fast"}, ["kubeAPIQPS", "expected an integer"]),
    ({"kubeAPIQPS": [50]}, ["kubeAPIQPS", "expected an integer"]),
    ({"kubeAPIQPS": 1.5}, ["kubeAPIQPS", "expected an integer"]),
    ({"kubeAPIQPS": True}, ["kubeAPIQPS", "boolean"]),
    ({"kubeAPIQPS": None}, ["kubeAPIQPS", "a value is required"]),
    ({"maxPods": 2 ** 40}, ["maxPods", "int32"]),
    ({"podPidsLimit": -2}, ["podPidsLimit", "-1 or greater"]),
    ({"maxParallelImagePulls": 0}, ["maxParallelImagePulls", "positive"]),
    ({"serializeImagePulls": "maybe"}, ["serializeImagePulls", "expected a boolean"]),
    ({"evictionHard": {"memory.available": None}}, ["evictionHard.memory.available"]),
    ({"evictionHard": {"memory.available": "150%"}}, ["memory.available", "more than 100%"]),
    ({"evictionHard": {"memory.availble": "5%"}}, ["unknown key", "did you mean memory.available"]),
    ({"evictionHard": ["memory.available<5%"]}, ["evictionHard", "expected a mapping"]),
    ({"systemReserved": {"memory": "-1Gi"}}, ["systemReserved.memory"]),
    ({"systemReserved": {"memory": "1 Gi"}}, ["systemReserved.memory", "not a Kubernetes quantity"]),
    ({"kubeReserved": {"gpu": "1"}}, ["kubeReserved", "unknown key"]),
    ({"kubeApiQps": 50}, ["kubeApiQps", "did you mean kubeAPIQPS"]),
    ({"cgroupDriver": "systemd"}, ["cgroupDriver", "does not manage"]),
]


@pytest.mark.parametrize("settings,words", BAD_SETTINGS, ids=[str(i) for i in range(len(BAD_SETTINGS))])
def test_bad_settings_are_refused(run_module, node, settings, words):
    base, root = node
    refused(run_module, kubelet_config, {"root": root, "settings": settings, "kubelet_version": "1.29.3"}, base, words)


@pytest.mark.parametrize("extra,words", [
    ({"dropin_name": "../escape.conf"}, ["dropin_name"]),
    ({"dropin_name": ".hidden.conf"}, ["dropin_name"]),
    ({"dropin_name": "99-x.yaml"}, ["dropin_name"]),
    ({"keep_backups": -1}, ["keep_backups"]),
    ({"kubelet_version": "latest"}, ["kubelet_version", "not a version"]),
])
def test_bad_options_are_refused(run_module, node, extra, words):
    base, root = node
    args = {"root": root, "settings": QPS, "kubelet_version": "1.29.3"}
    args.update(extra)
    refused(run_module, kubelet_config, args, base, words)


# ---- check mode, idempotence, backups -------------------------------------------------------------------

def test_check_mode_then_real_run_then_idempotent(run_module, node):
    base, root = node
    before = snapshot(base)
    result, failed, _t = run_module(kubelet_config, {"root": root, "settings": QPS, "kubelet_version": "1.29.3"},
                                    check_mode=True, diff=True)
    assert not failed and result["changed"] and result["diff"]
    assert snapshot(base) == before
    first, failed, _t = run(run_module, root)
    assert not failed and first["changed"]
    second, failed, _t = run(run_module, root)
    assert not failed and second["changed"] is False


def test_backups_are_pruned_per_file(run_module, node):
    _base, root = node
    cfg = os.path.join(root, CONFIG)
    for n in range(4):
        old = "%s.%d.2026-01-0%d@00:00:00~" % (cfg, 200 + n, n + 1)
        with open(old, "w") as fh:
            fh.write("old\n")
        os.utime(old, (1000 + n, 1000 + n))
    result, failed, _t = run(run_module, root, keep_backups=1)
    assert not failed and result["changed"]
    left = [n for n in os.listdir(os.path.dirname(cfg)) if n.startswith("config.yaml.")]
    assert len(left) == 1 and left[0] != "config.yaml.203.2026-01-04@00:00:00~"


# ---- quantities: read as Kubernetes reads them, bounded by the quantity type and by the node ------------

@pytest.mark.parametrize("settings,words", [
    ({"systemReserved": {"memory": "1e999"}}, ["systemReserved.memory", "larger than a Kubernetes quantity can be"]),
    ({"kubeReserved": {"memory": "9Ei"}}, ["kubeReserved.memory", "larger than a Kubernetes quantity can be"]),
    ({"systemReserved": {"cpu": "1.2.3"}}, ["systemReserved.cpu", "is not a Kubernetes quantity"]),
    ({"systemReserved": {"memory": "1ki"}}, ["systemReserved.memory", "is not a Kubernetes quantity"]),
    ({"evictionHard": {"memory.available": "e3"}}, ["evictionHard.memory.available", "is not a Kubernetes quantity"]),
    ({"systemReserved": {"memory": "-1Gi"}}, ["systemReserved.memory", "must not be negative"]),
])
def test_absurd_quantities_are_refused(run_module, node, settings, words):
    base, root = node
    refused(run_module, kubelet_config, {"root": root, "settings": settings, "kubelet_version": "1.29.3"}, base, words)


def node_with_capacity(root, mem_kib=4194304, cpus="0-1"):
    put(root, "proc/meminfo", "MemTotal:       %d kB\nMemFree:         100000 kB\n" % mem_kib)
    put(root, "sys/devices/system/cpu/online", cpus + "\n")
    put(root, "proc/sys/kernel/pid_max", "4194304\n")


@pytest.mark.parametrize("settings,words", [
    # a 4 GiB node: 8Gi reserved leaves the kubelet a negative allocatable
    ({"systemReserved": {"memory": "8Gi"}}, ["systemReserved.memory=8Gi", "the node has 4294967296",
                                             "MemTotal in /proc/meminfo", "would be negative"]),
    # together: system + kube + the hard eviction threshold
    ({"systemReserved": {"memory": "2Gi"}, "kubeReserved": {"memory": "1536Mi"},
      "evictionHard": {"memory.available": "512Mi"}}, ["evictionHard.memory.available=512Mi", "would be zero"]),
    # two CPUs, three reserved
    ({"systemReserved": {"cpu": "1500m"}, "kubeReserved": {"cpu": "1.5"}},
     ["kubeReserved.cpu=1.5", "of cpu", "would be negative"]),
])
def test_reservations_above_the_nodes_capacity_are_refused(run_module, node, settings, words):
    base, root = node
    node_with_capacity(root)
    refused(run_module, kubelet_config, {"root": root, "settings": settings, "kubelet_version": "1.29.3"}, base, words)


def test_reservations_the_node_holds_are_written(run_module, node):
    _base, root = node
    node_with_capacity(root)
    result, failed, _t = run(run_module, root, settings={"systemReserved": {"memory": "1Gi", "cpu": "500m"},
                                                         "kubeReserved": {"memory": "512Mi"}})
    assert not failed and result["changed"], result
    assert result["effective"]["systemReserved"]["value"] == {"memory": "1Gi", "cpu": "500m"}
