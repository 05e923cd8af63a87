# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for _mount_units: parsing, attribution, guards, batching, check()."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import detect as mount_units_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import cost as mount_units_cost
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import errors as mount_units_errors
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import pods as mount_units_pods
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import survey as mount_units_survey
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import cleanup as mount_units_cleanup
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import systemd as mount_units_systemd
from test_mount_units_fakes import PODS, FakeNode, mount, other, scope, subpath

LIVE = "11111111-2222-3333-4444-555555555555"
DEAD = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
DEAD2 = "0b5a3c2d-1e4f-4a6b-8c7d-9e0f1a2b3c4d"
STATIC = "b3a8a2f4a1d3c0f0e8d3c2b1a0f9e8d7"   # a static pod's UID (md5 hex)
STATIC2 = "5e0f3c9a7d2b4e6f8a1c3e5d7b9f0a2c"  # another static pod (systemd driver, Guaranteed)
HEX = "7cb6598194c7094d0c5717f6a2cb6eef"

# Captured from `systemctl list-units --all --plain --no-legend --full` on systemd 252 (lab image):
# the same rows and column widths, rebuilt so that the lines fit the project's line length.
_REAL_ROWS = [
    ("run-.containerenv.mount", "loaded", "active", "mounted", "/run/.containerenv"),
    (r"var-lib-kubelet-pods-11111111\x2d2222\x2d3333\x2d4444\x2d555555555555-volume\x2dsubpaths-cfg\x2dvol-app-0.mount",
     "loaded", "active", "mounted", "/var/lib/kubelet/pods/%s/volume-subpaths/cfg-vol/app/0" % LIVE),
    (r"var-lib-kubelet-pods-aaaaaaaa\x2dbbbb\x2dcccc\x2ddddd\x2deeeeeeeeeeee-volume\x2dsubpaths-cfg\x2dvol-app-0.mount",
     "loaded", "active", "mounted", "/var/lib/kubelet/pods/%s/volume-subpaths/cfg-vol/app/0" % DEAD),
    ("run-r01931977525b4c678ab1818dfa27713c.scope", "loaded", "active", "running",
     "Kubernetes transient mount for /var/lib/kubelet/pods/%s/volume-subpaths/x/y/1" % LIVE),
    ("run-r7cb6598194c7094d0c5717f6a2cb6eef.scope", "loaded", "active", "running",
     "Kubernetes transient mount for /var/lib/kubelet/pods/%s/volume-subpaths/cfg-vol/app/0" % LIVE),
    ("run-rea3be5665e08391fccf95e0ae3b4c9cc.scope", "loaded", "active", "running",
     "Kubernetes transient mount for /var/lib/kubelet/pods/%s/volume-subpaths/cfg-vol/app/0" % DEAD),
    ("home.mount", "not-found", "inactive", "dead", "home.mount"),
]
REAL_LIST = "".join("%-111s %-9s %-10s %-9s %s\n" % row for row in _REAL_ROWS)


# --- names, escaping, parsers -------------------------------------------------

@pytest.mark.parametrize("path, name", [
    ("/var/lib/kubelet/pods/%s/volume-subpaths/cfg-vol/app/0" % LIVE,
     r"var-lib-kubelet-pods-11111111\x2d2222\x2d3333\x2d4444\x2d555555555555-volume\x2dsubpaths-cfg\x2dvol-app-0"),
    # systemd-escape --path '/var/lib/kubelet/pods/x/volumes/kubernetes.io~secret/a b/.c' on systemd 252
    ("/var/lib/kubelet/pods/x/volumes/kubernetes.io~secret/a b/.c",
     r"var-lib-kubelet-pods-x-volumes-kubernetes.io\x7esecret-a\x20b-.c"),
    ("/", "-"),
    ("/.hidden/x", r"\x2ehidden-x"),
    ("/data/k\u00e9/x", r"data-k\xc3\xa9-x"),
])
def test_escape_and_unescape(path, name):
    assert mount_units_systemd.systemd_escape_path(path) == name
    assert mount_units_systemd.unit_name_to_path(name + ".mount") == path


def test_parse_real_list_units():
    rows = mount_units_systemd.parse_list_units(REAL_LIST)
    assert len(rows) == 7
    assert rows[3] == {"unit": "run-r01931977525b4c678ab1818dfa27713c.scope", "load": "loaded", "active": "active",
                       "sub": "running", "description": "Kubernetes transient mount for "
                       "/var/lib/kubelet/pods/%s/volume-subpaths/x/y/1" % LIVE}
    assert rows[-1]["load"] == "not-found"


def test_parse_list_units_with_bullets_and_blank_lines():
    text = u"\u25cf run-u7.scope loaded failed failed Kubernetes transient mount for /x\n\n" \
           "run-42.scope loaded active running\n"
    rows = mount_units_systemd.parse_list_units(text)
    assert [(r["unit"], r["active"], r["description"]) for r in rows] == [
        ("run-u7.scope", "failed", "Kubernetes transient mount for /x"), ("run-42.scope", "active", "")]


