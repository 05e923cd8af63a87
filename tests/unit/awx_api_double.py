# SPDX-License-Identifier: GPL-3.0-or-later
"""A test double of the AWX REST API (v2), for running awx/configure.yml.

This is not AWX. It is an in-memory HTTP server that honours the parts of
the AWX API the awx.awx modules use, with AWX's shapes and rules:

- token login (POST /api/v2/tokens/ with basic auth, then Bearer tokens;
  anything else is HTTP 401), X-API-Product-Name/Version headers;
- list views with filters (``name``, ``or__id``/``or__name``, foreign keys
  and ``fk__field`` lookups), ``count``/``results``/``next``;
- create (201, unique name per organization or per parent, foreign keys must
  exist), detail GET/PATCH/DELETE;
- association sub-lists (credentials, labels, ..., workflow node links)
  answering 204 to POST {id} / {id, disassociate};
- survey_spec of job and workflow templates;
- secret credential inputs (``secret: true`` in the credential type)
  answered as ``$encrypted$``;
- projects run a (successful) project update when created or changed, and
  list as playbooks / inventory files what AWX would from a checkout of this
  repository (AWX's own filename and content rules); job templates must name
  one of those playbooks. An SCM inventory source may name any file of the
  checkout: AWX lists only some files as inventories (an inventory plugin's
  ``*.yml`` is not listed), but its API does not check ``source_path``
  against that list (awx/api/serializers.py, InventorySourceSerializer, at
  ansible/awx e21dd0a093) - an update of a path that is no file fails;
- an inventory of kind ``constructed`` gets its one source, ``Auto-created
  source for: <name>`` (source ``constructed``), as AWX's
  Inventory._enforce_constructed_source makes it (awx/main/models/inventory.py);
  its input inventories are the ``input_inventories`` association.
"""

import base64
import codecs
import json
import os
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

PRODUCT_VERSION = "24.6.1"
USERNAME = "admin"
PASSWORD = "double-password"
TOKEN = "double-token"
ENCRYPTED = "$encrypted$"

SINGULAR = {
    "organizations": "organization",
    "execution_environments": "execution_environment",
    "projects": "project",
    "project_updates": "project_update",
    "inventories": "inventory",
    "inventory_sources": "inventory_source",
    "credentials": "credential",
    "credential_types": "credential_type",
    "job_templates": "job_template",
    "workflow_job_templates": "workflow_job_template",
    "workflow_job_template_nodes": "workflow_job_template_node",
    "workflow_approval_templates": "workflow_approval_template",
    "labels": "label",
    "instance_groups": "instance_group",
    "notification_templates": "notification_template",
}
# field -> collection it points to
FOREIGN_KEYS = {
    "organization": "organizations",
    "default_environment": "execution_environments",
    "execution_environment": "execution_environments",
    "credential": "credentials",
    "credential_type": "credential_types",
    "project": "projects",
    "source_project": "projects",
    "inventory": "inventories",
    "workflow_job_template": "workflow_job_templates",
    "webhook_credential": "credentials",
}
ASSOCIATIONS = {
    "credentials": "credentials",
    "labels": "labels",
    "instance_groups": "instance_groups",
    "galaxy_credentials": "credentials",
    "notification_templates_started": "notification_templates",
    "notification_templates_success": "notification_templates",
    "notification_templates_error": "notification_templates",
    "notification_templates_approvals": "notification_templates",
    "success_nodes": "workflow_job_template_nodes",
    "failure_nodes": "workflow_job_template_nodes",
    "always_nodes": "workflow_job_template_nodes",
    "input_inventories": "inventories",  # a constructed inventory's inputs
}
# name uniqueness: per organization, or per parent object
UNIQUE_WITHIN = {
    "inventory_sources": "inventory",
    "workflow_job_template_nodes": "workflow_job_template",
    "credential_types": None,
    "execution_environments": None,
    "organizations": None,
}
UNIFIED = ("job_templates", "workflow_job_templates", "projects", "inventory_sources", "workflow_approval_templates")
# what a workflow node may set for its job only when the template prompts for it (AWX's
# awx/main/models/mixins.py SurveyJobTemplateMixin / LaunchTimeConfig: "Field is not configured to prompt on launch.")
NODE_PROMPTS = ("job_type", "limit", "diff_mode", "job_tags", "skip_tags", "verbosity", "inventory", "scm_branch")
PROMPT_FLAG = {"job_tags": "ask_tags_on_launch", "skip_tags": "ask_skip_tags_on_launch"}

