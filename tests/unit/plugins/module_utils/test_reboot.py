# SPDX-License-Identifier: GPL-3.0-or-later
"""_reboot (does the node ask for a reboot, and why) and _reboot.gate (kured's controls) over fake
node trees, a fake clock and an in-memory API that answers as the API server does (409 on a taken
name or a stale resourceVersion)."""

import datetime

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._kernel import boot_record as kernel_boot_record
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import detect as reboot_detect
from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate as reboot_gate_lib
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError

UTC = datetime.timezone.utc


class FakeRunner(object):
    """bin/run of the Runner interface: {name: (rc, stdout, stderr)}; a name not given is absent."""

    def __init__(self, answers=None):
        self.answers = answers or {}
        self.calls = []

    def bin(self, name, required=False, opt_dirs=None):
        return "/usr/bin/" + name if name in self.answers else None

    def run(self, argv, check=True, data=None, msg=None):
        self.calls.append(argv)
        return self.answers[argv[0].rsplit("/", 1)[-1]]


def node(make_tree, running="6.1.0-28-amd64", kernels=("6.1.0-28-amd64",), extra=None):
    files = {"/proc/sys/kernel/osrelease": running + "\n", "/proc/sys/kernel/random/boot_id": "b-1\n"}
    files.update(("/boot/vmlinuz-%s" % k, "") for k in kernels)
    files.update(extra or {})
    return make_tree(files)


def test_a_quiet_node_needs_no_reboot(make_tree):
    out = reboot_detect.check(FakeRunner({"systemctl": (0, "running\n", "")}), root=node(make_tree))
    assert out["findings"] == [] and out["pending"] is False and out["systemd_state"] == "running"
    assert out["boot_id"] == "b-1" and out["running_release"] == "6.1.0-28-amd64"


def test_reboot_required_file_names_its_packages(make_tree):
    root = node(make_tree, extra={"/var/run/reboot-required": "*** System restart required ***\n",
                                  "/var/run/reboot-required.pkgs": "libc6\nlinux-base\nlibc6\n"})
    out = reboot_detect.check(FakeRunner(), root=root)
    assert [f["id"] for f in out["findings"]] == ["reboot.required"]
    assert out["findings"][0]["evidence"]["packages"] == ["libc6", "linux-base"]
    assert out["reasons"] == [{"id": "reboot.required", "check": "reboot",
                               "reason": "/var/run/reboot-required exists (packages: libc6, linux-base)"}]


def test_newer_kernel_installed_numbers_compare_as_numbers(make_tree):
    root = node(make_tree, running="6.1.0-9-amd64", kernels=("6.1.0-9-amd64", "6.1.0-10-amd64"))
    out = reboot_detect.check(FakeRunner(), root=root)
    assert out["newest_kernel"] == "6.1.0-10-amd64"
    assert [f["id"] for f in out["findings"]] == ["reboot.kernel_not_running"]
    # the newest installed is the running one: nothing
    out = reboot_detect.check(FakeRunner(), root=node(make_tree, running="6.12.95+deb12-amd64",
                                                      kernels=("6.1.0-28-amd64", "6.12.95+deb12-amd64")))
    assert out["findings"] == []


def test_a_kernel_that_failed_to_boot_is_no_reason(make_tree):
    root = node(make_tree, kernels=("6.1.0-28-amd64", "6.12.95+deb12-amd64"),
                extra={kernel_boot_record.RECORD: '{"failed": {"6.12.95+deb12-amd64": {"at": "2026-11-25T10:00:00Z"}}}'})
    out = reboot_detect.check(FakeRunner(), root=root)
    assert out["findings"] == [] and list(out["failed_kernels"]) == ["6.12.95+deb12-amd64"]