def test_parse_show_blocks():
    text = ("Id=a.scope\nDescription=Kubernetes transient mount for /x\nLoadState=loaded\nActiveState=active\n"
            "SubState=running\n\nWhere=/var/lib/kubelet/pods/u/v\nId=b.mount\nDescription=/var/lib/kubelet/pods/u/v\n"
            "LoadState=loaded\nActiveState=active\nSubState=mounted\n\nId=c.scope\nLoadState=not-found\n")
    shown = mount_units_systemd.parse_show(text)
    assert sorted(shown) == ["a.scope", "b.mount", "c.scope"]
    assert shown["b.mount"]["Where"] == "/var/lib/kubelet/pods/u/v"
    assert shown["c.scope"]["LoadState"] == "not-found"


def test_parse_mountinfo_decodes_octal():
    text = ("22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
            "182 77 0:45 /srcd /var/lib/kubelet/pods/%s/volumes/kubernetes.io~secret/a\\040b rw - tmpfs tmpfs rw\n"
            % LIVE)
    assert mount_units_systemd.parse_mountinfo(text) == ["/proc", "/var/lib/kubelet/pods/%s/volumes/kubernetes.io~secret/a b" % LIVE]


@pytest.mark.parametrize("text, version", [
    ("systemd 252 (252.39-1~deb12u2)\n+PAM +AUDIT", 252),
    ("systemd 229\n+PAM +AUDIT +SELINUX", 229),
    ("systemd 257 (257.9-1~deb13u1)", 257),
    ("", None), ("garbage", None),
])
def test_parse_systemd_version(text, version):
    assert mount_units_systemd.parse_systemd_version(text) == version


@pytest.mark.parametrize("path, uid, reason", [
    (subpath(LIVE), LIVE, None),
    (subpath(STATIC), STATIC, None),
    (subpath(LIVE.upper()), LIVE, None),
    ("/var/lib/kubelet/pods//%s//volumes/x" % DEAD, DEAD, None),
    ("/var/lib/kubelet/pods/%s" % DEAD, DEAD, None),
    ("/var/lib/kubelet/pods/not-a-uid/volume-subpaths/x", None, "is not a pod UID"),
    ("/var/lib/kubelet/pods/%s/../%s/x" % (DEAD, LIVE), None, "components"),
    ("/var/lib/kubelet/pods/./%s/x" % DEAD, None, "components"),
    ("/var/lib/kubelet/plugins/kubernetes.io/csi/pv/x/globalmount", None, "outside"),
    ("/var/lib/kubelet/podsX/%s/x" % DEAD, None, "outside"),
    ("relative/path", None, "not an absolute path"),
    ("", None, "not an absolute path"),
])
def test_pod_of_path(path, uid, reason):
    got, why = mount_units_systemd.pod_of_path(path, [PODS])
    assert got == uid
    if reason:
        assert reason in why


def test_chunks_respect_count_and_bytes():
    names = ["run-r%032x.scope" % i for i in range(2500)]
    batches = list(mount_units_systemd.chunks(names, 1000))
    assert [len(b) for b in batches] == [1000, 1000, 500]
    small = list(mount_units_systemd.chunks(names, None, max_bytes=4096))
    assert sum(len(b) for b in small) == 2500
    for batch in small:
        assert sum(len(n) + 9 for n in batch) <= 4096
    assert mount_units_systemd.argv_budget() >= 16384


def test_pods_dirs_follow_a_symlinked_root_dir(tmp_path):
    root = tmp_path / "root"
    (root / "data" / "kubelet" / "pods").mkdir(parents=True)
    (root / "var" / "lib").mkdir(parents=True)
    os.symlink("/data/kubelet", str(root / "var" / "lib" / "kubelet"))   # the node's path
    assert mount_units_systemd.pods_dirs_for(str(root), "/var/lib/kubelet") == ["/var/lib/kubelet/pods", "/data/kubelet/pods"]
    assert mount_units_systemd.pods_dirs_for(str(root), "/var/lib/kubelet/") == ["/var/lib/kubelet/pods", "/data/kubelet/pods"]
    assert mount_units_systemd.pods_dirs_for(str(tmp_path / "none"), "/var/lib/kubelet") == ["/var/lib/kubelet/pods"]


# --- survey: selection and attribution ----------------------------------------

def _run(node, tmp_path, state="absent", check_mode=False, **opts):
    opts.setdefault("process_guard", False)
    return mount_units_cleanup.run(node, root=str(tmp_path), state=state, check_mode=check_mode, **opts)


def _node_from_real_list():
    node = FakeNode(pods=[{"uid": LIVE}])
    node.units = [dict(r) for r in mount_units_systemd.parse_list_units(REAL_LIST)]
    return node


