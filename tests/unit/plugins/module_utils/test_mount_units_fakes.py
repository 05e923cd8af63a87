# SPDX-License-Identifier: GPL-3.0-or-later
"""A fake node for the _mount_units tests: systemd units, a CRI runtime, docker.

``FakeNode`` implements the ``Runner`` interface (``bin``, ``run``) and answers
``systemctl --version|list-units|show|stop|reset-failed|daemon-reload``,
``crictl pods|ps -o json`` and ``docker ps -a --format`` in the real output
formats (captured from systemd 252 on the lab image).
``systemctl stop`` really changes the fake state, so a test can check what
is left afterwards. Every call is recorded in ``calls``.

``systemd-run`` (``stop_method=transaction``) is a double of the real contract, checked against
systemd 247/252/257 in the lab (molecule mount_units, benchmarks/mount_units): it reads
``--property=Conflicts=`` the way ``systemd-run -p`` splits a dependency list (a backslash escapes the
next character: ``a\\x2db.scope`` unquoted is ``ax2db.scope``), stops those units like one
``systemctl stop`` but answers 0 (the oneshot's start succeeds whatever the stops did); with
``refuse_transactions`` it answers as systemd does for job mode ``fail`` with nothing stopped, with
``transaction_dies`` it stops them and then answers 124 (killed), and below systemd 236 it does not
know ``--collect``.
"""

import json

from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import units as mount_units_units
from ansible_collections.nodefix.k8s.plugins.module_utils._mount_units import systemd as mount_units_systemd

PODS = "/var/lib/kubelet/pods"


def scope(name, path, active="active", sub="running", load="loaded"):
    return {"unit": name, "load": load, "active": active, "sub": sub,
            "description": mount_units_units.SCOPE_DESCRIPTION_PREFIX + path}


def mount(path, active="active", sub="mounted", load="loaded", name=None, description=None):
    return {"unit": name or mount_units_systemd.systemd_escape_path(path) + ".mount", "load": load, "active": active, "sub": sub,
            "description": path if description is None else description, "where": path}


def other(name, description, active="active", sub="running"):
    return {"unit": name, "load": "loaded", "active": active, "sub": sub, "description": description}


def subpath(uid, vol="cfg", ctr="app", idx=0, pods=PODS):
    return "%s/%s/volume-subpaths/%s/%s/%d" % (pods, uid, vol, ctr, idx)


BASE_UNITS = [
    other("init.scope", "System and Service Manager"),
    other("-.mount", "Root Mount", sub="mounted"),
    other("tmp.mount", "/tmp", sub="mounted"),
    other("home.mount", "home.mount", active="inactive", sub="dead"),
    other("systemd-journald.service", "Journal Service"),
    other("dbus.socket", "D-Bus System Message Bus Socket", sub="listening"),
]


