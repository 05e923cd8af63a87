# SPDX-License-Identifier: GPL-3.0-or-later
# Reviewed allow-list for the dead-code check (tests/unit/test_dead_code.py): each name vulture
# cannot see used, and why it is used. vulture reads this file as code that uses the names.
# pylint: skip-file
# flake8: noqa

# Set on objects of other libraries, read there:
preserve_quotes  # ruamel.yaml's YAML(): keep the document's quoting on dump (_kubelet.config_yaml)
run_command_environ_update  # AnsibleModule: the environment of run_command (_core.runner.Runner)
retries  # kubernetes.client.Configuration: read by its REST client (node_events: one attempt a request)
daemon_threads  # socketserver.ThreadingMixIn: request threads do not hold the process (benchmarks/triage/run.py)
protocol_version  # http.server.BaseHTTPRequestHandler: HTTP/1.1 keep-alive (benchmarks/triage/run.py)
handle_error  # socketserver.BaseServer: called on a request's exception (benchmarks/triage/run.py)

# Looked up by Ansible, not called by name:
ModuleDocFragment  # doc_fragments/*.py
PLUGIN  # doc_fragments/prometheus.py: the plugins' section (nodefix.k8s.prometheus.plugin)
DEFAULT_KUBECONFIG  # doc_fragments/node_api.py: the optional kubeconfig (nodefix.k8s.node_api.default_kubeconfig)
FilterModule  # filter/*.py
filters  # FilterModule.filters
transport  # lab/connection_plugins: the connection plugin's class attributes
has_pipelining

# The http.server handler interface (lab/apiserver-double):
server_version
log_message
do_GET
do_PATCH
do_POST
do_DELETE
do_PUT

# Used by the tests only, and meant to be: the inverse of _mount_units.systemd.unit_name_to_path,
# checked against it and used to name the units the tests leak.
systemd_escape_path

# An Ansible callback plugin (benchmarks/fleet/callback_plugins/nodefix_main_cpu.py): its class,
# class attributes and hook are looked up by Ansible:
CallbackModule
CALLBACK_VERSION
CALLBACK_TYPE
CALLBACK_NAME
CALLBACK_NEEDS_ENABLED
v2_playbook_on_stats

# Read by containers.podman.podman's put_file/fetch_file (lab/connection_plugins/nodefix_podman.py
# sets it from its cached facts):
_mount_point

# An Ansible action plugin (plugins/action/preflight.py): class attributes Ansible reads
TRANSFERS_FILES

# Read by the kubernetes client's RESTClientObject (urllib3's retries) when the ApiClient is built
# (_k8s/client.py sets it on the Configuration it passes: one attempt a connection)
retries

# _prometheus/transport.py's count of the TLS contexts it built: read by the tests that hold it to one a client
# (tests/unit/plugins/modules/test_prometheus_real.py)
contexts_made