def test_real_listing_stops_exactly_the_dead_pod_units(tmp_path):
    node = _node_from_real_list()
    result = _run(node, tmp_path)
    dead = {r"var-lib-kubelet-pods-aaaaaaaa\x2dbbbb\x2dcccc\x2ddddd\x2deeeeeeeeeeee-volume\x2dsubpaths-cfg\x2dvol-app-0.mount",
            "run-rea3be5665e08391fccf95e0ae3b4c9cc.scope"}
    assert set(result["stopped_units"]) == dead
    assert result["changed"] is True
    assert (result["total"], result["orphaned"], result["stopped"], result["kept_live"], result["unattributable"]) == \
        (5, 2, 2, 3, 0)
    assert result["systemd"] == {"version": 252, "has_fix": True, "fixed_in": 237, "units_total": 7,
                                 "unit_limit": 131072}
    assert not dead & node.names()
    assert "run-.containerenv.mount" in node.names() and "home.mount" in node.names()
    # list-units, version, crictl pods + ps, the scope in one transaction and the mount unit (its name holds
    # "\x2d") in one systemctl stop, one list-units after
    assert node.count("stop") == 2 and node.count("show") == 0 and node.count("list-units") == 2
    assert [c[2:] for c in node.calls if c[1] == "stop"] == [[n for n in dead if n.endswith(".mount")]]


def test_timings_name_the_re_read_apart_from_the_stop(tmp_path):
    # benchmarks/mount_units splits the module's time by these keys: the re-read after the stop is its own
    # figure (part of stop_s); check mode re-reads nothing
    result = _run(_node_from_real_list(), tmp_path)
    assert sorted(result["timings"]) == ["list_s", "pods_s", "stop_s", "verify_s"], result["timings"]
    assert result["timings"]["verify_s"] >= 0
    dry = _run(_node_from_real_list(), tmp_path, check_mode=True)
    assert dry["timings"]["verify_s"] == 0.0 and dry["stopped"] == 0


def test_all_three_scope_naming_schemes(tmp_path):
    units = [scope("run-r%s.scope" % HEX, subpath(DEAD)), scope("run-u42.scope", subpath(DEAD, idx=1)),
             scope("run-31337.scope", subpath(DEAD, idx=2)),
             scope("kubelet-custom.scope", subpath(DEAD, idx=3)),     # kubelet never names them: left alone
             scope("run-rXYZ.scope", subpath(DEAD, idx=4))]            # not a systemd-run name
    node = FakeNode(units)
    result = _run(node, tmp_path, pod_source="list")
    assert set(result["stopped_units"]) == {"run-r%s.scope" % HEX, "run-u42.scope", "run-31337.scope"}
    assert sorted(u["unit"] for u in result["unattributable_units"]) == ["kubelet-custom.scope", "run-rXYZ.scope"]
    assert "kubelet-custom.scope" in node.names()


def test_unattributable_units_are_never_stopped(tmp_path):
    units = [
        scope("run-u1.scope", "/var/lib/kubelet/plugins/kubernetes.io/csi/pv/pvc-1/globalmount"),
        scope("run-u2.scope", "/var/lib/kubelet/pods/not-a-uid/volume-subpaths/x/y/0"),
        scope("run-u3.scope", "/var/lib/kubelet/pods/%s/../%s/volume-subpaths/x" % (DEAD, DEAD2)),
        scope("run-u4.scope", "somewhere"),
        mount("/var/lib/kubelet/pods/garbage/volumes/kubernetes.io~secret/t"),
    ]
    node = FakeNode(units)
    result = _run(node, tmp_path, pod_source="list")
    assert result["unattributable"] == 5 and result["to_stop"] == 0 and result["stopped"] == 0
    assert result["changed"] is False and node.count("stop") == 0
    reasons = dict((u["unit"], u["reason"]) for u in result["unattributable_units"])
    assert "not under /var/lib/kubelet/pods" in reasons["run-u1.scope"]
    assert "is not a pod UID" in reasons["run-u2.scope"]


def test_unrelated_units_are_ignored(tmp_path):
    units = [other("run-r%s.scope" % HEX, "nodefix unrelated scope"),
             mount("/srv/data"), mount("/var/lib/kubelet"), mount("/var/lib/kubelet/pods"),
             other("kubelet.service", "kubelet: The Kubernetes Node Agent"),
             mount("/var/lib/kubelet/plugins/kubernetes.io/csi/pv/pvc-1/globalmount")]
    node = FakeNode(units)
    result = _run(node, tmp_path, pod_source="list")
    assert result["total"] == 0 and node.count("stop") == 0
    assert len(node.units) == len(units) + 6


