# SPDX-License-Identifier: GPL-3.0-or-later
"""Property test: over random mixes of live, dead, guarded and unparseable units,
the cleanup never selects a unit of a live pod nor an unattributable one, and
selects every well-formed unit of a dead, unguarded pod.

Each generated unit carries its ground truth (the pod it was made for, or
"none" when its path is garbage or ambiguous); the whole pipeline runs on it:
``systemctl list-units`` text -> (``systemctl show`` for hashed names) ->
``crictl`` JSON -> mountinfo guard -> selection.
"""

import hashlib
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import units as mount_units_units
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import cleanup as mount_units_cleanup
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import systemd as mount_units_systemd
from test_mount_units_fakes import FakeNode, mount, other, scope

ROOTS = ["/var/lib/kubelet", "/data/kubelet"]
STATES = [("active", "running"), ("active", "mounted"), ("inactive", "dead"), ("failed", "failed"),
          ("activating", "start"), ("deactivating", "stop-sigterm")]


def _uid(n, static=False):
    if static:
        return hashlib.md5(str(n).encode()).hexdigest()
    return str(uuid.UUID(int=(n * 0x9E3779B97F4A7C15) % (1 << 128)))


unit_spec = st.fixed_dictionaries({
    "kind": st.sampled_from(["scope", "mount"]),
    "owner": st.sampled_from(["live", "dead", "guarded"]),
    "pod": st.integers(0, 7),
    "static": st.booleans(),
    "variant": st.sampled_from(["subpath", "subpath", "subpath", "volume", "upper", "slashes", "dotdot",
                                "dot", "not_uid", "outside", "plugins", "other_root", "empty", "hashed",
                                "bad_scope_name", "trailing"]),
    "scheme": st.sampled_from(["r", "u", "pid"]),
    "state": st.sampled_from(STATES),
    "vol": st.text(alphabet="abc-_~. 1", min_size=1, max_size=6).filter(lambda v: v.strip(".") != ""),
})

mix = st.fixed_dictionaries({
    "units": st.lists(unit_spec, min_size=0, max_size=30),
    "root": st.sampled_from(ROOTS),
    "runtime_via_containers": st.booleans(),
})


def build(spec, i, root, live, dead, guarded):
    pods = root + "/pods"
    pool = {"live": live, "dead": dead, "guarded": guarded}[spec["owner"]]
    uid = pool[spec["pod"] % len(pool)]
    truth = spec["owner"]
    v = spec["variant"]
    tail = "volume-subpaths/%s/app/%d" % (spec["vol"], i)
    path = "%s/%s/%s" % (pods, uid, tail)
    if v == "volume":
        path = "%s/%s/volumes/kubernetes.io~configmap/%s-%d" % (pods, uid, spec["vol"], i)
    elif v == "upper":
        path = "%s/%s/%s" % (pods, uid.upper(), tail)
    elif v == "slashes":
        path = "%s//%s///%s" % (pods, uid, tail)
    elif v == "trailing":
        path = "%s/%s/%s/" % (pods, uid, tail)
    elif v == "dotdot":
        path = "%s/%s/../%s/%s" % (pods, live[0], uid, tail)
        truth = "none"
    elif v == "dot":
        path = "%s/./%s/%s" % (pods, uid, tail)
        truth = "none"
    elif v == "not_uid":
        path = "%s/%s-x/%s" % (pods, uid, tail)
        truth = "none"
    elif v == "outside":
        path = "/srv/%s/%s" % (uid, tail)
        truth = "unrelated"
    elif v == "plugins":
        path = "%s/plugins/kubernetes.io/csi/pv/%s/globalmount" % (root, uid)
        truth = "unrelated"
    elif v == "other_root":
        other_root = [r for r in ROOTS if r != root][0]
        path = "%s/pods/%s/%s" % (other_root, uid, tail)
        truth = "unrelated"
    elif v == "empty":
        path = ""
        truth = "unrelated" if spec["kind"] == "mount" else "none"
    active, sub = spec["state"]
    if spec["kind"] == "scope":
        names = {"r": "run-r%032x.scope" % (i + 1), "u": "run-u%d.scope" % i, "pid": "run-%d.scope" % (1000 + i)}
        name = names[spec["scheme"]]
        if v == "bad_scope_name":
            name = "kubelet-%d.scope" % i
            truth = "none"
        if truth == "unrelated":
            truth = "none"   # a kubelet description pointing elsewhere is kubelet's but unattributable
        return scope(name, path, active=active, sub=sub), truth
    if v == "empty":
        return other("empty%d.mount" % i, "not a path", active=active, sub=sub), truth
    if v == "hashed":
        name = "var-lib-kubelet-pods-%s-%016x.mount" % (mount_units_systemd.systemd_escape_path(uid), i)
        return mount(path, name=name, active=active, sub=sub), truth
    if v == "bad_scope_name":
        return mount(path, active=active, sub=sub), truth
    return mount(path, active=active, sub=sub), truth