class FakeNode(object):
    def __init__(self, units=None, pods=None, containers=None, version=252, crictl=True, docker_lines=None,
                 fail=None, stop_fails=None, stop_leaves_failed=None, stop_stuck=None, missing=(),
                 refuse_transactions=False, transaction_dies=False):
        self.units = [dict(u) for u in BASE_UNITS + list(units or [])]
        self.pods = list(pods or [])            # crictl sandboxes: dicts with uid (or None), state
        self.containers = list(containers or [])  # dicts with pod_uid label
        self.version = version
        self.docker_lines = docker_lines
        self.fail = dict(fail or {})            # command word -> (rc, stdout, stderr)
        self.stop_leaves_failed = set(stop_leaves_failed or ())
        self.stop_stuck = set(stop_stuck or ())
        self.stop_fails = stop_fails
        self.missing = set(missing)
        self.calls = []
        self.crictl = crictl
        self.refuse_transactions = refuse_transactions
        self.transaction_dies = transaction_dies

    # Runner interface
    def bin(self, name, required=False, opt_dirs=None):
        base = name.rsplit("/", 1)[-1]
        if base in self.missing:
            return None
        return name if name.startswith("/") else "/usr/bin/" + name

    def run(self, argv, check=True, data=None, msg=None):
        self.calls.append(list(argv))
        tool = argv[0].rsplit("/", 1)[-1]
        args = list(argv[1:])
        if tool == "systemd-run":
            if "systemd-run" in self.fail:
                return self.fail["systemd-run"]
            return self._systemd_run(args)
        if tool == "crictl":
            while args and args[0].startswith("--runtime-endpoint"):
                args = args[2:]
        word = args[0] if args else ""
        key = "%s %s" % (tool, word)
        if key in self.fail:
            return self.fail[key]
        handler = getattr(self, "_%s_%s" % (tool, word.replace("-", "_")), None)
        if handler is None:
            raise AssertionError("unexpected command %r" % (argv,))
        return handler(args[1:])

    # systemctl
    def _systemctl___version(self, args):
        return 0, "systemd %d (%d.1-1)\n+PAM +AUDIT\n" % (self.version, self.version), ""

    def _systemctl_list_units(self, args):
        assert args == ["--all", "--plain", "--no-legend", "--full"], args
        width = max(len(u["unit"]) for u in self.units)
        lines = ["%s %s %s %s %s" % (u["unit"].ljust(width), u["load"].ljust(9), u["active"].ljust(8),
                                     u["sub"].ljust(7), u["description"]) for u in self.units]
        return 0, "\n".join(lines) + "\n", ""

    def _systemctl_show(self, args):
        assert args[0] == "-p"
        blocks = []
        byname = dict((u["unit"], u) for u in self.units)
        for name in args[2:]:
            u = byname.get(name)
            if u is None:
                blocks.append("Id=%s\nDescription=%s\nLoadState=not-found\nActiveState=inactive\nSubState=dead\n"
                              % (name, name))
                continue
            text = ""
            if name.endswith(".mount"):
                text += "Where=%s\n" % u.get("where", "")
            text += "Id=%s\nDescription=%s\nLoadState=%s\nActiveState=%s\nSubState=%s\n" % (
                name, u["description"], u["load"], u["active"], u["sub"])
            blocks.append(text)
        return 0, "\n".join(blocks), ""

    def _systemctl_stop(self, args):
        rc, err = 0, ""
        keep = []
        names = set(args)
        for u in self.units:
            if u["unit"] not in names:
                keep.append(u)
            elif u["unit"] in self.stop_stuck:
                keep.append(u)
                rc, err = 1, "Job for %s failed.\n" % u["unit"]
            elif u["unit"] in self.stop_leaves_failed:
                keep.append(dict(u, active="failed", sub="failed"))
        known = set(u["unit"] for u in self.units)
        for n in names - known:
            rc, err = 5, "Failed to stop %s: Unit %s not loaded.\n" % (n, n)
        self.units = keep
        return rc, "", err

    def _systemd_run(self, args):
        opts = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
        props = [a[len("--property="):] for a in args if a.startswith("--property=")]
        assert opts["unit"].startswith("nodefix-mount-units-stop-") and opts["service-type"] == "oneshot", args
        assert "--collect" in args and "--quiet" in args and args[-1].endswith("/true"), args
        if self.version < 236:
            return 1, "", "systemd-run: unrecognized option '--collect'\n"
        deps = dict((k, unquote_words(v)) for k, v in (p.split("=", 1) for p in props))
        assert deps["DefaultDependencies"] == ["no"] and deps["Conflicts"][0] == "shutdown.target", deps
        assert deps["Conflicts"][1:] == deps["After"], "the start must wait for every stop it asks for"
        if self.refuse_transactions:
            return 1, "", ("Failed to start transient service unit: Transaction for %s/start is destructive "
                           "(%s has 'start' job queued, but 'stop' is included in transaction).\n"
                           % (opts["unit"], deps["After"][0]))
        self._systemctl_stop(deps["After"])
        if self.transaction_dies:
            # the stops were queued and done, then systemd-run died (a deadline, a bus timeout)
            return 124, "", "systemd-run: killed after 30.0 s (no answer before the deadline)\n"
        return 0, "", ""

    def _systemctl_reset_failed(self, args):
        names = set(args)
        self.units = [u for u in self.units if not (u["unit"] in names and u["active"] == "failed")]
        return 0, "", ""

    def _systemctl_daemon_reload(self, args):
        self.units = [u for u in self.units if not (u["unit"].endswith(".mount") and u["active"] == "inactive"
                                                    and "kubelet" in u["unit"])]
        return 0, "", ""

    # crictl
    def _crictl_pods(self, args):
        assert args == ["-o", "json"], args
        items = []
        for i, p in enumerate(self.pods):
            meta = {"name": "pod-%d" % i, "namespace": "default", "attempt": 0}
            if p.get("uid") is not None:
                meta["uid"] = p["uid"]
            items.append({"id": "%064x" % (i + 1), "metadata": meta, "state": p.get("state", "SANDBOX_READY"),
                          "createdAt": "1700000000000000000", "labels": {}, "annotations": {}, "runtimeHandler": ""})
        return 0, json.dumps({"items": items}, indent=2), ""

    def _crictl_ps(self, args):
        assert args == ["-a", "-o", "json"], args
        ctrs = [{"id": "%064x" % (i + 100), "podSandboxId": "%064x" % 1, "metadata": {"name": "c", "attempt": 0},
                 "state": c.get("state", "CONTAINER_RUNNING"),
                 "labels": {"io.kubernetes.pod.uid": c["pod_uid"]} if c.get("pod_uid") else {}}
                for i, c in enumerate(self.containers)]
        return 0, json.dumps({"containers": ctrs}, indent=2), ""

    # docker
    def _docker_ps(self, args):
        assert args[:3] == ["-a", "--no-trunc", "--format"], args
        return 0, "".join(line + "\n" for line in (self.docker_lines or [])), ""

    # helpers for assertions
    def names(self):
        return set(u["unit"] for u in self.units)

    def touched(self):
        """Every name a call could have stopped or reset (a transaction's ``After=`` list included)."""
        names = set()
        for c in self.calls:
            if c[0].endswith("/systemd-run"):
                names.update(unquote_words(next(a for a in c if a.startswith("--property=After="))[17:]))
            elif len(c) > 1 and c[1] in ("stop", "reset-failed"):
                names.update(c[2:])
        return names

    def count(self, word):
        """Calls of ``systemctl <word>``; ``stop`` counts the transactions (``systemd-run``) too."""
        return sum(1 for c in self.calls if len(c) > 1 and (c[1] == word or (
            word == "stop" and c[0].rsplit("/", 1)[-1] == "systemd-run")))


def unquote_words(text):
    """A dependency list as ``systemd-run -p`` reads it (extract_first_word, EXTRACT_UNQUOTE): words split on
    whitespace, quotes removed, a backslash taking the next character literally."""
    words, word, quote, escaped, started = [], [], None, False, False
    for ch in text:
        if escaped:
            word.append(ch)
            escaped, started = False, True
        elif ch == "\\":
            escaped, started = True, True
        elif quote:
            if ch == quote:
                quote = None
            else:
                word.append(ch)
        elif ch in "'\"":
            quote, started = ch, True
        elif ch.isspace():
            if started:
                words.append("".join(word))
            word, started = [], False
        else:
            word.append(ch)
            started = True
    if started:
        words.append("".join(word))
    return words
