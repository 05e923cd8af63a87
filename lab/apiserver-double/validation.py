# -*- coding: utf-8 -*-
# Copyright (c) nodefix.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the kube-apiserver TEST DOUBLE (apiserver.py) refuses, as Kubernetes refuses it.

Each rule is transcribed from Kubernetes' source (the file named at the rule; paths are in the
kubernetes/kubernetes repository, apimachinery and apiserver under staging/src/k8s.io/), with the real
server's status code and message: a validation failure is a 422 ``Invalid`` Status whose message is
``<Kind> "<name>" is invalid: <errors>`` and whose ``details.causes`` carry each error's ``reason``
(``FieldValueInvalid``, ...), ``message`` and ``field`` - apimachinery pkg/api/errors/errors.go NewInvalid
and pkg/util/validation/field/errors.go (Error, ErrorBody, ToAggregate). Field paths are the ones the real
server writes: an events.k8s.io/v1 Event is validated as the internal core Event, so its note is
``message`` and its ``regarding`` is ``involvedObject`` (pkg/apis/core/validation/events.go).

Go's ``len()`` counts bytes: every length here is of the UTF-8 encoding. The wording is that of the
double's claimed version (v1.29; apimachinery's IsQualifiedName then said "a qualified name").

Pure functions over the request bodies: each ``*_errors`` returns a list of field errors, ``invalid()``
turns them into the Status. This is a test double's validation, not Kubernetes'.
"""

import re

# --- apimachinery pkg/util/validation/field/errors.go --------------------------------------------------

TYPES = {"FieldValueRequired": "Required value", "FieldValueInvalid": "Invalid value",
         "FieldValueTooLong": "Too long", "FieldValueForbidden": "Forbidden", "FieldValueNotSupported": "Unsupported value"}
# ErrorBody prints no value for these types
NO_VALUE = ("FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong")


def go_quote(text):
    """Go's %q of a string (strconv.Quote): printable characters kept, the rest escaped."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\a\b\f\n\r\t\v":
            out.append({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}[ch])
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif code < 0x80:
            out.append("\\x%02x" % code)
        elif code < 0x10000:
            out.append("\\u%04x" % code)
        else:
            out.append("\\U%08x" % code)
    return "".join(out + ['"'])


def _value(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    return repr(value)


def error(etype, field, value, detail):
    """One field error: {type, field, body} (body: ErrorBody, the message without the field)."""
    body = TYPES[etype] if etype in NO_VALUE else "%s: %s" % (TYPES[etype], _value(value))
    if detail:
        body += ": " + detail
    return {"type": etype, "field": field, "body": body}


def required(field, detail=""):
    return error("FieldValueRequired", field, "", detail)


def invalid_value(field, value, detail):
    return error("FieldValueInvalid", field, value, detail)


def too_long(field, limit):
    """field.TooLong: "must have at most N bytes" (no value printed)."""
    return error("FieldValueTooLong", field, "", "must have at most %d bytes" % limit)


def forbidden(field, detail):
    return error("FieldValueForbidden", field, "", detail)


def message(errors):
    """ErrorList.ToAggregate().Error(): the errors deduplicated, one as itself, more in [a, b]."""
    seen = []
    for e in errors:
        text = "%s: %s" % (e["field"], e["body"])
        if text not in seen:
            seen.append(text)
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


def invalid(kind, name, errors, group=""):
    """(422, Status) as apimachinery's errors.NewInvalid builds it (qualifiedKind: Kind or Kind.group)."""
    qualified = kind + ("." + group if group else "")
    return 422, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                 "message": "%s %s is invalid: %s" % (qualified, go_quote(name or ""), message(errors)),
                 "reason": "Invalid", "code": 422,
                 "details": {"name": name or "", "group": group, "kind": kind,
                             "causes": [{"reason": e["type"], "message": e["body"], "field": e["field"]} for e in errors]}}


def bad_request(text):
    """(400, Status) as errors.NewBadRequest builds it."""
    return 400, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": text,
                 "reason": "BadRequest", "code": 400}


# --- apimachinery pkg/util/validation/validation.go -----------------------------------------------------

DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = DNS1123_LABEL + "(\\." + DNS1123_LABEL + ")*"
QUALIFIED_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE = "(" + QUALIFIED_NAME + ")?"
CONFIG_MAP_KEY = "[-._a-zA-Z0-9]+"
SUBDOMAIN_MAX, LABEL_MAX, QUALIFIED_NAME_MAX = 253, 63, 63