def test_static_pod_and_custom_root_dir(tmp_path):
    pods = "/data/kubelet/pods"
    units = [scope("run-u5.scope", subpath(STATIC, pods=pods)), mount(subpath(DEAD, pods=pods)),
             scope("run-u6.scope", subpath(DEAD))]   # the default dir: not this kubelet's
    node = FakeNode(units, pods=[{"uid": STATIC}])
    result = _run(node, tmp_path, kubelet_root_dir="/data/kubelet")
    assert result["stopped_units"] == [mount_units_systemd.systemd_escape_path(subpath(DEAD, pods=pods)) + ".mount"]
    assert result["kept_live"] == 1 and result["unattributable"] == 1


def test_hashed_long_mount_name_is_settled_with_one_show(tmp_path):
    long_path = subpath(DEAD, vol="v" * 200)
    hashed = "var-lib-kubelet-pods-aaaaaaaa\\x2dbbbb-volume\\x2dsubpaths-vvvvvv-0123456789abcdef.mount"
    units = [mount(long_path, name=hashed), mount(subpath(LIVE), description="Kubelet volume")]
    node = FakeNode(units, pods=[{"uid": LIVE}])
    result = _run(node, tmp_path)
    assert node.count("show") == 1
    show = [c for c in node.calls if c[1] == "show"][0]
    assert sorted(show[4:]) == sorted([hashed, mount_units_systemd.systemd_escape_path(subpath(LIVE)) + ".mount"])
    assert result["stopped_units"] == [hashed] and result["kept_live"] == 1


def test_check_mode_reports_exactly_and_stops_nothing(tmp_path):
    units = [scope("run-u%d.scope" % i, subpath(DEAD, idx=i)) for i in range(5)] + \
            [scope("run-u%d.scope" % (i + 10), subpath(LIVE, idx=i)) for i in range(3)]
    node = FakeNode(units, pods=[{"uid": LIVE}])
    before = node.names()
    result = _run(node, tmp_path, check_mode=True)
    assert result["changed"] is True and result["to_stop"] == 5 and result["stopped"] == 0
    assert result["to_stop_units"] == sorted("run-u%d.scope" % i for i in range(5))
    assert node.names() == before and node.count("stop") == 0
    query = _run(node, tmp_path, state="query")
    assert query["to_stop"] == 5 and node.count("stop") == 0 and node.names() == before


# --- live pods: runtime, caller, guards ------------------------------------------

def test_runtime_failure_stops_nothing(tmp_path):
    node = FakeNode([scope("run-u1.scope", subpath(DEAD))],
                    fail={"crictl pods": (1, "", 'level=fatal msg="listing pod sandboxes: rpc error"')})
    with pytest.raises(mount_units_errors.MountUnitsError) as exc:
        _run(node, tmp_path)
    assert "crictl pods -o json failed" in exc.value.msg and exc.value.details["rc"] == 1
    assert node.count("stop") == 0 and "run-u1.scope" in node.names()


@pytest.mark.parametrize("fail", [
    {"crictl ps": (1, "", "rpc error")},
    {"crictl pods": (0, "not json", "")},
    {"crictl pods": (0, "[]", "")},
    {"crictl pods": (0, '{"items": {"a": 1}}', "")},
])
def test_any_runtime_answer_problem_stops_nothing(tmp_path, fail):
    node = FakeNode([scope("run-u1.scope", subpath(DEAD))], fail=fail)
    with pytest.raises(mount_units_errors.MountUnitsError):
        _run(node, tmp_path)
    assert node.count("stop") == 0


def test_sandbox_without_uid_refuses_to_guess(tmp_path):
    node = FakeNode([scope("run-u1.scope", subpath(DEAD))], pods=[{"uid": None}])
    with pytest.raises(mount_units_errors.MountUnitsError) as exc:
        _run(node, tmp_path)
    assert "without a UID" in exc.value.msg and node.count("stop") == 0


def test_missing_crictl_fails_clearly(tmp_path):
    node = FakeNode([scope("run-u1.scope", subpath(DEAD))], missing=["crictl"])
    with pytest.raises(mount_units_errors.MountUnitsError) as exc:
        _run(node, tmp_path)
    assert "crictl not found" in exc.value.msg and node.count("stop") == 0


def test_no_kubelet_units_means_no_runtime_query(tmp_path):
    node = FakeNode([], missing=["crictl"])
    result = _run(node, tmp_path)
    assert result["total"] == 0 and result["changed"] is False
    assert [c[1] for c in node.calls] == ["--version", "list-units"]


def test_container_labels_and_notready_sandboxes_count_as_live(tmp_path):
    units = [scope("run-u1.scope", subpath(LIVE)), scope("run-u2.scope", subpath(DEAD)),
             scope("run-u3.scope", subpath(DEAD2))]
    node = FakeNode(units, pods=[{"uid": DEAD, "state": "SANDBOX_NOTREADY"}], containers=[{"pod_uid": LIVE}])
    result = _run(node, tmp_path)
    assert result["stopped_units"] == ["run-u3.scope"]
    assert result["runtime"]["sandboxes"] == 1 and result["runtime"]["containers"] == 1