def test_needs_restarting_counts_and_its_failure_is_not_clean(make_tree):
    root = node(make_tree)
    out = reboot_detect.check(FakeRunner({"needs-restarting": (1, "Core libraries or services have been updated:\n"
                                                               "  kernel -> 5.14.0-427\nReboot is required\n", "")}), root=root)
    assert [f["id"] for f in out["findings"]] == ["reboot.required"]
    assert "needs-restarting -r" in out["findings"][0]["evidence"]["reasons"][0]
    with pytest.raises(NodefixError) as exc:
        reboot_detect.check(FakeRunner({"needs-restarting": (2, "", "no dnf")}), root=root)
    assert "needs-restarting -r failed (rc=2)" in exc.value.msg


def test_two_reasons_of_one_id_are_one_finding(make_tree):
    root = node(make_tree, extra={"/var/run/reboot-required": ""})
    out = reboot_detect.check(FakeRunner({"needs-restarting": (1, "Reboot is required\n", "")}), root=root)
    assert [f["id"] for f in out["findings"]] == ["reboot.required"]
    assert len(out["findings"][0]["evidence"]["reasons"]) == 2


# -- the window -----------------------------------------------------------------------------------

def at(text):
    return datetime.datetime.strptime(text, "%Y-%m-%d %H:%M").replace(tzinfo=UTC)


def test_window_days_and_hours():
    window = reboot_gate_lib.Window(["Monday", "tue"], "22:00", "23:30")
    assert window.contains(at("2026-11-23 22:10"))          # a Monday
    assert not window.contains(at("2026-11-23 21:59"))
    assert not window.contains(at("2026-11-25 22:10"))      # a Wednesday
    assert window.describe() == "mon,tue 22:00:00-23:30:00 UTC"


def test_window_wraps_past_midnight_in_its_time_zone():
    window = reboot_gate_lib.Window(None, "22:00", "04:00", "Europe/Berlin")
    assert window.contains(at("2026-11-25 02:30"))          # 03:30 in Berlin
    assert not window.contains(at("2026-11-25 03:30"))      # 04:30 in Berlin
    assert window.contains(at("2026-11-25 21:30"))          # 22:30 in Berlin


@pytest.mark.parametrize("kwargs, message", [
    ({"days": ["funday"]}, "is not a day of the week"),
    ({"days": ["sunset"]}, "is not a day of the week"),
    ({"days": ["Monitoring"]}, "is not a day of the week"),
    ({"days": ["fridayyyy"]}, "is not a day of the week"),
    ({"days": ["7"]}, "is not a day of the week"),
    ({"days": []}, "no day would ever allow a reboot"),
    ({"start": "25:00"}, "is not a time of day"),
    ({"end": "13pm"}, "is not a time of day"),
    ({"end": "10:5"}, "is not a time of day"),
    ({"start": "10:00", "end": "10:00"}, "an empty window"),
    ({"time_zone": "Mars/Olympus"}, "is not an IANA time zone"),
    ({"time_zone": "Europe"}, "is not an IANA time zone"),           # a directory of the zone database
    ({"time_zone": "../../etc/passwd"}, "is not an IANA time zone"),
    ({"time_zone": "Europe/Berlin\x00"}, "is not an IANA time zone"),
])
def test_window_bad_input_names_the_problem(kwargs, message):
    with pytest.raises(NodefixError) as exc:
        reboot_gate_lib.Window(**kwargs)
    assert message in exc.value.msg


@pytest.mark.parametrize("days, expected", [
    (["mo", "we"], ["mon", "wed"]),
    (["0,4"], ["thu", "sun"]),                               # kured counts from Sunday
    (["SU", "Sat", "FRIDAY", "tu"], ["tue", "fri", "sat", "sun"]),
    (["1", "2", "3", "4", "5", "6", "0"], list(reboot_gate_lib.DAYS)),
])
def test_window_days_in_kureds_spellings(days, expected):
    assert reboot_gate_lib.Window(days).days == expected


