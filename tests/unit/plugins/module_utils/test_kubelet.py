# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for plugins/module_utils/_kubelet/ (discovery, merge order, planning)."""

import os
import shutil

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import detect as kubelet_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import plan as kubelet_plan
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import node as kubelet_node
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import schema as kubelet_schema
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import unit as kubelet_unit
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import config_yaml as kubelet_config_yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
LAYOUTS = os.path.join(REPO, "lab", "kubelet-double", "layouts")

KUBEADM_UNIT = """[Unit]
Description=kubelet

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
"""

DROPIN_UNIT = """[Service]
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""


def layout_tree(tmp_path, name):
    root = str(tmp_path / name)
    shutil.copytree(os.path.join(LAYOUTS, name), root, symlinks=True)
    return root


def inspect(root, version="1.29.3", roundtrip=True):
    return kubelet_detect.inspect(None, root, kubelet_version=version, roundtrip=roundtrip)


# ---------------------------------------------------------------- parsing

def test_env_file_quotes_comments_and_continuations():
    text = (
        "# comment\n"
        "; also a comment\n"
        "A=plain value  \n"
        "B=\"double \\\"quoted\\\" $x\"\n"
        "C='single # not a comment'\n"
        "D=\"--one \\\n--two \\\n --three\"\n"
        "E=cont\\\ninued\n"
        "not an assignment\n"
        "F=\n"
    )
    env = dict(kubelet_unit.parse_env_file(text))
    assert env["A"] == "plain value"
    assert env["B"] == 'double "quoted" $x'
    assert env["C"] == "single # not a comment"
    assert env["D"].split() == ["--one", "--two", "--three"]
    assert env["E"] == "continued"
    assert env["F"] == ""
    assert "not" not in env


def test_systemctl_cat_is_split_per_file():
    out = ("# /lib/systemd/system/kubelet.service\n" + KUBEADM_UNIT + "\n"
           "# /etc/systemd/system/kubelet.service.d/10-kubeadm.conf\n" + DROPIN_UNIT)
    files = kubelet_unit.split_systemctl_cat(out)
    assert [p for p, _t in files] == [
        "/lib/systemd/system/kubelet.service",
        "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
    ]
    assert "ExecStart=/usr/bin/kubelet $KUBELET_CONFIG_ARGS" in files[1][1]


@pytest.mark.parametrize("text,version", [
    ("Kubernetes v1.29.3\n", (1, 29, 3)),
    ("Kubernetes v1.26.0-rc.1\n", (1, 26, 0)),
    ("Kubernetes v1.35.1+k3s1", (1, 35, 1)),
    ("garbage", None),
])
def test_parse_kubelet_version(text, version):
    assert kubelet_schema.parse_kubelet_version(text)[0] == version


def test_version_defaults_changed_in_1_27():
    old, new = kubelet_schema.version_defaults((1, 26, 9)), kubelet_schema.version_defaults((1, 27, 0))
    assert (old["kubeAPIQPS"], old["kubeAPIBurst"], old["eventRecordQPS"], old["eventBurst"]) == (5, 10, 5, 10)
    assert (new["kubeAPIQPS"], new["kubeAPIBurst"], new["eventRecordQPS"], new["eventBurst"]) == (50, 100, 50, 100)
    # unknown version: the higher floors, so nothing is ever written below a current kubelet's defaults
    assert kubelet_schema.version_defaults(None)["kubeAPIQPS"] == 50


# ---------------------------------------------------------------- discovery

def test_discover_kubeadm_layout_from_unit(tmp_path):
    root = layout_tree(tmp_path, "kubeadm")
    node, layers, facts = inspect(root)
    assert facts["layout"] == "kubeadm"
    assert facts["config_path"] == "/var/lib/kubelet/config.yaml"
    assert facts["unit_files"] == ["/lib/systemd/system/kubelet.service",
                                   "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"]
    assert facts["env_files"] == ["/var/lib/kubelet/kubeadm-flags.env", "/etc/default/kubelet"]
    assert facts["argv"][0] == "/usr/bin/kubelet"
    qps = facts["effective"]["kubeAPIQPS"]
    assert qps == {"value": 5, "source": "flag", "flag": "--kube-api-qps", "path": "/etc/default/kubelet",
                   "variable": "KUBELET_EXTRA_ARGS"}
    ids = [f["id"] for f in facts["findings"]]
    assert "kubelet.api_qps_low" in ids and "kubelet.event_qps_low" in ids
    assert "kubelet.serialized_image_pulls" in ids
    stale = [f["subject"] for f in facts["findings"] if f["id"] == "kubelet.stale_flag_override"]
    assert sorted(stale) == ["--event-qps", "--kube-api-qps"]


def test_discover_kubespray_layout(tmp_path):
    root = layout_tree(tmp_path, "kubespray")
    _node, _layers, facts = inspect(root, "1.26.15")
    assert facts["layout"] == "kubespray"
    assert facts["config_path"] == "/etc/kubernetes/kubelet-config.yaml"
    assert facts["binary"] == "/usr/local/bin/kubelet"
    eff = facts["effective"]
    assert eff["kubeAPIQPS"]["value"] == 5 and eff["kubeAPIQPS"]["source"] == "flag"
    assert eff["eventRecordQPS"]["value"] == 5 and eff["eventRecordQPS"]["source"] == "config"
    assert eff["serializeImagePulls"] == {"value": True, "source": "flag", "flag": "--serialize-image-pulls",
                                          "path": "/etc/kubernetes/kubelet.env", "variable": "KUBELET_ARGS"}
    assert eff["kubeReserved"]["value"] == {"cpu": "200m", "memory": "512Mi"}


def test_optional_environment_file_may_be_missing_but_required_one_may_not(make_tree):
    root = make_tree({
        "/lib/systemd/system/kubelet.service":
            "[Service]\nEnvironmentFile=-/etc/default/kubelet\nExecStart=/usr/bin/kubelet $KUBELET_EXTRA_ARGS\n",
    })
    node = kubelet_node.discover(None, root)
    assert node.layout == "flags-only" and node.flags == []
    with open(os.path.join(root, "lib/systemd/system/kubelet.service"), "w") as fh:
        fh.write("[Service]\nEnvironmentFile=/etc/default/kubelet\nExecStart=/usr/bin/kubelet\n")
    with pytest.raises(kubelet_schema.KubeletError, match="does not exist"):
        kubelet_node.discover(None, root)


def test_etc_unit_masks_lib_unit_and_braced_variables_are_not_split(make_tree):
    root = make_tree({
        "/lib/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet --kube-api-qps=1\n",
        "/etc/systemd/system/kubelet.service":
            "[Service]\nEnvironment=\"ARGS=--kube-api-qps=7 --event-qps=8\" ONE=--max-pods=9\n"
            "ExecStart=/opt/bin/kubelet $ARGS ${ONE}\n",
    })
    node = kubelet_node.discover(None, root)
    assert [p for p, _t in node.unit_files] == ["/etc/systemd/system/kubelet.service"]
    assert [w for w, _o in node.argv] == ["/opt/bin/kubelet", "--kube-api-qps=7", "--event-qps=8", "--max-pods=9"]


def test_kops_is_detected(make_tree):
    root = make_tree({
        "/lib/systemd/system/kubelet.service": "[Unit]\nDocumentation=https://github.com/kubernetes/kops\n"
                                               "[Service]\nEnvironmentFile=/etc/sysconfig/kubelet\n"
                                               "ExecStart=/usr/local/bin/kubelet \"$DAEMON_ARGS\"\n",
        "/etc/sysconfig/kubelet": "DAEMON_ARGS=\"--config=/var/lib/kubelet/kubelet.conf\"\n",
        "/var/lib/kubelet/kubelet.conf": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
        "/etc/systemd/system/kops-configuration.service": "[Service]\n",
    })
    _n, _l, facts = inspect(root)
    assert facts["layout"] == "kops"
    assert "/etc/systemd/system/kops-configuration.service" in facts["kops"]
    assert "kubelet.kops_managed" in [f["id"] for f in facts["findings"]]


# ---------------------------------------------------------------- merge order

MERGE_TREE = {
    "/lib/systemd/system/kubelet.service":
        "[Service]\nEnvironmentFile=-/etc/default/kubelet\n"
        "ExecStart=/usr/bin/kubelet --config=/etc/kubelet/config.yaml --config-dir=/etc/kubelet/conf.d $EXTRA\n",
    "/etc/default/kubelet": "EXTRA=\"--registry-qps=44 --system-reserved=cpu=1 --system-reserved=memory=1Gi\"\n",
    "/etc/kubelet/config.yaml": (
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "kubeAPIQPS: 11\neventRecordQPS: 12\neventBurst: 13\nregistryPullQPS: 14\n"
        "evictionHard:\n  memory.available: 200Mi\n  nodefs.available: 5%\n"
        "systemReserved:\n  cpu: 500m\n  pid: \"1000\"\n"
    ),
    "/etc/kubelet/conf.d/10-first.conf": (
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "eventRecordQPS: 22\neventBurst: 23\nregistryPullQPS: 24\nevictionHard:\n  memory.available: 300Mi\n"
    ),
    "/etc/kubelet/conf.d/20-second.conf": (
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\neventBurst: 33\nregistryPullQPS: 34\n"
    ),
    "/etc/kubelet/conf.d/ignored.yaml": "kubeAPIQPS: 999\n",
}

# field -> (value, source, path or flag)
EXPECTED_MERGE = {
    "kubeAPIQPS": (11, "config", "/etc/kubelet/config.yaml"),
    "eventRecordQPS": (22, "drop-in", "/etc/kubelet/conf.d/10-first.conf"),
    "eventBurst": (33, "drop-in", "/etc/kubelet/conf.d/20-second.conf"),
    "registryPullQPS": (44, "flag", "--registry-qps"),
    "kubeAPIBurst": (100, "default", None),
    "registryBurst": (10, "default", None),
    # a drop-in merges a map key by key (RFC 7386)
    "evictionHard": ({"memory.available": "300Mi", "nodefs.available": "5%"}, "drop-in", "/etc/kubelet/conf.d/10-first.conf"),
    # a map flag replaces the map from the files; repeated map flags add up
    "systemReserved": ({"cpu": "1", "memory": "1Gi"}, "flag", "--system-reserved"),
}


@pytest.mark.parametrize("field", sorted(EXPECTED_MERGE))
def test_merge_order_file_then_dropins_then_flags(make_tree, field):
    root = make_tree(MERGE_TREE)
    _node, _layers, facts = inspect(root)
    assert facts["dropins"] == ["/etc/kubelet/conf.d/10-first.conf", "/etc/kubelet/conf.d/20-second.conf"]
    value, source, where = EXPECTED_MERGE[field]
    got = facts["effective"][field]
    assert got["value"] == value
    assert got["source"] == source
    if source == "flag":
        assert got["flag"] == where and got["path"] == "/etc/default/kubelet"
    else:
        assert got["path"] == where


def test_merge_patch_lists_replace_and_null_deletes():
    base = {"clusterDNS": ["a", "b"], "m": {"x": 1, "y": 2}}
    assert kubelet_config_yaml.merge_patch(base, {"clusterDNS": ["c"], "m": {"y": None, "z": 3}}) == {"clusterDNS": ["c"], "m": {"x": 1, "z": 3}}


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("settings,message", [
    ({"kubeAPIQPS": "fifty"}, "kubeAPIQPS: expected an integer"),
    ({"kubeAPIQPS": -1}, "kubeAPIQPS: -1 must not be a negative number"),
    ({"eventBurst": True}, "expected an integer, got a boolean"),
    ({"kubeApiQps": 50}, "unknown KubeletConfiguration field (did you mean kubeAPIQPS?)"),
    ({"clusterDNS": ["1.1.1.1"]}, "does not manage"),
    ({"maxParallelImagePulls": 0}, "must be a positive number"),
    ({"podPidsLimit": -2}, "must be -1 or greater"),
    ({"serializeImagePulls": "maybe"}, "expected a boolean"),
    ({"evictionHard": {"memory.avail": "1Gi"}}, "unknown key 'memory.avail' (did you mean memory.available?)"),
    ({"systemReserved": {"memory": "lots"}}, "is not a Kubernetes quantity"),
    ({"evictionHard": "memory.available<1Gi"}, "expected a mapping"),
])
def test_bad_settings_are_rejected_with_a_clear_message(settings, message):
    with pytest.raises(kubelet_schema.KubeletError) as exc:
        kubelet_schema.validate_settings(settings)
    assert message in exc.value.msg


def test_settings_are_normalised():
    out = kubelet_schema.validate_settings({"kubeAPIQPS": "50", "serializeImagePulls": "false", "maxParallelImagePulls": None,
                                            "evictionHard": {"memory.available": "10%"}})
    assert out == {"kubeAPIQPS": 50, "serializeImagePulls": False, "maxParallelImagePulls": None,
                   "evictionHard": {"memory.available": "10%"}}


# ---------------------------------------------------------------- planning

PROFILE = {"kubeAPIQPS": 30, "kubeAPIBurst": 40, "eventRecordQPS": 30, "eventBurst": 40}


def _plan(root, settings, version="1.29.3", **kw):
    node, layers, _facts = inspect(root, version)
    return kubelet_plan.plan(node, layers, kubelet_schema.validate_settings(settings), root=root, **kw)


def test_never_lower_than_the_1_27_defaults(tmp_path):
    root = layout_tree(tmp_path, "kubeadm")
    p = _plan(root, PROFILE)
    assert p["targets"] == {"kubeAPIQPS": 50, "kubeAPIBurst": 100, "eventRecordQPS": 50, "eventBurst": 100}
    assert {r["field"] for r in p["raised"]} == set(PROFILE)
    for field in ("kubeAPIQPS", "eventRecordQPS"):
        assert p["after"][field]["source"] == "config"


def test_old_kubelet_gets_the_requested_floor(tmp_path):
    root = layout_tree(tmp_path, "kubeadm")
    p = _plan(root, PROFILE, version="1.26.3")
    assert p["targets"] == PROFILE and p["raised"] == []


def test_allow_lower_writes_the_requested_value(tmp_path):
    root = layout_tree(tmp_path, "kubeadm")
    p = _plan(root, PROFILE, allow_lower=True)
    assert p["targets"] == PROFILE


def test_a_higher_value_in_effect_is_kept_even_from_a_flag(make_tree):
    root = make_tree(dict(MERGE_TREE))
    p = _plan(root, {"registryPullQPS": 20, "eventRecordQPS": 30})
    # --registry-qps=44 wins today: the flag goes, its value moves into the config
    assert p["targets"]["registryPullQPS"] == 44
    assert p["targets"]["eventRecordQPS"] == 50


def test_zero_means_unlimited_for_event_qps(make_tree):
    files = dict(MERGE_TREE)
    files["/etc/kubelet/conf.d/20-second.conf"] += "eventRecordQPS: 0\n"
    root = make_tree(files)
    p = _plan(root, {"eventRecordQPS": 50})
    assert p["targets"]["eventRecordQPS"] == 0


def test_config_dir_gets_our_dropin_and_later_dropins_are_aligned(make_tree):
    files = dict(MERGE_TREE)
    files["/etc/kubelet/conf.d/zz-late.conf"] = ("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                                                 "# theirs\nkubeAPIQPS: 7\n")
    root = make_tree(files)
    p = _plan(root, {"kubeAPIQPS": 60, "serializeImagePulls": False, "maxParallelImagePulls": 3})
    paths = [f["path"] for f in p["files"]]
    assert "/etc/kubelet/conf.d/99-nodefix-k8s.conf" in paths
    assert "/etc/kubelet/config.yaml" not in paths
    ours = [f for f in p["files"] if f["path"].endswith("99-nodefix-k8s.conf")][0]
    assert ours["created"] and "kind: KubeletConfiguration" in ours["after"] and "maxParallelImagePulls: 3" in ours["after"]
    late = [f for f in p["files"] if f["path"].endswith("zz-late.conf")][0]
    assert "# theirs\nkubeAPIQPS: 60" in late["after"]
    assert p["after"]["kubeAPIQPS"] == {"value": 60, "source": "drop-in", "path": "/etc/kubelet/conf.d/zz-late.conf"}


def test_stale_flags_are_removed_from_env_files_and_unit_dropins(tmp_path):
    root = layout_tree(tmp_path, "kubeadm")
    unit = os.path.join(root, "etc/systemd/system/kubelet.service.d/20-tuning.conf")
    with open(unit, "w") as fh:
        fh.write("[Service]\n# --kube-api-qps=1 in a comment stays\nEnvironment=\"KUBELET_EXTRA_ARGS=--event-burst 10 --v=2\"\n")
    p = _plan(root, PROFILE)
    by_path = dict((f["path"], f) for f in p["files"])
    assert by_path["/etc/default/kubelet"]["after"] == 'KUBELET_EXTRA_ARGS=""\n'
    dropin = by_path["/etc/systemd/system/kubelet.service.d/20-tuning.conf"]
    assert dropin["unit"] is True
    assert "# --kube-api-qps=1 in a comment stays" in dropin["after"]
    assert 'Environment="KUBELET_EXTRA_ARGS=--v=2"' in dropin["after"]


def test_rewrite_mode_keeps_flags_with_the_ensured_value(tmp_path):
    root = layout_tree(tmp_path, "kubespray")
    p = _plan(root, {"kubeAPIQPS": 30, "serializeImagePulls": False}, version="1.26.1", stale_mode="rewrite")
    env = [f for f in p["files"] if f["path"] == "/etc/kubernetes/kubelet.env"][0]["after"]
    assert "--kube-api-qps=30 --kube-api-burst=10" in env
    assert "--serialize-image-pulls=false" in env


def test_comments_and_untouched_keys_survive(tmp_path):
    root = layout_tree(tmp_path, "kubeadm")
    before = open(os.path.join(root, "var/lib/kubelet/config.yaml")).read()
    p = _plan(root, PROFILE)
    after = [f for f in p["files"] if f["path"] == "/var/lib/kubelet/config.yaml"][0]["after"]
    for line in before.splitlines():
        if line.startswith("#"):
            assert line in after
        elif not line.startswith("kubeAPIQPS"):
            assert line in after.splitlines()
    assert "kubeAPIQPS: 50 # see KUB-112" in after


@pytest.mark.parametrize("settings,version,message", [
    ({"maxParallelImagePulls": 5}, "1.29.3", "maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls"),
    ({"maxParallelImagePulls": 5, "serializeImagePulls": False}, "1.26.9", "needs kubelet 1.27 or later"),
])
def test_invalid_combinations_are_refused(tmp_path, settings, version, message):
    root = layout_tree(tmp_path, "kubeadm")
    with pytest.raises(kubelet_schema.KubeletError, match=message):
        _plan(root, settings, version=version)


def test_flags_only_kubelet_is_refused(make_tree):
    root = make_tree({"/lib/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet --kube-api-qps=5\n"})
    with pytest.raises(kubelet_schema.KubeletError, match="flags only"):
        _plan(root, {"kubeAPIQPS": 50})


@pytest.mark.parametrize("content,message", [
    ("kubeAPIQPS: [1\n", "is not valid YAML"),
    ("- a\n- b\n", "expected a KubeletConfiguration mapping"),
    ("apiVersion: v1\nkind: ConfigMap\n", "kind is 'ConfigMap'"),
])
def test_malformed_config_is_a_clear_error(tmp_path, content, message):
    root = layout_tree(tmp_path, "kubeadm")
    with open(os.path.join(root, "var/lib/kubelet/config.yaml"), "w") as fh:
        fh.write(content)
    with pytest.raises(kubelet_schema.KubeletError, match=message):
        inspect(root)


@pytest.mark.parametrize("breakage", ["directory", "dangling"])
def test_unreadable_config_is_a_failed_check_naming_the_file_never_a_clean_kubelet(tmp_path, breakage):
    from ansible_collections.nodefix.k8s.plugins.module_utils._audit import checks as audit_checks
    root = layout_tree(tmp_path, "kubeadm")
    os.remove(os.path.join(root, "var/lib/kubelet/config.yaml"))
    if breakage == "directory":
        os.mkdir(os.path.join(root, "var/lib/kubelet/config.yaml"))
    else:  # the review's tree, with the target missing on the node
        os.symlink("/etc/kubernetes/real/kc.yaml", os.path.join(root, "var/lib/kubelet/config.yaml"))
    result = audit_checks.run_checks(None, root=root, checks=["kubelet"], options={"kubelet": {"kubelet_version": "1.29.3"}})
    ids = [f["id"] for f in result["findings"]]
    assert ids == ["audit.check_failed", "kubelet.config_unreadable"], ids
    failed = result["findings"][0]
    assert failed["subject"] == "kubelet" and failed["evidence"]["path"] == "/var/lib/kubelet/config.yaml", failed
    assert ("is a directory" if breakage == "directory" else "dangling symlink") in failed["evidence"]["msg"]
    assert result["findings"][1]["evidence"]["path"] == "/var/lib/kubelet/config.yaml"
    assert "error" in result["checks"]["kubelet"]


def test_check_without_kubelet_unit(make_tree):
    root = make_tree({"/etc/hostname": "x\n"})
    assert kubelet_detect.check(None, root) == {"kubelet": {"present": False, "unit": "kubelet.service"}, "findings": []}


def test_check_unknown_field_and_invalid_config(make_tree):
    root = make_tree({
        "/lib/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet --config=/c.yaml\n",
        "/c.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nkubeApiQps: 50\n"
                   "maxParallelImagePulls: 4\npodPidsLimit: 4096\n",
    })
    result = kubelet_detect.check(None, root, kubelet_version="1.30.0")
    by_id = dict((f["id"], f) for f in result["findings"])
    assert by_id["kubelet.unknown_field"]["evidence"]["fields"][0]["field"] == "kubeApiQps"
    assert "maxParallelImagePulls cannot be larger than 1" in by_id["kubelet.invalid_config"]["evidence"]["errors"][0]
    assert "kubelet.pod_pids_unlimited" not in by_id


def test_findings_registry_shape():
    for fid, entry in kubelet_detect.FINDINGS.items():
        assert fid.startswith("kubelet.") and fid == fid.lower()
        assert entry["severity"] in ("critical", "high", "medium", "low", "info")
        assert entry["title"] and entry["remedy"]
        assert set(entry) >= {"severity", "title", "remedy", "role", "tag"}


# ---------------------------------------------------------------- read-only fallback

@pytest.mark.parametrize("path", [
    "kubeadm/var/lib/kubelet/config.yaml",
    "kubespray/etc/kubernetes/kubelet-config.yaml",
])
def test_subset_parser_reads_real_layout_files_like_ruamel(path):
    from ruamel.yaml import YAML
    text = open(os.path.join(LAYOUTS, path)).read()
    assert kubelet_config_yaml.subset_yaml_load(text) == kubelet_config_yaml.plain(YAML(typ="safe", pure=True).load(text))


@pytest.mark.parametrize("text", ["a: [1\n", "  a: 1\nb: 2\n", "a: |\n  x\n", "a: 1\na: 2\n", "a:\n\t- x\n"])
def test_subset_parser_rejects_what_it_cannot_read(text):
    with pytest.raises(kubelet_config_yaml.YamlError):
        kubelet_config_yaml.subset_yaml_load(text)


def test_check_works_without_any_yaml_library(tmp_path, monkeypatch):
    # the YAML reader (_kubelet.config_yaml) decides which library it uses
    monkeypatch.setitem(kubelet_config_yaml._LIB, "ruamel", None)
    monkeypatch.setattr(kubelet_config_yaml, "_pyyaml", lambda: None)
    root = layout_tree(tmp_path, "kubespray")
    result = kubelet_detect.check(None, root, kubelet_version="1.26.15")
    want = {"value": 5, "source": "config", "path": "/etc/kubernetes/kubelet-config.yaml"}
    assert result["kubelet"]["effective"]["eventRecordQPS"] == want
    assert "kubelet.api_qps_low" in [f["id"] for f in result["findings"]]


class FakeRunner(object):
    """Answers ``systemctl cat`` like systemd does (paths of the unit and its drop-ins)."""

    def __init__(self, out, rc=0):
        self.out, self.rc, self.calls = out, rc, []

    def bin(self, name, required=False, opt_dirs=None):
        return "/usr/bin/" + name

    def run(self, argv, check=True, data=None, msg=None):
        self.calls.append(argv)
        return self.rc, self.out, ""


def test_discovery_follows_systemctl_cat(tmp_path):
    root = layout_tree(tmp_path, "kubeadm")
    # systemd shows the unit under /usr/lib (merged /usr); the files are read from disk
    os.makedirs(os.path.join(root, "usr/lib/systemd/system"))
    shutil.move(os.path.join(root, "lib/systemd/system/kubelet.service"), os.path.join(root, "usr/lib/systemd/system/kubelet.service"))
    out = ("# /usr/lib/systemd/system/kubelet.service\n[Service]\nExecStart=/usr/bin/kubelet\n\n"
           "# /etc/systemd/system/kubelet.service.d/10-kubeadm.conf\n[Service]\nExecStart=/stale/copy\n")
    runner = FakeRunner(out)
    node = kubelet_node.discover(runner, root, use_systemctl=True)
    assert runner.calls == [["/usr/bin/systemctl", "cat", "--no-pager", "kubelet.service"]]
    assert [p for p, _t in node.unit_files] == [
        "/usr/lib/systemd/system/kubelet.service",
        "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
    ]
    assert node.config_path == "/var/lib/kubelet/config.yaml"  # from the file on disk, not the cat text


def test_discovery_without_the_unit_in_systemctl_falls_back_to_the_tree(tmp_path):
    root = layout_tree(tmp_path, "kubespray")
    node = kubelet_node.discover(FakeRunner("", rc=1), root, use_systemctl=True)
    assert node.layout == "kubespray"


def test_detector_reads_the_config_through_an_absolute_in_root_symlink(tmp_path):
    # /host-style tree: var/lib/kubelet/config.yaml -> /etc/kubernetes/real/kc.yaml (the node's path)
    root = layout_tree(tmp_path, "kubeadm")
    real = os.path.join(root, "etc/kubernetes/real/kc.yaml")
    os.makedirs(os.path.dirname(real))
    with open(os.path.join(root, "var/lib/kubelet/config.yaml")) as fh:
        text = fh.read()
    os.remove(os.path.join(root, "var/lib/kubelet/config.yaml"))
    with open(real, "w") as fh:
        fh.write(text + "maxPods: 77\n")
    os.symlink("/etc/kubernetes/real/kc.yaml", os.path.join(root, "var/lib/kubelet/config.yaml"))
    result = kubelet_detect.check(None, root, kubelet_version="1.29.3")
    assert "error" not in result["kubelet"], result["kubelet"]
    assert "kubelet.config_unreadable" not in [f["id"] for f in result["findings"]]
    _node, layers, _facts = inspect(root, roundtrip=False)
    assert layers[0].data.get("maxPods") == 77