def _full(pattern, value):
    return re.match("^(?:" + pattern + ")$", value) is not None


def regex_error(msg, fmt, *examples):
    """RegexError: the message, its examples and the regex, worded as apimachinery words them."""
    if not examples:
        return msg + " (regex used for validation is '" + fmt + "')"
    return msg + " (e.g. " + " or ".join("'%s', " % e for e in examples) + "regex used for validation is '" + fmt + "')"


def max_len_error(length):
    return "must be no more than %d characters" % length


def is_dns1123_subdomain(value):
    errs = []
    if len(value.encode("utf-8")) > SUBDOMAIN_MAX:
        errs.append(max_len_error(SUBDOMAIN_MAX))
    if not _full(DNS1123_SUBDOMAIN, value):
        errs.append(regex_error("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                                "'-' or '.', and must start and end with an alphanumeric character",
                                DNS1123_SUBDOMAIN, "example.com"))
    return errs


def is_dns1123_label(value):
    errs = []
    if len(value.encode("utf-8")) > LABEL_MAX:
        errs.append(max_len_error(LABEL_MAX))
    if not _full(DNS1123_LABEL, value):
        if _full(DNS1123_SUBDOMAIN, value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
                                    "'-', and must start and end with an alphanumeric character",
                                    DNS1123_LABEL, "my-name", "123-abc"))
    return errs


QUALIFIED_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"