@pytest.mark.parametrize("text, hour, minute, second", [
    ("15:04", 15, 4, 0), ("15:04:05", 15, 4, 5), ("9am", 9, 0, 0), ("3pm", 15, 0, 0), ("03pm", 15, 0, 0),
    ("11:30pm", 23, 30, 0), ("03:04pm", 15, 4, 0), ("12am", 0, 0, 0), ("12pm", 12, 0, 0), ("15", 15, 0, 0),
    ("7", 7, 0, 0), ("9:30", 9, 30, 0), ("00:01am", 0, 1, 0), ("0am", 0, 0, 0), ("00pm", 12, 0, 0),
])
def test_window_times_in_kureds_spellings(text, hour, minute, second):
    assert reboot_gate_lib.parse_time(text, "start") == datetime.time(hour, minute, second)


def minutes_open(window, first, last):
    """Minutes (sampled each minute, UTC) the window is open between two UTC times."""
    t, count = at(first), 0
    while t <= at(last):
        count += window.contains(t)
        t += datetime.timedelta(minutes=1)
    return count


def test_window_across_the_autumn_transition_lasts_its_duration():
    # 2026-10-25: Europe/Berlin goes from 03:00 CEST back to 02:00 CET (01:00 UTC); 02:00-02:30 happens twice
    window = reboot_gate_lib.Window(None, "02:00", "02:30", "Europe/Berlin")
    assert minutes_open(window, "2026-10-24 22:00", "2026-10-25 04:00") == 31      # 00:00-00:30 UTC, ends inclusive
    assert window.contains(at("2026-10-25 00:10")) and not window.contains(at("2026-10-25 01:10"))
    # a window spanning the repeated hour: 60 elapsed minutes, not 120
    window = reboot_gate_lib.Window(None, "02:30", "03:30", "Europe/Berlin")
    assert minutes_open(window, "2026-10-24 22:00", "2026-10-25 04:00") == 61


def test_window_across_the_spring_transition_lasts_its_duration():
    # 2026-03-29: Europe/Berlin skips 02:00-03:00 (01:00 UTC); 02:00-02:30 does not exist that day
    window = reboot_gate_lib.Window(None, "02:00", "02:30", "Europe/Berlin")
    assert minutes_open(window, "2026-03-28 22:00", "2026-03-29 04:00") == 31      # 03:00-03:30 CEST
    assert window.contains(at("2026-03-29 01:15")) and not window.contains(at("2026-03-29 00:45"))
    window = reboot_gate_lib.Window(None, "01:30", "03:30", "Europe/Berlin")
    assert minutes_open(window, "2026-03-28 22:00", "2026-03-29 04:00") == 121


def test_a_window_past_midnight_belongs_to_the_day_it_opened_when_asked():
    window = reboot_gate_lib.Window(["mon"], "22:00", "04:00", wrap="opening_day")
    assert window.contains(at("2026-11-23 23:00"))           # Monday night
    assert window.contains(at("2026-11-24 03:00"))           # ... into Tuesday morning
    assert not window.contains(at("2026-11-23 03:00"))       # Monday morning is Sunday's night
    assert window.describe() == "mon 22:00:00-04:00:00 UTC (past midnight: the day it opened on)"


def test_a_window_past_midnight_belongs_to_the_day_of_the_local_time_by_default():
    window = reboot_gate_lib.Window(["mon"], "22:00", "04:00")   # kured's reading
    assert window.wrap == "kured"
    assert window.contains(at("2026-11-23 23:00"))           # Monday night
    assert not window.contains(at("2026-11-24 03:00"))       # Tuesday morning is Tuesday's
    assert window.contains(at("2026-11-23 03:00"))           # Monday morning is Monday's
    assert window.describe() == "mon 22:00:00-04:00:00 UTC (past midnight: the day of the local time)"
    with pytest.raises(NodefixError) as exc:
        reboot_gate_lib.Window(["mon"], "22:00", "04:00", wrap="sunday")
    assert "window wrap 'sunday' is not one of kured, opening_day" in exc.value.msg


