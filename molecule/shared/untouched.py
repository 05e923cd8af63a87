# SPDX-License-Identifier: GPL-3.0-or-later
"""Untouched text stays byte-identical: compare a file as the layout shipped it with the file
the role left, line by line, and allow a difference only on the lines that carry a setting the
role owns. Used by the kubelet molecule scenarios (testinfra) and checked by
tests/unit/test_molecule_untouched.py against edits that must be refused."""

import difflib
import os
import re

# The settings the kubelet role writes (profile and guard rails) and the flags that
# carried them before the configuration file (the role removes those, never others).
OWNED_KEYS = ("kubeAPIQPS", "kubeAPIBurst", "eventRecordQPS", "eventBurst", "registryPullQPS", "registryBurst",
              "serializeImagePulls", "maxParallelImagePulls", "podPidsLimit", "evictionHard", "systemReserved")
OWNED_FLAGS = ("kube-api-qps", "kube-api-burst", "event-qps", "event-burst", "registry-qps", "registry-burst",
               "serialize-image-pulls", "max-parallel-image-pulls", "pod-max-pids", "eviction-hard",
               "system-reserved")
_SPACE_IN_QUOTES = re.compile(r'="\s|\s"$', re.M)
_FLAG = re.compile(r"--(%s)(=[^\s\"'\\]*)?" % "|".join(re.escape(f) for f in OWNED_FLAGS))


def layout_file(layout, path):
    """The file as lab/kubelet-double/layouts/<layout> ships it (what the node had before the role)."""
    root = os.environ.get("NODEFIX_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "lab", "kubelet-double", "layouts", layout, path.lstrip("/"))) as fh:
        return fh.read()


def changed_blocks(before, after):
    """[(old lines, new lines, old start, new start)] of every place the two texts differ (lines keep
    their ends), with both texts' lines."""
    a, b = before.splitlines(True), after.splitlines(True)
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    return [(a[i1:i2], b[j1:j2], i1, j1) for tag, i1, i2, j1, j2 in ops if tag != "equal"], a, b


def _top_key(lines, index):
    """The top-level YAML key that line ``index`` belongs to (itself when it is one)."""
    for line in reversed(lines[:index + 1]):
        if line[:1] not in (" ", "\t", "#", "-", "\n", ""):
            return line.split(":", 1)[0].strip()
    return None


def yaml_problems(before, after, owned=OWNED_KEYS):
    """Every changed line that is not part of an owned top-level key: [] when the edit is clean."""
    blocks, a, b = changed_blocks(before, after)
    problems = []
    for old, new, i, j in blocks:
        for side, part, start, whole in (("removed", old, i, a), ("added", new, j, b)):
            for offset, line in enumerate(part):
                key = _top_key(whole, start + offset)
                if key not in owned:
                    problems.append("%s line not owned by the role (under %r): %r" % (side, key, line))
    return problems


def env_problems(before, after):
    """Changed env-file lines must be the old lines with owned flags taken out, and nothing else:
    no other token changed, no line left holding only a continuation, no double space left."""
    blocks, _a, _b = changed_blocks(before, after)
    problems = []
    for old, new, _i, _j in blocks:
        if not any(_FLAG.search(line) for line in old):
            problems.append("changed lines carry no flag the role owns: %r -> %r" % (old, new))
        want = _FLAG.sub("", "".join(old))
        if _squash(want) != _squash("".join(new)):
            problems.append("more than the owned flags changed: %r -> %r" % (old, new))
        for line in new:
            if re.match(r"^\s*\\\n?$", line):
                problems.append("a line holding only a continuation is left: %r" % line)
            if "  " in line.strip():
                problems.append("a double space is left: %r" % line)
            if _SPACE_IN_QUOTES.search(line) and not any(_SPACE_IN_QUOTES.search(o) for o in old):
                problems.append("a space is left inside the quotes: %r" % line)
    return problems


def _squash(text):
    # what a shell sees of the words: continuations joined, runs of blanks as one
    return " ".join(text.replace("\\\n", " ").split()).replace('" ', '"').replace(' "', '"')