def test_docker_labels_and_names(tmp_path):
    units = [scope("run-u1.scope", subpath(LIVE)), scope("run-u2.scope", subpath(DEAD)),
             scope("run-u3.scope", subpath(DEAD2))]
    lines = ["k8s_app_web-0_default_%s_0\t%s" % (LIVE, LIVE),
             "k8s_POD_db-0_default_%s_1\t" % DEAD,     # no label: the name carries the UID
             "registry\t"]
    node = FakeNode(units, docker_lines=lines)
    result = _run(node, tmp_path, pod_source="docker")
    assert result["stopped_units"] == ["run-u3.scope"] and result["kept_live"] == 2


def test_docker_kubelet_container_without_uid_refuses(tmp_path):
    node = FakeNode([scope("run-u1.scope", subpath(DEAD))], docker_lines=["k8s_weird_name\t"])
    with pytest.raises(mount_units_errors.MountUnitsError):
        _run(node, tmp_path, pod_source="docker")
    assert node.count("stop") == 0


def test_caller_list(tmp_path):
    units = [scope("run-u1.scope", subpath(LIVE)), scope("run-u2.scope", subpath(DEAD))]
    node = FakeNode(units, missing=["crictl"])
    result = _run(node, tmp_path, pod_source="list", live_pod_uids=[LIVE.upper()])
    assert result["stopped_units"] == ["run-u2.scope"]
    assert result["kept_units"] == [{"unit": "run-u1.scope", "pod_uid": LIVE, "reason": "pod known to caller"}]
    with pytest.raises(mount_units_errors.MountUnitsError):
        _run(node, tmp_path, pod_source="list", live_pod_uids=["web-0"])


def test_mount_guard_keeps_a_pod_whose_volumes_are_mounted(tmp_path, make_tree):
    # DEAD2 is unknown to the runtime but kubelet has its volumes mounted (sandbox not created yet)
    mountinfo = ("1 0 0:1 / / rw - overlay overlay rw\n"
                 "182 1 0:45 / %s/%s/volumes/kubernetes.io~secret/token rw - tmpfs tmpfs rw\n"
                 "183 1 0:46 /src %s rw - tmpfs tmpfs rw\n" % (PODS, DEAD2, subpath(DEAD)))
    root = make_tree({"/proc/self/mountinfo": mountinfo})
    units = [scope("run-u1.scope", subpath(DEAD2)), mount(subpath(DEAD2)), mount(subpath(DEAD))]
    node = FakeNode(units)
    result = mount_units_cleanup.run(node, root=root, state="absent", process_guard=False)
    assert result["stopped_units"] == [mount_units_systemd.systemd_escape_path(subpath(DEAD)) + ".mount"]
    assert result["kept_by_guard"] == 2
    assert {k["reason"] for k in result["kept_units"]} == {"volumes mounted"}


def test_a_pod_still_starting_is_never_cleaned(make_tree):
    """The race: kubelet made pods/<uid>/ and is mounting a slow volume (its transient mount scope is
    already there); no sandbox yet, no volume mounted, no process - only the fresh directory shows the
    pod. Its scope is kept; the same scope of a pod whose directory is a day old is stopped."""
    import os  # pylint: disable=import-outside-toplevel
    import time  # pylint: disable=import-outside-toplevel
    root = make_tree({"/proc/self/mountinfo": "1 0 0:1 / / rw - overlay overlay rw\n",
                      "%s/%s/volumes" % (PODS, DEAD2): None, "%s/%s/volumes" % (PODS, DEAD): None})
    day_ago = time.time() - 86400
    for path in ("%s/%s" % (PODS, DEAD), "%s/%s/volumes" % (PODS, DEAD)):
        os.utime(root + path, (day_ago, day_ago))
    units = [scope("run-u1.scope", subpath(DEAD2)), scope("run-u2.scope", subpath(DEAD))]
    result = mount_units_cleanup.run(FakeNode(units), root=root, state="absent", process_guard=False)
    assert result["stopped_units"] == ["run-u2.scope"], result
    assert len(result["kept_units"]) == 1 and result["kept_units"][0]["pod_uid"] == DEAD2
    assert "kubelet may still be starting the pod" in result["kept_units"][0]["reason"]


def test_process_guard_keeps_a_pod_with_running_processes(make_tree):
    files = {
        "/proc/1/cgroup": "0::/init.scope\n",
        "/proc/200/cgroup": ("12:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/"
                             "cri-containerd-%s.scope\n0::/\n" % (DEAD2.replace("-", "_"), "a" * 64)),
        "/proc/300/cgroup": "0::/kubepods/besteffort/pod%s/%s\n" % (STATIC, "b" * 64),
        "/proc/400/cgroup": "0::/kubepods.slice/kubepods-pod%s.slice/cri-containerd-%s.scope\n" % (STATIC2, "c" * 64),
        "/proc/self/mountinfo": "",
    }
    root = make_tree(files)
    units = [scope("run-u1.scope", subpath(DEAD2)), scope("run-u2.scope", subpath(STATIC)),
             scope("run-u3.scope", subpath(DEAD)), scope("run-u4.scope", subpath(STATIC2))]
    assert mount_units_pods.process_guard(root) == {DEAD2: {"pod processes running"}, STATIC: {"pod processes running"},
                                                    STATIC2: {"pod processes running"}}
    node = FakeNode(units)
    result = mount_units_cleanup.run(node, root=root, state="absent")
    assert result["stopped_units"] == ["run-u3.scope"]
    assert {k["reason"] for k in result["kept_units"]} == {"pod processes running"}
    node2 = FakeNode(units)
    assert mount_units_cleanup.run(node2, root=root, state="absent", process_guard=False)["stopped"] == 4