@pytest.mark.parametrize("wrap", ["kured", "opening_day"])
def test_the_wrap_keeps_the_daylight_saving_behaviour(wrap):
    # every day, or a window that does not wrap: the same either way, DST included
    window = reboot_gate_lib.Window(None, "02:30", "03:30", "Europe/Berlin", wrap=wrap)
    assert minutes_open(window, "2026-10-24 22:00", "2026-10-25 04:00") == 61
    window = reboot_gate_lib.Window(None, "22:00", "04:00", "Europe/Berlin", wrap=wrap)
    assert window.contains(at("2026-11-25 02:30")) and not window.contains(at("2026-11-25 03:30"))
    # a wrapping window across the spring transition: opened Saturday 2026-03-28 23:00 CET (22:00 UTC), it
    # lasts its 4.5 elapsed hours (to 02:30 UTC, 04:30 CEST: the skipped hour does not shorten it)
    window = reboot_gate_lib.Window(["sun"], "23:00", "03:30", "Europe/Berlin", wrap=wrap)
    opened_sat = minutes_open(window, "2026-03-28 21:00", "2026-03-29 03:00")
    # kured: its Sunday part (Sunday 00:00 CET = 23:00 UTC .. 02:30 UTC, ends inclusive); opening day: none of
    # it, Saturday's night is not Sunday's
    assert opened_sat == (211 if wrap == "kured" else 0)


# -- alerts ---------------------------------------------------------------------------------------

ALERTS = {"status": "success", "data": {"alerts": [
    {"labels": {"alertname": "Watchdog"}, "state": "firing"},
    {"labels": {"alertname": "KubeNodeNotReady"}, "state": "firing"},
    {"labels": {"alertname": "DiskFilling"}, "state": "pending"}]}}


def test_firing_alerts_hold_except_the_filtered():
    assert reboot_gate_lib.blocking_alerts(ALERTS, reboot_gate_lib.alert_filter("^Watchdog$")) == ["KubeNodeNotReady"]
    every = ["DiskFilling", "KubeNodeNotReady", "Watchdog"]
    assert reboot_gate_lib.blocking_alerts(ALERTS, None, firing_only=False) == every
    assert reboot_gate_lib.blocking_alerts({"status": "success", "data": {"alerts": []}}) == []
    with pytest.raises(NodefixError):
        reboot_gate_lib.alert_filter("(")


@pytest.mark.parametrize("body", [
    {"status": "error", "error": "bad"},
    {"status": "success", "data": {}},
    {"status": "success", "data": {"alerts": None}},
    {"status": "success", "data": {"alerts": {}}},
    {"status": "success", "data": {"alerts": "x"}},
    {"status": "success", "data": {"alerts": [None]}},
    {"status": "success", "data": {"alerts": [{"labels": {"alertname": "A"}}]}},               # no state
    {"status": "success", "data": {"alerts": [{"labels": {"alertname": "A"}, "state": "FIRING"}]}},
    {"status": "success", "data": {"alerts": [{"labels": ["alertname", "A"], "state": "firing"}]}},
    {"status": "success", "data": {"alerts": [{"labels": {"alertname": ["A"]}, "state": "firing"}]}},
    {"status": "success", "data": {"alerts": [{"labels": {}, "state": "firing"}]}},           # no alertname
    {"status": "success", "warnings": ["rule group source unreachable"], "data": {"alerts": []}},
    [], "success", None,
])
def test_only_a_well_formed_answer_says_no_alerts(body):
    with pytest.raises(reboot_gate_lib.MalformedAnswer):
        reboot_gate_lib.blocking_alerts(body)


@pytest.mark.parametrize("body", [
    {"status": "success", "warnings": ["store https://u:WarnS3cret62@thanos-store:10901 unreachable"],
     "data": {"alerts": []}},
    {"status": "error", "error": "upstream said password=WarnS3cret62", "data": None},
    {"status": "success", "data": {"alerts": [{"labels": {"alertname": ["token=WarnS3cret62"]}, "state": "firing"}]}},
    {"status": "success", "data": {"alerts": [{"labels": {"alertname": "A"}, "state": "token=WarnS3cret62"}]}},
    {"status": "success", "data": {"alerts": "password: WarnS3cret62"}},
], ids=["warning", "body", "labels", "state", "data"])
def test_a_malformed_answer_quotes_the_server_redacted(body):
    """What holds the reboot names what was wrong, redacted by shape before it is cut (the server's warnings and
    body quote what it was given: a store's URL with its credentials)."""
    with pytest.raises(reboot_gate_lib.MalformedAnswer) as err:
        reboot_gate_lib.blocking_alerts(body)
    assert "WarnS3cret62" not in err.value.msg and "<redacted by nodefix.k8s>" in err.value.msg, err.value.msg


