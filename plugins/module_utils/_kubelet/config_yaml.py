# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: this module_utils file is PRIVATE to the nodefix.k8s collection
# (leading underscore). Its API may change without notice.
"""Reading and writing KubeletConfiguration YAML: ruamel.yaml (round trip), PyYAML, or a
read-only subset reader when neither is on the node; JSON merge patch (one job of the kubelet
detector, see ``_kubelet``)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import json
import re

from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet.schema import KIND, KubeletError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.errors import NodefixError
from ansible_collections.nodefix.k8s.plugins.module_utils._core.lazy_re import lazy_compile

_LIB = {}


def ruamel():
    """ruamel.yaml's ``(YAML, CommentedMap)``, imported on first use; None when the node lacks it
    (``ruamel_error()`` says why). Not at import time: the node-problem-detector plugin imports this
    module every few minutes and only reads, mostly with the subset parser below (~15 ms saved a tick)."""
    if "ruamel" not in _LIB:
        try:
            from ruamel.yaml import YAML  # pylint: disable=import-outside-toplevel
            from ruamel.yaml.comments import CommentedMap  # pylint: disable=import-outside-toplevel
            _LIB.update(ruamel=(YAML, CommentedMap), error=None)
        except ImportError as exc:  # pragma: no cover - depends on the node
            _LIB.update(ruamel=None, error=exc)
    return _LIB["ruamel"]


def ruamel_error():
    """Why ruamel.yaml could not be imported (None when it can)."""
    ruamel()
    return _LIB.get("error")


def new_map():
    """An empty mapping that keeps its order and comments when dumped (a plain dict without ruamel.yaml)."""
    lib = ruamel()
    return lib[1]() if lib else {}


def _pyyaml():
    """PyYAML, imported only when ruamel.yaml is missing (the node-problem-detector plugin runs the
    kubelet detector every few minutes: importing a second YAML library it does not use cost ~10 ms)."""
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:  # pragma: no cover - depends on the node
        return None
    return yaml

# ---------------------------------------------------------------------------
# YAML
# ---------------------------------------------------------------------------


def _rt_yaml(text=None):
    yml = ruamel()[0](typ="rt")
    yml.preserve_quotes = True
    yml.width = 4096
    offset = 0
    if text:
        # keep the file's sequence style: "key:\n- a" (kubeadm) or "key:\n  - a"
        prev_indent = None
        for line in text.splitlines():
            stripped = line.lstrip()
            if not stripped or stripped.startswith("#"):
                continue
            ind = len(line) - len(stripped)
            if stripped.startswith("- ") and prev_indent is not None:
                offset = max(0, ind - prev_indent)
                break
            if stripped.endswith(":"):
                prev_indent = ind
            else:
                prev_indent = None
    yml.indent(mapping=2, sequence=offset + 2, offset=offset)
    return yml


# Read-only fallback when neither ruamel.yaml nor PyYAML is on the node
# (node_audit must still work there): the YAML subset KubeletConfiguration
# files use - block mappings and sequences, flow {} / [], plain and quoted
# scalars, comments. The same parser is in lab/kubelet-double/kubelet.

class YamlError(NodefixError):
    """Input outside the YAML subset, or malformed."""


def _strip_comment(line):
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def _split_key(content, lineno, strict=False):
    quote = None
    for i, c in enumerate(content):
        if quote:
            if c == quote:
                quote = None
        elif c in "\"'" and i == 0:
            quote = c
        elif c == ":" and (i + 1 == len(content) or content[i + 1] in " \t"):
            return _scalar(content[:i].strip(), lineno, strict), content[i + 1:].strip()
    return None, None


def _split_flow(text):
    parts, depth, quote, cur = [], 0, None, []
    for c in text:
        if quote:
            cur.append(c)
            if c == quote:
                quote = None
            continue
        if c in "\"'":
            quote = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(c)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


# strict mode (the read-only fast path): a plain scalar is taken only when its meaning is the same in
# YAML 1.2 (ruamel.yaml's default) and 1.1 (PyYAML) and plain to this parser: decimal integers without
# leading zeros or "_", simple decimal floats, the 1.2 null/bool words, and strings that no resolver of
# either version could read as another type (no leading digit/sign/dot/indicator unless dotted like an
# address, none of 1.1's yes/no/on/off/y/n). Anything else: YamlError, and a YAML library decides.
_STRICT_INT = lazy_compile(r"^[-+]?(0|[1-9][0-9]*)$")
_STRICT_FLOAT = lazy_compile(r"^[-+]?(0|[1-9][0-9]*)\.[0-9]+$")
_STRICT_STR = lazy_compile(r"^([A-Za-z/][A-Za-z0-9_./=@%+-]*"          # a word, a path, an API version
                           r"|[0-9]+(\.[0-9]+){2,}"                    # an address, a version
                           r"|[0-9]+(\.[0-9]+)?%"                      # a percentage
                           # a quantity or a duration: the first letter is none of a float's exponent
                           # or an int's base (1e3, 0x1f, 0o17, 0b1 are numbers)
                           r"|[0-9][0-9.]*[AC-DF-NP-WYZacdf-npq-wyz][A-Za-z0-9.]*)$")
_YAML11_WORDS = frozenset("y Y yes Yes YES n N no No NO on On ON off Off OFF".split())
# the null and bool words of YAML 1.2's core schema (also read so by 1.1): both parsers
_NULL_WORDS = ("", "~", "null", "Null", "NULL")
_BOOL_WORDS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}


def _strict_plain(t, lineno):
    """A plain scalar that is not a null or bool word (_scalar read those), in strict mode."""
    if _STRICT_INT.match(t):
        return int(t)
    if _STRICT_FLOAT.match(t):
        return float(t)
    if t in _YAML11_WORDS or not _STRICT_STR.match(t) or t.lower() in (".inf", ".nan", "null", "true", "false"):
        raise YamlError("line %d: %r left to a YAML library" % (lineno, t))
    return t


def _scalar(text, lineno, strict=False):
    t = text.strip()
    if t.startswith(("|", ">", "&", "*", "!")):
        raise YamlError("line %d: unsupported YAML construct %r" % (lineno, t[:10]))
    if strict and t.startswith(("{", "[")) and (
            "\\" in t or (t[1:-1].strip() and any(not part for part in _split_flow(t[1:-1] + ",")))):
        raise YamlError("line %d: a flow collection left to a YAML library" % lineno)
    if t.startswith("{"):
        if not t.endswith("}"):
            raise YamlError("line %d: unterminated flow mapping" % lineno)
        out = {}
        for part in _split_flow(t[1:-1]):
            k, v = _split_key(part, lineno, strict)
            if k is None:
                raise YamlError("line %d: bad flow mapping entry %r" % (lineno, part))
            if strict and k in out:
                raise YamlError("line %d: mapping key %r already defined" % (lineno, k))
            out[k] = _scalar(v, lineno, strict)
        return out
    if t.startswith("["):
        if not t.endswith("]"):
            raise YamlError("line %d: unterminated flow sequence" % lineno)
        return [_scalar(p, lineno, strict) for p in _split_flow(t[1:-1])]
    if t.startswith('"'):
        if len(t) < 2 or not t.endswith('"'):
            raise YamlError("line %d: unterminated double-quoted string" % lineno)
        try:
            return json.loads(t)
        except ValueError:
            raise YamlError("line %d: bad double-quoted string" % lineno)
    if t.startswith("'"):
        if len(t) < 2 or not t.endswith("'") or (strict and "'" in t[1:-1].replace("''", "")):
            raise YamlError("line %d: unterminated single-quoted string" % lineno)
        return t[1:-1].replace("''", "'")
    if t in _NULL_WORDS:
        return None
    if t in _BOOL_WORDS:
        return _BOOL_WORDS[t]
    if strict:
        return _strict_plain(t, lineno)
    if re.match(r"^[-+]?[0-9]+$", t):
        return int(t)
    if re.match(r"^[-+]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$", t):
        return float(t)
    if t.startswith(("]", "}", "`", "@")) or ": " in t:
        raise YamlError("line %d: cannot parse %r" % (lineno, t))
    return t


# Long on purpose (96 lines): a small indentation parser's state machine reads best as one loop.
def subset_yaml_load(text, strict=False):
    """A YAML subset: block mappings/sequences, flow {}/[], plain/quoted scalars, comments.

    ``strict``: only what reads the same in every YAML library (see _strict_plain); YamlError otherwise."""
    lines = []
    for no, raw in enumerate(text.splitlines(), 1):
        if raw.strip() in ("---",) and not lines:
            continue
        body = _strip_comment(raw).rstrip()
        if not body.strip():
            continue
        lead = body[:len(body) - len(body.lstrip())]
        if "\t" in lead:
            raise YamlError("line %d: found a tab character used for indentation" % no)
        lines.append([len(lead), body.strip(), no])
    if not lines:
        return None
    if lines[0][1].startswith(("{", "[")) and len(lines) == 1:
        return _scalar(lines[0][1], lines[0][2], strict)
    if strict and (text.lstrip().startswith(("{", "[", "%")) or any(c[1] in ("---", "...") for c in lines)
                   or re.search(r"[^\x20-\x7e\n]", text)):
        raise YamlError("a JSON document, a directive or several documents: left to a YAML library")
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise YamlError("invalid JSON: %s" % exc)
    pos = [0]

    def is_item(content):
        return content == "-" or content.startswith("- ")

    def node(indent):
        if pos[0] >= len(lines):
            return None
        ind, content, _no = lines[pos[0]]
        if ind < indent:
            return None
        if is_item(content):
            return seq(ind)
        return mapping(ind)

    def mapping(ind):
        out = {}
        while pos[0] < len(lines):
            cur_ind, content, no = lines[pos[0]]
            if cur_ind < ind:
                break
            if cur_ind > ind:
                raise YamlError("line %d: bad indentation of a mapping entry" % no)
            if is_item(content):
                break
            key, rest = _split_key(content, no, strict)
            if key is None:
                raise YamlError("line %d: could not find expected ':'" % no)
            if key in out:
                raise YamlError("line %d: mapping key %r already defined" % (no, key))
            pos[0] += 1
            if rest == "":
                if pos[0] < len(lines) and lines[pos[0]][0] > ind:
                    out[key] = node(lines[pos[0]][0])
                elif pos[0] < len(lines) and lines[pos[0]][0] == ind and is_item(lines[pos[0]][1]):
                    out[key] = seq(ind)
                else:
                    out[key] = None
            else:
                out[key] = _scalar(rest, no, strict)
        return out

    def seq(ind):
        out = []
        while pos[0] < len(lines):
            cur_ind, content, no = lines[pos[0]]
            if cur_ind != ind or not is_item(content):
                if cur_ind > ind:
                    raise YamlError("line %d: bad indentation of a sequence entry" % no)
                break
            item = content[1:].strip()
            if item == "":
                pos[0] += 1
                out.append(node(ind + 1))
                continue
            key, _rest = _split_key(item, no, strict)
            if key is not None and not item.startswith(("\"", "'", "{", "[")):
                # "- key: value" starts a mapping whose column is the item's
                lines[pos[0]] = [cur_ind + (len(content) - len(item)), item, no]
                out.append(mapping(lines[pos[0]][0]))
                continue
            pos[0] += 1
            out.append(_scalar(item, no, strict))
        return out

    result = node(0)
    if pos[0] < len(lines):
        raise YamlError("line %d: unexpected content %r" % (lines[pos[0]][2], lines[pos[0]][1]))
    return result


def _read_only_load(text):
    """The document read-only: the strict subset parser, else the first of ruamel.yaml, PyYAML and the
    lenient subset parser the node has (see load_yaml)."""
    try:
        return subset_yaml_load(text, strict=True)
    except YamlError:
        pass
    if ruamel() is not None:
        return ruamel()[0](typ="safe", pure=True).load(text)
    if _pyyaml() is not None:
        return _pyyaml().safe_load(text)
    return subset_yaml_load(text)


def load_yaml(text, path, roundtrip=True):
    """Parse a KubeletConfiguration document; raise KubeletError on malformed input.

    ``roundtrip``: ruamel.yaml's round-trip document (comments, order, quoting kept), for an edit.
    Read-only: the strict subset parser first (the common kubeadm/kubespray files, in a fraction of
    the time a YAML library takes to import), which gives up on anything whose meaning it is not
    sure of; then ruamel.yaml (YAML 1.2), PyYAML, or the lenient subset parser, whichever the node has."""
    if roundtrip and ruamel() is None:
        raise KubeletError("the Python library ruamel.yaml is required on the node to edit %s "
                           "(Debian/Ubuntu: python3-ruamel.yaml)" % path)
    try:
        data = _rt_yaml(text).load(text) if roundtrip else _read_only_load(text)
    except KubeletError:
        raise
    except Exception as exc:  # ruamel/pyyaml raise many error types
        raise KubeletError("%s is not valid YAML: %s" % (path, str(exc).replace("\n", " ")), path=path)
    if data is None:
        data = new_map() if roundtrip else {}
    if not isinstance(data, dict):
        raise KubeletError("%s: expected a KubeletConfiguration mapping, got %s" % (path, type(data).__name__), path=path)
    kind = data.get("kind")
    if kind is not None and kind != KIND:
        raise KubeletError("%s: kind is %r, expected %s" % (path, kind, KIND), path=path)
    return data


def dump_yaml(data, original_text):
    """``data`` as YAML text, leaving every top-level entry whose value did not change byte for byte as it
    was in ``original_text`` (ruamel.yaml's round trip would rewrite ``True`` as ``true``, re-indent maps and
    respace flow lists and comments); only the changed entries come from ruamel.yaml."""
    buf = io.StringIO()
    _rt_yaml(original_text).dump(data, buf)
    dumped = buf.getvalue()
    if not original_text:
        return dumped
    return keep_untouched(original_text, dumped, data)


_TOP_KEY = lazy_compile(r"""^(?:"([^"]+)"|'([^']+)'|([^\s#'"\-][^:#]*?|-[^\s-][^:#]*?))\s*:(?:\s|$)""")


def _segments(text):
    """(head, [(key, text)], tail) of a block mapping document: each entry with the comment and blank lines
    before it and its indented continuation lines; None when the text is not a plain top-level block mapping."""
    head, entries, pending = [], [], []
    for line in text.splitlines(True):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            pending.append(line)
            continue
        if line[0] in " \t" or stripped.startswith("- "):
            if not entries:
                return None
            entries[-1][1].extend(pending + [line])
            pending = []
            continue
        if stripped in ("---", "..."):
            if entries:
                return None  # a second document
            head.extend(pending + [line])
            pending = []
            continue
        m = _TOP_KEY.match(line)
        if not m:
            return None
        key = next(g for g in m.groups() if g is not None).strip()
        entries.append((key, pending + [line]))
        pending = []
    if not entries:
        return None
    return "".join(head), [(k, "".join(lines)) for k, lines in entries], "".join(pending)


def _split_entry(text):
    """(lines up to and with the ``key:`` line, child indent, dedented body) of a block-map entry; None
    when the key line carries a value (flow map, anchor, tag) or the body is not indented."""
    lines = text.splitlines(True)
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break
    else:
        return None
    if not re.match(r"^\S.*:\s*(#.*)?$", lines[i].rstrip("\n")) or _TOP_KEY.match(lines[i]) is None:
        return None
    body = lines[i + 1:]
    indents = [len(b) - len(b.lstrip(" ")) for b in body if b.strip() and not b.strip().startswith("#")]
    if not indents or min(indents) == 0 or any("\t" in b[:len(b) - len(b.lstrip())] for b in body):
        return None
    indent = min(indents)
    dedented = []
    for b in body:
        if not b.strip():
            dedented.append(b.lstrip(" "))
        elif b.startswith(" " * indent):
            dedented.append(b[indent:])
        else:
            return None  # a comment less indented than the entries: leave the entry to ruamel.yaml
    return "".join(lines[:i + 1]), indent, "".join(dedented)


def _merge_map_entry(orig_entry, new_entry, wanted):
    """A changed block-map entry: unchanged child entries byte for byte from ``orig_entry``, changed and
    new ones from ``new_entry`` at the original's indentation; None when either is not a plain block map."""
    o, n = _split_entry(orig_entry), _split_entry(new_entry)
    if o is None or n is None:
        return None
    body = keep_untouched(o[2], n[2], wanted)
    pad = " " * o[1]
    return o[0] + "".join(pad + line if line.strip() else line for line in body.splitlines(True))


def keep_untouched(original_text, dumped, data):
    """Merge: unchanged top-level entries from ``original_text``, changed and new ones from ``dumped``.

    Checked by parsing the result: when it does not give ``data`` (or either text is not a plain block
    mapping), the full ruamel.yaml dump is returned instead.
    """
    orig, new = _segments(original_text), _segments(dumped)
    if orig is None or new is None:
        return dumped
    try:
        before = plain(_rt_yaml(original_text).load(original_text))
    except Exception:  # pylint: disable=broad-except
        return dumped
    wanted = plain(data)
    orig_entries = dict(orig[1])
    if len(orig_entries) != len(orig[1]) or not isinstance(before, dict):
        return dumped  # a duplicate key: let ruamel.yaml's text stand
    out = [orig[0]]
    for key, text in new[1]:
        if key in orig_entries and key in before and key in wanted and before[key] == wanted[key]:
            out.append(orig_entries[key])
        elif key in orig_entries and isinstance(before.get(key), dict) and isinstance(wanted.get(key), dict):
            # a changed map: its unchanged entries stay as they were, one level down
            merged_entry = _merge_map_entry(orig_entries[key], text, wanted[key])
            out.append(merged_entry if merged_entry is not None else text)
        else:
            out.append(text)
    if out[-1] and not out[-1].endswith("\n"):
        out[-1] += "\n"
    out.append(orig[2])
    merged = "".join(out)
    try:
        if plain(_rt_yaml(merged).load(merged)) != wanted:
            return dumped
    except Exception:  # pylint: disable=broad-except
        return dumped
    return merged


def plain(value):
    """Convert ruamel containers to plain Python types."""
    if isinstance(value, dict):
        return dict((str(k), plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch (what kubelet uses for drop-ins)."""
    import copy  # pylint: disable=import-outside-toplevel  # drop-ins only: not every run of the npd plugin
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            result[key] = merge_patch(result.get(key), value)
        else:
            result[key] = copy.deepcopy(value)
    return result