# --- apply: batches, failed units, reload ---------------------------------------

@pytest.mark.parametrize("method", ["systemctl", "transaction"])
def test_ten_thousand_units_take_a_constant_number_of_calls(tmp_path, method):
    units = [scope("run-r%032x.scope" % i, subpath(DEAD, idx=i)) for i in range(10000)]
    units += [mount(subpath(DEAD2, idx=i)) for i in range(2000)]
    node = FakeNode(units, pods=[{"uid": LIVE}])
    result = _run(node, tmp_path, batch_size=5000, stop_method=method)
    stops = [c for c in node.calls if c[1] == "stop" or c[0].endswith("/systemd-run")]
    if method == "systemctl":
        want = 3
    else:
        # the 10,000 scopes in transactions, each list ONE argv string under the kernel's 131072 bytes; the
        # 2,000 mount units ("\x2d" in their names) in one systemctl stop
        txs = [c for c in stops if c[0].endswith("/systemd-run")]
        names = sum(len(next(a for a in c if a.startswith("--property=After=")).split()) for c in txs)
        assert names == 10000 and all(len(a) < 131072 for c in txs for a in c)
        assert [len(c) - 2 for c in stops if c[1] == "stop"] == [2000]
        want = len(stops)
        assert 3 < want <= 10000 // 2000 + 1   # still a handful of calls, not one per unit
        assert result["transactions"] == want - 1 and result["fallbacks"] == 0
    assert result["stop_method"] == method
    assert result["stopped"] == 12000 and result["stop_calls"] == want == len(stops)
    assert len(result["stopped_units"]) == 100   # capped at list_limit
    words = [c[1] for c in node.calls]
    assert words.count("list-units") == 2 and words.count("show") == 0
    assert len(node.calls) == 1 + 1 + 2 + want + 1   # version, list, crictl x2, the stops, list
    for call in node.calls:
        assert sum(len(a) + 9 for a in call) <= mount_units_systemd.argv_budget() + 200


def test_failed_after_stop_is_reset_by_name_and_stuck_units_fail(tmp_path):
    units = [scope("run-u1.scope", subpath(DEAD)), scope("run-u2.scope", subpath(DEAD, idx=1)),
             scope("run-u3.scope", subpath(DEAD, idx=2), active="failed", sub="failed"),
             scope("run-u4.scope", subpath(DEAD, idx=3)),
             other("unrelated.service", "Unrelated", active="failed", sub="failed")]
    node = FakeNode(units, stop_leaves_failed=["run-u2.scope"], stop_stuck=["run-u4.scope"])
    result = _run(node, tmp_path, pod_source="list")
    resets = [c for c in node.calls if c[1] == "reset-failed"]
    assert len(resets) == 1 and sorted(resets[0][2:]) == ["run-u2.scope", "run-u3.scope"]
    assert result["reset_failed"] == 2
    assert result["failed"] is True and result["still_active_units"] == ["run-u4.scope"]
    assert "still active" in result["msg"]
    assert "unrelated.service" in node.names()


def test_dead_mount_units_need_daemon_reload(tmp_path):
    units = [mount(subpath(DEAD, idx=i), active="inactive", sub="dead") for i in range(3)]
    node = FakeNode(units, version=229)
    result = _run(node, tmp_path, pod_source="list")
    assert result["dead_mount_units"] == 3 and result["changed"] is False and node.count("daemon-reload") == 0
    result = _run(node, tmp_path, pod_source="list", daemon_reload=True)
    assert result["daemon_reload"] is True and result["changed"] is True and node.count("daemon-reload") == 1
    assert result["systemd"]["has_fix"] is False
    again = _run(node, tmp_path, pod_source="list", daemon_reload=True)
    assert again["changed"] is False and node.count("daemon-reload") == 1


def test_idempotent_second_run(tmp_path):
    node = FakeNode([scope("run-u1.scope", subpath(DEAD)), mount(subpath(DEAD))])
    assert _run(node, tmp_path)["changed"] is True
    second = _run(node, tmp_path)
    # the first run: the scope in one transaction, the mount unit with systemctl stop; the second: nothing
    assert second["changed"] is False and second["total"] == 0 and node.count("stop") == 2