# -- the lock -------------------------------------------------------------------------------------

class FakeLeases(object):
    """Leases as the API server keeps them: create refuses a taken name, replace and delete a stale
    resourceVersion; every accepted write is logged with the holder."""

    def __init__(self):
        self.leases = {}
        self.version = 0
        self.log = []

    def _store(self, name, body):
        self.version += 1
        lease = {"metadata": dict(body["metadata"], resourceVersion=str(self.version)), "spec": dict(body["spec"])}
        self.leases[name] = lease
        self.log.append(("write", name, body["spec"]["holderIdentity"]))

    def get_lease(self, namespace, name):
        return self.leases.get(name)

    def create_lease(self, namespace, body):
        if body["metadata"]["name"] in self.leases:
            return False
        self._store(body["metadata"]["name"], body)
        return True

    def replace_lease(self, namespace, name, body):
        if self.leases[name]["metadata"]["resourceVersion"] != body["metadata"].get("resourceVersion"):
            return False
        self._store(name, body)
        return True

    def delete_lease(self, namespace, name, resource_version):
        assert self.leases[name]["metadata"]["resourceVersion"] == resource_version
        del self.leases[name]
        self.log.append(("delete", name, None))


def clock(text):
    def now():
        return at(text)
    return now


def lock(api, holder, slots=1, ttl=0, now=None, observed=None):
    return reboot_gate_lib.LeaseLock(api, "kube-system", "nodefix-reboot", slots, holder, ttl,
                                     now=now or clock("2026-11-25 12:00"), observed=observed)


def test_one_slot_one_holder_and_a_rerun_keeps_its_slot():
    api = FakeLeases()
    assert lock(api, "node-a").acquire("kernel")[0] == "nodefix-reboot-0"
    slot, holders = lock(api, "node-b").acquire("kernel")
    assert slot is None and [h["holder"] for h in holders] == ["node-a"]
    assert lock(api, "node-a").acquire("again")[0] == "nodefix-reboot-0"
    assert len(api.log) == 1                                 # the re-run wrote nothing
    assert lock(api, "node-b").release() is None             # b holds nothing
    assert lock(api, "node-a").release() == "nodefix-reboot-0"
    assert lock(api, "node-b").acquire("kernel")[0] == "nodefix-reboot-0"


def test_two_slots_and_dry_run_writes_nothing():
    api = FakeLeases()
    assert lock(api, "a", slots=2).acquire()[0] == "nodefix-reboot-0"
    assert lock(api, "b", slots=2).acquire(dry_run=True)[0] == "nodefix-reboot-1"
    assert len(api.log) == 1
    assert lock(api, "b", slots=2).acquire()[0] == "nodefix-reboot-1"
    assert lock(api, "c", slots=2).acquire()[0] is None


def test_a_lost_race_is_not_a_slot():
    api = FakeLeases()
    api.create_lease("kube-system", {"metadata": {"name": "nodefix-reboot-0"}, "spec": {"holderIdentity": ""}})
    original = api.get_lease
    reads = []

    def read_then_lose(namespace, name):
        lease = original(namespace, name)
        reads.append(name)
        if len(reads) == 2:  # b has read the free slot for taking it: c writes it before b's update
            api.replace_lease(namespace, name, {"metadata": {"name": name, "resourceVersion":
                                                             lease["metadata"]["resourceVersion"]},
                                                "spec": {"holderIdentity": "c"}})
        return lease
    api.get_lease = read_then_lose
    slot, holders = lock(api, "b").acquire()
    assert slot is None and [h["holder"] for h in holders] == ["c"]
    assert [entry[2] for entry in api.log] == ["", "c"]     # b's stale update was refused