# The guarded pods' mountinfo depends only on the kubelet root (the guarded pods are the same in every case): one fake
# /proc per root for the whole module, not one directory made per example (1500 of them before).
_FAKE_ROOTS = {}


def _fake_root(tmp_path_factory, root, guarded):
    if root not in _FAKE_ROOTS:
        fake_root = tmp_path_factory.mktemp("root")
        (fake_root / "proc" / "self").mkdir(parents=True)
        lines = ["%d 1 0:%d / %s/pods/%s/volumes/kubernetes.io~secret/token rw - tmpfs tmpfs rw"
                 % (100 + n, 50 + n, root, g) for n, g in enumerate(guarded)]
        (fake_root / "proc" / "self" / "mountinfo").write_text("\n".join(lines) + "\n")
        _FAKE_ROOTS[root] = fake_root
    return _FAKE_ROOTS[root]


# 500 examples: a unit's fate is decided by its own (kind, owner, variant, state) - 2 x 3 x 14 x 6 = 504 classes, the
# scheme and static bits on top - and an example holds up to 30 units, so 500 examples draw ~7500 units, a dozen or more
# of each class, beside the mixes of several pods' units (name collisions, live and dead units side by side) the lists
# make; 1500 drew the same classes three times as often and cost three times the CPU (hypothesis's drawing is 2/3 of it).
# Not derandomized: each run draws new examples.
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mix)
def test_no_live_pod_unit_is_ever_selected(tmp_path_factory, case):
    root = case["root"]
    live = [_uid(n, static=(n % 3 == 0)) for n in range(1, 4)]
    dead = [_uid(n, static=(n % 3 == 0)) for n in range(10, 14)]
    guarded = [_uid(n) for n in range(20, 22)]
    built = [build(spec, i, root, live, dead, guarded) for i, spec in enumerate(case["units"])]
    units = [u for u, _t in built]
    truth = dict((u["unit"], t) for u, t in built)
    if len(truth) != len(units):
        return  # two specs produced the same unit name: not a node systemd could have
    if case["runtime_via_containers"]:
        node = FakeNode(units, pods=[{"uid": live[0]}], containers=[{"pod_uid": u} for u in live[1:]])
    else:
        node = FakeNode(units, pods=[{"uid": u} for u in live])
    fake_root = _fake_root(tmp_path_factory, root, guarded)

    result = mount_units_cleanup.run(node, root=str(fake_root), state="absent", kubelet_root_dir=root, list_limit=0,
                                     process_guard=False)
    touched = node.touched()   # systemctl stop/reset-failed and the transactions' names
    for name in touched:
        assert truth.get(name) == "dead", "%s (%s) was touched" % (name, truth.get(name))
    for name, t in truth.items():
        if t in ("live", "guarded", "none", "unrelated"):
            assert name in node.names(), "%s (%s) disappeared" % (name, t)
    # and the cleanup is not vacuous: every dead unit that was up is stopped
    for u, t in built:
        if t == "dead" and u["active"] in mount_units_units.ACTIVE_STATES_TO_STOP:
            assert u["unit"] in result["stopped_units"], u
    assert result["kept_live"] == sum(1 for t in truth.values() if t in ("live", "guarded"))
    assert result["unattributable"] == sum(1 for t in truth.values() if t == "none")


# 200 examples: the classification is per unit over three owners and whether the runtime was read (6 cases), in lists
# of up to 50 units - 200 examples draw thousands of units, every case hundreds of times; 1000 added nothing but CPU.
@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["live", "dead", "none"]), max_size=50), st.booleans())
def test_classify_alone(owners, runtime_known):
    live_uid, dead_uid = _uid(1), _uid(2)
    units = []
    for i, owner in enumerate(owners):
        uid = {"live": live_uid, "dead": dead_uid, "none": None}[owner]
        units.append({"unit": "run-u%d.scope" % i, "kind": "scope", "load": "loaded", "active": "active",
                      "sub": "running", "pod_uid": uid, "reason": None, "owner": owner})
    mount_units_units.classify(units, {live_uid: "crictl"}, {}, runtime_known=runtime_known)
    for u in units:
        if u["action"] is not None:
            assert u["owner"] == "dead" and runtime_known