def test_bad_options():
    for opts in ({"pod_source": "kubectl"}, {"batch_size": 0}):
        with pytest.raises(mount_units_errors.MountUnitsError):
            mount_units_survey.normalize_options(opts)
    with pytest.raises(mount_units_errors.MountUnitsError):
        mount_units_cleanup.run(FakeNode(), state="present")


def test_no_systemctl():
    with pytest.raises(mount_units_errors.MountUnitsError) as exc:
        mount_units_cleanup.run(FakeNode(missing=["systemctl"]))
    assert "systemctl not found" in exc.value.msg


# --- node_audit detector ---------------------------------------------------------

def _ids(facts):
    return sorted(f["id"] for f in facts["findings"])


def test_check_reports_leaks_and_old_systemd(tmp_path):
    units = [scope("run-u1.scope", subpath(DEAD)), mount(subpath(DEAD2), active="inactive", sub="dead"),
             scope("run-u2.scope", subpath(LIVE))]
    node = FakeNode(units, pods=[{"uid": LIVE}], version=232)
    facts = mount_units_detect.check(node, root=str(tmp_path), process_guard=False)
    assert _ids(facts) == ["mount_units.dead_mount_units", "mount_units.leaked_scopes",
                           "mount_units.systemd_without_fix"]
    assert facts["mount_units"]["orphaned"] == 2 and node.count("stop") == 0
    for f in facts["findings"]:
        assert f["fix"]["role"] == "nodefix.k8s.mount_units"


def test_check_healthy_node(tmp_path):
    node = FakeNode([scope("run-u2.scope", subpath(LIVE))], pods=[{"uid": LIVE}])
    facts = mount_units_detect.check(node, root=str(tmp_path), process_guard=False)
    assert facts["findings"] == [] and facts["mount_units"]["kept_live"] == 1


def test_check_runtime_unavailable_judges_nothing(tmp_path):
    node = FakeNode([scope("run-u1.scope", subpath(DEAD))], missing=["crictl"])
    facts = mount_units_detect.check(node, root=str(tmp_path), process_guard=False)
    assert _ids(facts) == ["mount_units.runtime_unavailable"]
    assert facts["mount_units"]["unverified"] == 1 and facts["mount_units"]["orphaned"] == 0


def test_check_near_unit_limit(tmp_path):
    node = FakeNode([other("x%d.service" % i, "x") for i in range(70000)])
    facts = mount_units_detect.check(node, root=str(tmp_path))
    assert _ids(facts) == ["mount_units.near_unit_limit"]
    assert facts["findings"][0]["severity"] == "high"
    node = FakeNode([other("x%d.service" % i, "x") for i in range(120000)])
    assert mount_units_detect.check(node, root=str(tmp_path))["findings"][0]["severity"] == "critical"


def test_check_without_systemd(tmp_path):
    facts = mount_units_detect.check(FakeNode(missing=["systemctl"]), root=str(tmp_path))
    assert facts["findings"] == [] and "systemctl not found" in facts["mount_units"]["error"]


def test_a_listing_that_fails_is_a_failed_check_never_a_clean_node(tmp_path):
    """systemctl list-units failing (a hung or broken systemd) is not 'no leaked units'."""
    from ansible_collections.nodefix.k8s.plugins.module_utils._audit import checks as audit_checks
    node = FakeNode(fail={"systemctl list-units": (1, "", "Failed to list units: Connection timed out")})
    with pytest.raises(mount_units_errors.MountUnitsError):
        mount_units_detect.check(node, root=str(tmp_path))
    result = audit_checks.run_checks(node, root=str(tmp_path), checks=["mount_units"])
    assert [f["id"] for f in result["findings"]] == ["audit.check_failed"]


def test_findings_registry_shape():
    for fid, entry in mount_units_detect.FINDINGS.items():
        assert fid.startswith("mount_units.") and fid == fid.lower()
        assert set(entry) == {"severity", "title", "remedy", "role", "tag"}


# --- standalone (the role's timer): no Ansible at all ---------------------------

FAKE_SYSTEMCTL = r"""#!/bin/sh
echo "$@" >> "$FAKE_DIR/calls"
case "$1" in
  --version) echo "systemd 232" ;;
  list-units) cat "$FAKE_DIR/units" ;;
  stop) shift; for u in "$@"; do grep -v -F "$u " "$FAKE_DIR/units" > "$FAKE_DIR/u.tmp"; mv "$FAKE_DIR/u.tmp" "$FAKE_DIR/units"; done ;;
  *) exit 1 ;;
esac
"""