def test_ttl_lets_an_abandoned_slot_be_taken_over():
    api = FakeLeases()
    lock(api, "gone", ttl=600).acquire()
    seen = {}
    # first seen at 12:00 on this controller's clock, whatever its renewTime says
    assert lock(api, "b", ttl=600, now=clock("2026-11-25 12:00"), observed=seen).acquire()[0] is None
    assert lock(api, "b", ttl=600, now=clock("2026-11-25 12:09"), observed=seen).acquire()[0] is None
    assert lock(api, "b", ttl=600, now=clock("2026-11-25 12:11"), observed=seen).acquire()[0] == "nodefix-reboot-0"
    # without a TTL a slot is never taken over
    api2 = FakeLeases()
    lock(api2, "gone").acquire()
    assert lock(api2, "b", now=lambda: at("2027-01-01 00:00"), observed={}).acquire()[0] is None


def test_expiry_never_compares_another_controllers_clock():
    """A controller 10 minutes ahead of the holder's: the holder's renewTime looks 11 minutes old
    to it, yet the slot is taken 1 minute ago. Only what this controller saw itself counts."""
    api = FakeLeases()
    lock(api, "a", ttl=600, now=clock("2026-11-25 12:00")).acquire()
    seen = {}
    fast = lock(api, "b", ttl=600, now=clock("2026-11-25 12:11"), observed=seen)
    assert fast.acquire()[0] is None                          # first look: not expired
    assert lock(api, "b", ttl=600, now=clock("2026-11-25 12:20"), observed=seen).acquire()[0] is None
    # a renewal (a new resourceVersion) restarts the observation
    lease = api.leases["nodefix-reboot-0"]
    api.replace_lease("kube-system", "nodefix-reboot-0", {"metadata": dict(lease["metadata"]),
                                                          "spec": dict(lease["spec"], renewTime="x")})
    assert lock(api, "b", ttl=600, now=clock("2026-11-25 12:22"), observed=seen).acquire()[0] is None
    assert lock(api, "b", ttl=600, now=clock("2026-11-25 12:31"), observed=seen).acquire()[0] is None
    assert lock(api, "b", ttl=600, now=clock("2026-11-25 12:32"), observed=seen).acquire()[0] == "nodefix-reboot-0"
    # a's release finds its slot taken over: nothing deleted, and it says by whom
    a = lock(api, "a", ttl=600)
    assert a.release(slot="nodefix-reboot-0") is None
    assert a.taken_over["holder"] == "b" and api.leases["nodefix-reboot-0"]["spec"]["holderIdentity"] == "b"


# -- after the reboot: which reasons are gone --------------------------------------------------------

REASONS = [{"id": "kernel.dying_memcgs", "check": "kernel", "reason": "1500 dying"},
           {"id": "reboot.required", "check": "reboot", "reason": "/var/run/reboot-required exists"}]


def test_a_reason_is_gone_only_when_its_detector_ran():
    ran = {"checks": {"kernel": {"release": "6.12"}, "reboot": {"systemd_state": "running"}}, "findings": []}
    assert reboot_detect.reasons_after(ran, REASONS) == {"open": [], "unchecked": []}
    still = dict(ran, findings=[{"id": "reboot.required", "check": "reboot"}])
    assert reboot_detect.reasons_after(still, REASONS) == {"open": ["reboot.required"], "unchecked": []}
    # the kernel detector failed after the boot: its finding is absent, but that proves nothing
    blind = {"checks": {"kernel": {"error": "cannot read /sys/fs/cgroup"}, "reboot": {"systemd_state": "running"}},
             "findings": [{"id": "audit.check_failed", "check": "kernel", "subject": "kernel"}]}
    assert reboot_detect.reasons_after(blind, REASONS) == {"open": [], "unchecked": ["kernel"]}
    # a check_failed finding alone is enough, and so is a detector that did not run at all
    half = {"checks": {"kernel": {}, "reboot": {}}, "findings": [{"id": "audit.check_failed", "subject": "reboot"}]}
    assert reboot_detect.reasons_after(half, REASONS)["unchecked"] == ["reboot"]
    assert reboot_detect.reasons_after({"checks": {"reboot": {}}}, REASONS)["unchecked"] == ["kernel"]
    assert reboot_detect.reasons_after({}, REASONS)["unchecked"] == ["kernel", "reboot"]


