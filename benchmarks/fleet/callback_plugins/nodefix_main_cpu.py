# SPDX-License-Identifier: GPL-3.0-or-later
"""Callback for benchmarks/fleet/ssh.py: the CPU seconds of ansible-playbook's MAIN process.

Ansible's main process (the strategy: queueing tasks to the workers, collecting and processing
their results, callbacks) is one Python process, single-threaded where it counts: on a controller
with C cores, a run cannot go faster than this process's CPU seconds, however many forks. At the
end of the playbook it writes the process's own user+sys seconds (RUSAGE_SELF, its threads
included, its children not) to the file NODEFIX_MAIN_CPU names.
"""

import json
import os
import resource

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: nodefix_main_cpu
type: aggregate
short_description: Write the main process's CPU seconds at the end of the playbook (nodefix.k8s benchmarks)
description:
  - Writes the user and system CPU seconds of ansible-playbook's own process, as JSON, to the file that the
    environment variable C(NODEFIX_MAIN_CPU) names.
author: nodefix.k8s contributors
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "nodefix_main_cpu"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_stats(self, _stats):
        path = os.environ.get("NODEFIX_MAIN_CPU")
        if path:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            with open(path, "w") as fh:
                json.dump({"user": usage.ru_utime, "sys": usage.ru_stime}, fh)