def shipped_files():
    """The module_utils files roles/mount_units/tasks/schedule.yml ships to the node (meta/node_files.yml)."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "meta", "node_files.yml")
    with open(path) as fh:
        return yaml.safe_load(fh)["mount_units_cli"]["module_utils"]


def _standalone_tree(tmp_path):
    """Copy the module_utils files the timer ships (as schedule.yml lists them), nothing else."""
    src = os.path.dirname(os.path.dirname(mount_units_cleanup.__file__))   # module_utils
    dst = tmp_path / "lib" / "ansible_collections" / "nodefix" / "k8s" / "plugins" / "module_utils"
    dst.mkdir(parents=True)
    names = shipped_files()
    assert "_mount_units/cleanup.py" in names and "_mount_units/__init__.py" in names
    for name in names:
        (dst / name).parent.mkdir(exist_ok=True)
        shutil.copy(os.path.join(src, name), str(dst / name))
    return str(tmp_path / "lib")


def test_standalone_cli_runs_without_ansible(tmp_path):
    lib = _standalone_tree(tmp_path)
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "systemctl").write_text(FAKE_SYSTEMCTL)
    (fake / "systemctl").chmod(0o755)
    crictl = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "lab", "crictl-double", "crictl")
    with open(crictl) as fh:   # the tree keeps the double without a shebang; installers add one
        (fake / "crictl").write_text("#!%s\n%s" % (sys.executable, fh.read()))
    (fake / "crictl").chmod(0o755)
    (fake / "state.json").write_text(json.dumps({"pods": [{"uid": LIVE}]}))
    lines = ["run-u1.scope loaded active running Kubernetes transient mount for %s" % subpath(DEAD),
             "run-u2.scope loaded active running Kubernetes transient mount for %s" % subpath(LIVE),
             "cron.service loaded active running Regular background program processing daemon"]
    (fake / "units").write_text("\n".join(lines) + "\n")
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"state": "absent", "pod_source": "crictl", "process_guard": False,
                               "root": str(tmp_path)}))
    env = {"PATH": "%s:/usr/bin:/bin" % fake, "FAKE_DIR": str(fake), "CRICTL_DOUBLE_STATE": str(fake / "state.json")}
    code = ("import sys; sys.path.insert(0, %r); "
            "from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units.cleanup import cli; "
            "assert 'ansible' not in sys.modules and not any(m.startswith('ansible.') for m in sys.modules); "
            "sys.exit(cli(['--config', %r]))" % (lib, str(cfg)))
    # -S: no site-packages, so Ansible cannot be imported even by accident; -E: ignore PYTHON* variables
    proc = subprocess.run([sys.executable, "-S", "-E", "-c", code], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    result = json.loads(proc.stdout)
    assert result["stopped_units"] == ["run-u1.scope"] and result["systemd"]["has_fix"] is False
    assert "run-u2.scope" in (fake / "units").read_text() and "cron.service" in (fake / "units").read_text()
    # runtime down: exit 1, nothing stopped
    (fake / "state.json").write_text(json.dumps({"pods": [{"uid": LIVE}], "fail": True}))
    (fake / "units").write_text("\n".join(lines) + "\n")
    proc = subprocess.run([sys.executable, "-S", "-E", "-c", code], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["failed"] is True
    assert "run-u1.scope" in (fake / "units").read_text()
    assert not any(c.startswith("stop") for c in (fake / "calls").read_text().splitlines()[-3:])


def test_check_says_when_a_reboot_beats_the_cleanup(tmp_path):
    # 12,000 leaked scopes of dead pods, estimated on the measured curve of systemd 252 and the method a
    # cleanup would use (one transaction a batch: systemd-run is on the fake node)
    units = [scope("run-u%d.scope" % i, subpath(DEAD)) for i in range(12000)]
    node = FakeNode(units, pods=[{"uid": LIVE}])
    est = mount_units_cost.estimate_seconds(12000 + 6, 12000, 252, "transaction")
    assert est > mount_units_cost.estimate_seconds(100, 100, 252, "transaction") > 0
    facts = mount_units_detect.check(node, root=str(tmp_path), process_guard=False, reboot_over_seconds=est / 2)
    slow = [f for f in facts["findings"] if f["id"] == "mount_units.cleanup_slow"]
    # fixed by the mount_units role's reboot path (tag mount_units_reboot), when remediate drained the node
    assert len(slow) == 1 and slow[0]["fix"]["role"] == "nodefix.k8s.mount_units"
    loaded = facts["mount_units"]["systemd"]["units_total"]
    assert loaded == 12006 and slow[0]["evidence"]["estimate_seconds"] == est
    assert "one transaction" in slow[0]["evidence"]["estimate_basis"]
    assert "mount_units.cleanup_slow" not in _ids(mount_units_detect.check(node, root=str(tmp_path), process_guard=False,
                                                                           reboot_over_seconds=est * 2))
    # the default threshold (an hour) is not reached at this scale, and 0 turns it off
    assert "mount_units.cleanup_slow" not in _ids(mount_units_detect.check(node, root=str(tmp_path), process_guard=False))
    assert "mount_units.cleanup_slow" not in _ids(mount_units_detect.check(node, root=str(tmp_path), process_guard=False,
                                                                           reboot_over_seconds=0))