MACHINE_INPUTS = {"fields": [
    {"id": "username", "type": "string", "label": "Username"},
    {"id": "password", "type": "string", "label": "Password", "secret": True},
    {"id": "ssh_key_data", "type": "string", "label": "SSH Private Key", "secret": True, "multiline": True},
    {"id": "ssh_key_unlock", "type": "string", "label": "Private Key Passphrase", "secret": True},
    {"id": "become_method", "type": "string", "label": "Privilege Escalation Method"},
    {"id": "become_username", "type": "string", "label": "Privilege Escalation Username"},
    {"id": "become_password", "type": "string", "label": "Privilege Escalation Password", "secret": True},
]}

# AWX: awx/main/utils/ansible.py
_PLAYBOOK_RE = re.compile(r"^\s*?-?\s*?(?:hosts|include|import_playbook):\s*?.*?$")
_INVENTORY_RE = re.compile(r"^[a-zA-Z0-9_.=\[\]]")


def _skip_directory(rel):
    parts = rel.split(os.sep)
    return "roles" in parts or "tasks" in parts or "group_vars" in parts or "host_vars" in parts \
        or any(p.startswith(".") for p in parts if p not in ("", "."))


def _could_be_playbook(path):
    if os.path.splitext(path)[1] not in (".yml", ".yaml"):
        return False
    with codecs.open(path, "r", encoding="utf-8", errors="ignore") as fh:
        for number, line in enumerate(fh):
            if _PLAYBOOK_RE.match(line) or (number == 0 and line.startswith("$ANSIBLE_VAULT;")):
                return True
    return False


def _could_be_inventory(path):
    name = os.path.basename(path)
    ext = os.path.splitext(name)[1]
    if name in ("inventory", "hosts") or ext == ".ini" or os.access(path, os.X_OK):
        return True
    if "." in ext:
        return False
    with codecs.open(path, "r", encoding="utf-8", errors="ignore") as fh:
        for number, line in enumerate(fh):
            if number >= 10:
                break
            if not _INVENTORY_RE.match(line):
                return False
    return True