@pytest.mark.parametrize("audit, reasons", [(None, REASONS), ([], REASONS), ({}, "x"), ({}, [{"check": "k"}])])
def test_reasons_after_refuses_what_it_cannot_read(audit, reasons):
    with pytest.raises(NodefixError):
        reboot_detect.reasons_after(audit, reasons)


@pytest.mark.parametrize("running, kernels, pending", [
    # another flavour of the same version is not newer: the reason would never clear
    ("6.1.0-28-amd64", ("6.1.0-28-amd64", "6.1.0-28-cloud-amd64"), False),
    ("6.1.0-28-amd64", ("6.1.0-28-amd64", "6.1.0-28-rt-amd64"), False),
    ("5.15.0-91-generic", ("5.15.0-91-generic", "5.15.0-91-lowlatency"), False),
    ("6.8.0-1012-aws", ("6.8.0-1012-aws", "6.8.0-1012-generic"), False),
    ("6.1.0-28-cloud-amd64", ("6.1.0-28-cloud-amd64", "6.1.0-30-cloud-amd64"), True),
    ("6.1.0-28-amd64", ("6.1.0-28-amd64", "6.12.95+deb12-amd64"), True),
])
def test_only_a_newer_kernel_of_the_running_flavour_is_a_reason(make_tree, running, kernels, pending):
    out = reboot_detect.check(FakeRunner(), root=node(make_tree, running=running, kernels=kernels))
    assert out["pending"] is pending, out


def test_el_debug_kernels_compare_in_rpm_order(make_tree):
    el = "5.14.0-427.13.1.el9_4.x86_64"
    extra = {"/etc/os-release": 'ID="rocky"\nID_LIKE="rhel centos fedora"\n'}
    out = reboot_detect.check(FakeRunner(), root=node(make_tree, running=el, kernels=(el, el + "+debug"), extra=extra))
    assert out["pending"] is False
    newer = "5.14.0-503.el9.x86_64"
    out = reboot_detect.check(FakeRunner(), root=node(make_tree, running=el, kernels=(el, newer), extra=extra))
    assert out["newest_kernel"] == newer and out["pending"] is True


class FakeLeasesAndNodes(FakeLeases):
    """The Leases, and the holders' Nodes with their Ready condition (None: the cluster has no such Node)."""

    def __init__(self, ready):
        super(FakeLeasesAndNodes, self).__init__()
        self.ready = ready

    def get_node(self, name):
        if name not in self.ready:
            return None
        if self.ready[name] == "error":
            raise NodefixError("reading Node %s: no answer from the API server" % name)
        return {"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": self.ready[name]}]}}


@pytest.mark.parametrize("ready,taken", [("True", True), ("False", False), ("Unknown", False), ("error", False),
                                         ("absent", True)])
def test_an_expired_slot_of_a_node_that_is_not_back_stays_held(ready, taken):
    """The TTL frees a dead run's slot only when its holder is back (or gone from the cluster): a node that went
    down in its reboot and is not back keeps it, so no other node reboots beside it."""
    api = FakeLeasesAndNodes({} if ready == "absent" else {"node-a": ready})
    lock(api, "node-a", ttl=600).acquire()
    seen = {}
    assert lock(api, "b", ttl=600, now=clock("2026-11-25 12:00"), observed=seen).acquire()[0] is None
    got = lock(api, "b", ttl=600, now=clock("2026-11-25 12:11"), observed=seen).acquire()[0]
    assert (got == "nodefix-reboot-0") is taken, (ready, got)