def is_qualified_name(value):
    """IsQualifiedName: an optional DNS-1123 subdomain prefix and '/', then a name part of at most 63."""
    errs = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + m for m in is_dns1123_subdomain(prefix)]
    else:
        return ["a qualified name " + regex_error(QUALIFIED_MSG, QUALIFIED_NAME, "MyName", "my.name", "123-abc") +
                " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name.encode("utf-8")) > QUALIFIED_NAME_MAX:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX))
    if not _full(QUALIFIED_NAME, name):
        errs.append("name part " + regex_error(QUALIFIED_MSG, QUALIFIED_NAME, "MyName", "my.name", "123-abc"))
    return errs


def is_valid_label_value(value):
    errs = []
    if len(value.encode("utf-8")) > LABEL_MAX:
        errs.append(max_len_error(LABEL_MAX))
    if not _full(LABEL_VALUE, value):
        errs.append(regex_error("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
                                "or '.', and must start and end with an alphanumeric character",
                                LABEL_VALUE, "MyValue", "my_value", "12345"))
    return errs


def is_config_map_key(value):
    errs = []
    if len(value.encode("utf-8")) > SUBDOMAIN_MAX:
        errs.append(max_len_error(SUBDOMAIN_MAX))
    if not _full(CONFIG_MAP_KEY, value):
        errs.append(regex_error("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                                CONFIG_MAP_KEY, "key.name", "KEY_NAME", "key-name"))
    if value == ".":
        errs.append("must not be '.'")
    elif value == "..":
        errs.append("must not be '..'")
    elif value.startswith(".."):
        errs.append("must not start with '..'")
    return errs


# --- apimachinery pkg/api/validation/generic.go and objectmeta.go ---------------------------------------

TOTAL_ANNOTATION_SIZE = 256 * (1 << 10)   # objectmeta.go TotalAnnotationSizeLimitB


def _mask_trailing_dash(name):
    """generic.go maskTrailingDash, its upstream quirk kept: a trailing '-' drops two characters for an 'a'."""
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def name_is_dns_subdomain(name, prefix):
    """generic.go NameIsDNSSubdomain (a generateName is checked with its trailing '-' masked)."""
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def annotations_errors(annotations, field="metadata.annotations"):
    """objectmeta.go ValidateAnnotations: every key a qualified name (lower-cased), keys and values together at
    most 256 KiB."""
    errs = []
    for key in annotations:
        errs += [invalid_value(field, key, m) for m in is_qualified_name(key.lower())]
    total = sum(len(k.encode("utf-8")) + len(str(v).encode("utf-8")) for k, v in annotations.items())
    if total > TOTAL_ANNOTATION_SIZE:
        errs.append(too_long(field, TOTAL_ANNOTATION_SIZE))
    return errs


def labels_errors(labels, field="metadata.labels"):
    """apis/meta/v1/validation/validation.go ValidateLabels: keys qualified names, values label values."""
    errs = []
    for key, value in labels.items():
        errs += [invalid_value(field, key, m) for m in is_qualified_name(key)]
        errs += [invalid_value(field, value, m) for m in is_valid_label_value(str(value))]
    return errs


def metadata_errors(meta, namespaced=True, name_fn=name_is_dns_subdomain):
    """objectmeta.go ValidateObjectMetaAccessor (create; the name already generated): generateName, name,
    namespace (ValidateNamespaceName: a DNS-1123 label), labels, annotations."""
    errs = []
    if meta.get("generateName"):
        errs += [invalid_value("metadata.generateName", meta["generateName"], m)
                 for m in name_fn(meta["generateName"], True)]
    if not meta.get("name"):
        errs.append(required("metadata.name", "name or generateName is required"))
    else:
        errs += [invalid_value("metadata.name", meta["name"], m) for m in name_fn(meta["name"], False)]
    if namespaced:
        if not meta.get("namespace"):
            errs.append(required("metadata.namespace"))
        else:
            errs += [invalid_value("metadata.namespace", meta["namespace"], m) for m in is_dns1123_label(meta["namespace"])]
    elif meta.get("namespace"):
        errs.append(forbidden("metadata.namespace", "not allowed on this type"))
    errs += labels_errors(meta.get("labels") or {})
    errs += annotations_errors(meta.get("annotations") or {})
    return errs


def namespace_mismatch(body_ns, url_ns):
    """apiserver pkg/registry/rest/meta.go EnsureObjectNamespaceMatchesRequestNamespace: a body naming
    another namespace than the URL is a 400."""
    if body_ns and body_ns != url_ns:
        return bad_request("the namespace of the provided object does not match the namespace sent on the request")
    return None


# --- apiserver pkg/storage/names/generate.go -----------------------------------------------------------

MAX_GENERATED_NAME = 63 - 5


def generated_name(base, suffix):
    """SimpleNameGenerator.GenerateName: the base cut to 58 characters, then 5 random ones (``suffix``)."""
    return base[:MAX_GENERATED_NAME] + suffix


# --- pkg/apis/core/validation/events.go ValidateEventCreate ---------------------------------------------

REPORTING_INSTANCE_MAX = ACTION_MAX = REASON_MAX = 128
NOTE_MAX = 1024


def _nbytes(value):
    return len(str(value or "").encode("utf-8"))


def event_errors(body, namespace, strict=True):
    """ValidateEventCreate of an Event created in ``namespace``: legacyValidateEvent always, and for
    events.k8s.io/v1 (``strict``) ValidateObjectMeta, series, eventTime, type and the deprecated fields unset.
    ``body`` is in events.k8s.io/v1's shape when ``strict`` (note, regarding, deprecated*), core/v1's otherwise;
    the field paths are the internal Event's, as the real server writes them."""
    if strict:
        involved = body.get("regarding") or {}
        msg, source = body.get("note"), body.get("deprecatedSource") or {}
        first, last, count = body.get("deprecatedFirstTimestamp"), body.get("deprecatedLastTimestamp"), body.get("deprecatedCount")
    else:
        involved = body.get("involvedObject") or {}
        msg, source = body.get("message"), body.get("source") or {}
        first, last, count = body.get("firstTimestamp"), body.get("lastTimestamp"), body.get("count")
    errs = []
    inv_ns = involved.get("namespace") or ""
    mismatch = invalid_value("involvedObject.namespace", inv_ns, "does not match event.namespace")
    if not body.get("eventTime"):
        if (not inv_ns and namespace not in ("", "default")) or (inv_ns and namespace != inv_ns):
            errs.append(mismatch)
    else:
        # a cluster-scoped object's (a Node's) Events live in default or kube-system
        if not inv_ns and namespace not in ("default", "kube-system"):
            errs.append(mismatch)
        controller = str(body.get("reportingController") or body.get("reportingComponent") or "")
        if not controller:
            errs.append(required("reportingController"))
        errs += [invalid_value("reportingController", controller, m) for m in is_qualified_name(controller)]
        for field, limit in (("reportingInstance", REPORTING_INSTANCE_MAX), ("action", ACTION_MAX),
                             ("reason", REASON_MAX)):
            if not body.get(field):
                errs.append(required(field))
            if _nbytes(body.get(field)) > limit:
                errs.append(invalid_value(field, "", "can have at most %d characters" % limit))
        if _nbytes(msg) > NOTE_MAX:
            errs.append(invalid_value("message", "", "can have at most %d characters" % NOTE_MAX))
    errs += [invalid_value("namespace", namespace, m) for m in is_dns1123_subdomain(namespace)]
    if not strict:
        return errs
    errs += metadata_errors(dict(body.get("metadata") or {}, namespace=namespace))
    series = body.get("series")
    if series is not None:
        if int((series or {}).get("count") or 0) < 2:
            errs.append(invalid_value("series.count", "", "should be at least 2"))
        if not (series or {}).get("lastObservedTime"):
            errs.append(required("series.lastObservedTime"))
    if not body.get("eventTime"):
        errs.append(required("eventTime"))
    if body.get("type") not in ("Normal", "Warning"):
        errs.append(invalid_value("type", "", "has invalid value: %s" % (body.get("type") or "")))
    for field, value in (("firstTimestamp", first), ("lastTimestamp", last), ("count", count)):
        if value:
            errs.append(invalid_value(field, "", "needs to be unset"))
    if source.get("component") or source.get("host"):
        errs.append(invalid_value("source", "", "needs to be unset"))
    return errs


# --- pkg/apis/core/validation/validation.go: Node (update), ConfigMap ------------------------------------

MAX_CONFIGMAP_SIZE = 1 * 1024 * 1024   # pkg/apis/core/types.go MaxSecretSize


def node_update_errors(annotations, labels=None):
    """ValidateNodeUpdate -> ValidateObjectMetaUpdate: the Node's annotations (and labels) after the patch."""
    return annotations_errors(annotations or {}) + labels_errors(labels or {})


def configmap_errors(meta, data, binary=None):
    """ValidateConfigMap: metadata, every data/binaryData key a config key, no key in both, at most 1 MiB of values."""
    errs = metadata_errors(meta) if meta is not None else []
    binary = binary or {}
    total = 0
    for key, value in data.items():
        errs += [invalid_value("data[%s]" % key, key, m) for m in is_config_map_key(key)]
        if key in binary:
            errs.append(invalid_value("data[%s]" % key, key, "duplicate of key present in binaryData"))
        total += _nbytes(value)
    for key, value in binary.items():
        errs += [invalid_value("binaryData[%s]" % key, key, m) for m in is_config_map_key(key)]
        total += _nbytes(value)
    if total > MAX_CONFIGMAP_SIZE:
        errs.append(too_long("", MAX_CONFIGMAP_SIZE))
    return errs


# --- pkg/apis/coordination/validation/validation.go ValidateLease ----------------------------------------

def lease_errors(meta, spec, create=True):
    """ValidateLease / ValidateLeaseUpdate: metadata (a DNS-1123 subdomain name) and the spec's counters."""
    errs = metadata_errors(meta) if create else annotations_errors(meta.get("annotations") or {}) + labels_errors(
        meta.get("labels") or {})
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and int(duration) <= 0:
        errs.append(invalid_value("spec.leaseDurationSeconds", int(duration), "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if transitions is not None and int(transitions) < 0:
        errs.append(invalid_value("spec.leaseTransitions", int(transitions), "must be greater than or equal to 0"))
    return errs


# --- pkg/registry/core/pod/storage/eviction.go -----------------------------------------------------------

def eviction_error(url_name, body):
    """EvictionREST.Create: the Eviction's metadata.name must be the pod's in the URL (400 BadRequest)."""
    if ((body or {}).get("metadata") or {}).get("name") != url_name:
        return bad_request("name in URL does not match name in Eviction object")
    return None


# --- pkg/apis/authorization/validation/validation.go ValidateSelfSubjectAccessReview ----------------------

def ssar_errors(body):
    """Exactly one of spec.resourceAttributes and spec.nonResourceAttributes; metadata empty."""
    spec = (body or {}).get("spec") or {}
    res, nonres = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    errs = []
    if res is not None and nonres is not None:
        errs.append(invalid_value("spec.nonResourceAttributes", nonres, "cannot be specified in combination with "
                                  "resourceAttributes"))
    if res is None and nonres is None:
        errs.append(invalid_value("spec.resourceAttributes", None, "exactly one of nonResourceAttributes or "
                                  "resourceAttributes must be specified"))
    if dict((k, v) for k, v in ((body or {}).get("metadata") or {}).items() if v and k != "managedFields"):
        errs.append(invalid_value("metadata", body["metadata"], "must be empty"))
    return errs