def scan_checkout(root):
    """(playbooks, inventory files) AWX would list for a git checkout of root."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout.decode().split("\0")
    playbooks, inventories = [], []
    for rel in sorted(f for f in files if f):
        path = os.path.join(root, rel)
        if not os.path.isfile(path) or _skip_directory(os.path.dirname(rel)):
            continue
        if _could_be_playbook(path):
            playbooks.append(rel)
        elif _could_be_inventory(path):
            inventories.append(rel)
    return playbooks, inventories


class ApiError(Exception):
    def __init__(self, status, body):
        super().__init__(body)
        self.status = status
        self.body = body


class AwxDouble:
    """The state and the rules; ``serve()`` puts it on 127.0.0.1."""

    def __init__(self, checkout):
        self.lock = threading.Lock()
        self.data = {name: {} for name in SINGULAR}
        self.links = {}  # (collection, id, association) -> [ids]
        self.surveys = {}  # (collection, id) -> spec
        self.next_id = 1
        self.requests = []
        self.playbooks, self.inventory_files = scan_checkout(checkout)
        self.files = set(subprocess.run(["git", "ls-files", "-z"], cwd=checkout, capture_output=True,
                                        check=True).stdout.decode().split("\0")) - {""}
        self._seed("credential_types", {"name": "Machine", "kind": "ssh", "namespace": "ssh", "managed": True,
                                        "inputs": MACHINE_INPUTS, "injectors": {}})
        self._seed("credential_types", {"name": "Source Control", "kind": "scm", "namespace": "scm", "managed": True,
                                        "inputs": {"fields": [{"id": "username", "type": "string"},
                                                              {"id": "password", "type": "string", "secret": True}]},
                                        "injectors": {}})
        self._seed("organizations", {"name": "Default"})

    # -- storage ------------------------------------------------------------
    def _url(self, collection, oid):
        return "/api/v2/%s/%d/" % (collection, oid)

    def _seed(self, collection, fields):
        oid = self.next_id
        self.next_id += 1
        obj = dict(fields, id=oid, type=SINGULAR[collection], url=self._url(collection, oid))
        self.data[collection][oid] = obj
        return obj

    def objects(self, collection):
        return list(self.data[collection].values())

    def find(self, collection, **match):
        return [o for o in self.objects(collection) if all(o.get(k) == v for k, v in match.items())]

    def _secret_ids(self, credential):
        ctype = self.data["credential_types"].get(credential.get("credential_type"), {})
        return {f["id"] for f in (ctype.get("inputs") or {}).get("fields", []) if f.get("secret")}

    def render(self, collection, obj):
        """An object as the API shows it."""
        out = json.loads(json.dumps(obj))
        url = out["url"]
        related = {assoc: url + assoc + "/" for assoc in ASSOCIATIONS}
        if collection in ("job_templates", "workflow_job_templates"):
            related["survey_spec"] = url + "survey_spec/"
        if collection == "projects":
            related["update"] = url + "update/"
        if collection == "workflow_job_template_nodes" and out.get("unified_job_template"):
            target = self._unified(out["unified_job_template"])
            related["unified_job_template"] = target["url"] if target else None
        out["related"] = related
        out.setdefault("summary_fields", {})
        if collection == "credentials":
            secret = self._secret_ids(obj)
            out["inputs"] = {k: (ENCRYPTED if k in secret and v else v) for k, v in (out.get("inputs") or {}).items()}
        return out

    def _unified(self, oid):
        for collection in UNIFIED:
            if oid in self.data[collection]:
                return self.data[collection][oid]
        return None

    # -- list filters -----------------------------------------------------------
    def _field(self, obj, key):
        if "__" in key:
            head, rest = key.split("__", 1)
            target = self.data.get(FOREIGN_KEYS.get(head, ""), {}).get(obj.get(head))
            return self._field(target, rest) if target else None
        return obj.get(key)

    def _matches(self, obj, query):
        alternatives = [(k[4:], v) for k, v in query.items() if k.startswith("or__")]
        if alternatives and not any(str(self._field(obj, k)) == v for k, v in alternatives):
            return False
        for key, value in query.items():
            if key.startswith("or__") or key in ("page", "page_size", "order_by"):
                continue
            if str(self._field(obj, key)) != value and not (value == "" and self._field(obj, key) is None):
                return False
        return True

    def list_view(self, collection, query):
        if collection == "unified_job_templates":
            pool = [(c, o) for c in UNIFIED for o in self.objects(c)]
        else:
            pool = [(collection, o) for o in self.objects(collection)]
        results = [self.render(c, o) for c, o in pool if self._matches(o, query)]
        return {"count": len(results), "next": None, "previous": None, "results": results}

    # -- validation -----------------------------------------------------------------
    def _validate(self, collection, fields, oid=None):
        for key, value in fields.items():
            target = FOREIGN_KEYS.get(key)
            if target and value not in (None, "") and value not in self.data[target]:
                raise ApiError(400, {key: ["Invalid pk \"%s\" - object does not exist." % value]})
        merged = dict(self.data[collection].get(oid, {}), **fields)
        if "name" in merged or collection == "workflow_job_template_nodes":
            ident = "identifier" if collection == "workflow_job_template_nodes" else "name"
            scope = UNIQUE_WITHIN.get(collection, "organization")
            for other in self.objects(collection):
                if other["id"] != oid and other.get(ident) == merged.get(ident) and (scope is None or other.get(scope) == merged.get(scope)):
                    raise ApiError(400, {"__all__": ["%s with this %s already exists." % (SINGULAR[collection], ident)]})
        if collection == "job_templates" and "playbook" in merged:
            if merged["playbook"] not in self.playbooks:
                raise ApiError(400, {"playbook": ["Playbook not found for project."]})
        if collection == "inventory_sources" and merged.get("source") == "scm":
            if merged.get("source_path") not in self.files:  # a file of the checkout (see the docstring)
                raise ApiError(400, {"source_path": ["Invalid inventory file path."]})
        if collection == "credentials":
            ctype = self.data["credential_types"][merged["credential_type"]]
            known = {f["id"] for f in ctype["inputs"].get("fields", [])}
            unknown = set(merged.get("inputs") or {}) - known
            if unknown:
                raise ApiError(400, {"inputs": ["Additional properties are not allowed (%s)" % sorted(unknown)]})
        if collection == "credential_types":
            fields_ids = {f["id"] for f in (merged.get("inputs") or {}).get("fields", [])}
            for template in _strings(merged.get("injectors") or {}):
                for name in re.findall(r"{{\s*([a-z_][a-z0-9_]*)", template):
                    if name not in fields_ids and name != "tower":
                        raise ApiError(400, {"injectors": ["undefined field %s in an injector template" % name]})
        if collection == "workflow_job_template_nodes" and merged.get("unified_job_template") is not None:
            target = self._unified(merged["unified_job_template"])
            if target is None:
                raise ApiError(400, {"unified_job_template": ["object does not exist"]})
            for field in NODE_PROMPTS:
                if fields.get(field) not in (None, "") and target.get("type") == "job_template" \
                        and not target.get(PROMPT_FLAG.get(field, "ask_%s_on_launch" % field)):
                    raise ApiError(400, {field: ["Field is not configured to prompt on launch."]})
            if fields.get("job_type") not in (None, "", "run", "check"):
                raise ApiError(400, {"job_type": ["\"%s\" is not a valid choice." % fields["job_type"]]})

    def _project_update(self, project):
        update = self._seed("project_updates", {"name": project["name"], "status": "successful", "failed": False,
                                                "finished": "2026-01-01T00:00:00Z", "project": project["id"]})
        project["summary_fields"] = {"current_update": {"id": update["id"], "status": "successful"}}
        project["scm_revision"] = "0123456789abcdef"

    def create(self, collection, fields):
        self._validate(collection, fields)
        obj = self._seed(collection, fields)
        if collection == "inventories" and obj.get("kind") == "constructed":
            self._seed("inventory_sources", {"name": ("Auto-created source for: %s" % obj["name"])[:512],
                                             "inventory": obj["id"], "source": "constructed", "overwrite": True,
                                             "overwrite_vars": True, "update_on_launch": True})
        if collection == "projects":
            obj.setdefault("scm_revision", "")
            if obj.get("scm_type"):
                self._project_update(obj)
        return obj

    def update(self, collection, oid, fields):
        self._validate(collection, fields, oid)
        obj = self.data[collection][oid]
        obj.update(fields)
        if collection == "projects" and obj.get("scm_type"):
            self._project_update(obj)
        return obj

    # -- dispatch -----------------------------------------------------------------------
    def handle(self, method, path, query, body, headers):
        self.requests.append((method, path))
        parts = [p for p in path.split("/") if p]
        if parts[:2] != ["api", "v2"]:
            raise ApiError(404, {"detail": "Not found."})
        parts = parts[2:]
        if parts[:1] == ["tokens"]:
            return self._tokens(method, parts, headers)
        if headers.get("Authorization") != "Bearer " + TOKEN:
            raise ApiError(401, {"detail": "Authentication credentials were not provided."})
        if not parts:
            return 200, {"ping": "/api/v2/ping/"}
        collection = parts[0]
        if collection not in self.data and collection != "unified_job_templates":
            raise ApiError(404, {"detail": "Not found."})
        if len(parts) == 1:
            if method == "GET":
                return 200, self.list_view(collection, query)
            if method == "POST":
                return 201, self.render(collection, self.create(collection, body))
            raise ApiError(405, {"detail": "Method not allowed."})
        oid = int(parts[1])
        if oid not in self.data[collection]:
            raise ApiError(404, {"detail": "Not found."})
        if len(parts) == 2:
            if method == "GET":
                return 200, self.render(collection, self.data[collection][oid])
            if method == "PATCH":
                return 200, self.render(collection, self.update(collection, oid, body))
            if method == "DELETE":
                del self.data[collection][oid]
                return 204, None
            raise ApiError(405, {"detail": "Method not allowed."})
        sub = parts[2]
        if collection == "workflow_job_template_nodes" and sub == "create_approval_template" and method == "POST":
            # AWX: a node's approval template is made (or its fields set) through the node; the node then runs it
            for key in ("name",):
                if not body.get(key):
                    raise ApiError(400, {key: ["This field is required."]})
            if not isinstance(body.get("timeout", 0), int) or body.get("timeout", 0) < 0:
                raise ApiError(400, {"timeout": ["A valid integer is required."]})
            approval = self.create("workflow_approval_templates", {k: body[k] for k in ("name", "description", "timeout") if k in body})
            self.data[collection][oid]["unified_job_template"] = approval["id"]
            return 201, self.render("workflow_approval_templates", approval)
        if sub == "survey_spec":
            key = (collection, oid)
            if method == "GET":
                return 200, self.surveys.get(key, {})
            if method == "POST":
                self.surveys[key] = body
                return 200, None
            if method == "DELETE":
                self.surveys.pop(key, None)
                return 200, None
        if sub in ASSOCIATIONS:
            key = (collection, oid, sub)
            target = ASSOCIATIONS[sub]
            if method == "GET":
                ids = self.links.get(key, [])
                results = [self.render(target, self.data[target][i]) for i in ids]
                return 200, {"count": len(results), "next": None, "previous": None, "results": results}
            if method == "POST":
                other = body.get("id")
                if other not in self.data[target]:
                    raise ApiError(400, {"msg": "Object with id %s not found." % other})
                ids = self.links.setdefault(key, [])
                if body.get("disassociate"):
                    if other in ids:
                        ids.remove(other)
                elif other not in ids:
                    ids.append(other)
                return 204, None
        raise ApiError(404, {"detail": "Not found."})

    def _tokens(self, method, parts, headers):
        if method == "POST" and len(parts) == 1:
            expected = "Basic " + base64.b64encode(("%s:%s" % (USERNAME, PASSWORD)).encode()).decode()
            if headers.get("Authorization") != expected:
                raise ApiError(401, {"detail": "Invalid username/password."})
            return 201, {"id": 1, "token": TOKEN, "type": "o_auth2_access_token"}
        if method == "DELETE":
            return 204, None
        raise ApiError(405, {"detail": "Method not allowed."})

    # -- views for the tests ------------------------------------------------------------
    def one(self, collection, **match):
        found = self.find(collection, **match)
        assert len(found) == 1, (collection, match, found)
        return found[0]

    def linked(self, collection, oid, association):
        return list(self.links.get((collection, oid, association), []))

    def survey(self, collection, oid):
        return self.surveys.get((collection, oid))

    def writes(self):
        return [r for r in self.requests if r[0] in ("POST", "PATCH", "DELETE") and not r[1].startswith("/api/v2/tokens/")]

    def serve(self):
        """Start on 127.0.0.1 (random port); returns (server, base_url)."""
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _respond(self):
                split = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {}
                query = dict(parse_qsl(split.query, keep_blank_values=True))
                try:
                    with double.lock:
                        status, payload = double.handle(self.command, split.path, query, body, self.headers)
                except ApiError as err:
                    status, payload = err.status, err.body
                data = b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-API-Product-Name", "AWX")
                self.send_header("X-API-Product-Version", PRODUCT_VERSION)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if data:
                    self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = do_HEAD = _respond

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        return server, "http://127.0.0.1:%d" % server.server_address[1]


def _strings(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value
