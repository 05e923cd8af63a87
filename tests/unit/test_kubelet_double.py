# SPDX-License-Identifier: GPL-3.0-or-later
"""The kubelet test double (lab/kubelet-double/kubelet) honours its contract.

The module and the role rely on this contract in the lab: --version, merge
order --config < --config-dir drop-ins < flags, the deprecated flags,
refusal to start on what kubelet refuses, /healthz and /configz, and fault
injection. Each test runs the real program as a subprocess.
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOUBLE = os.path.join(REPO, "lab", "kubelet-double", "kubelet")
KUBEADM_CONFIG = os.path.join(REPO, "lab", "kubelet-double", "layouts", "kubeadm", "var", "lib", "kubelet", "config.yaml")
HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def env(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("KUBELET_DOUBLE_") or k.lower().endswith("_proxy"):
            del e[k]
    e["KUBELET_DOUBLE_STATE_DIR"] = str(state)
    e["KUBELET_DOUBLE_RUN_DIR"] = str(tmp_path / "run")
    return e


def run(args, env, timeout=10):
    return subprocess.run([sys.executable, DOUBLE] + args, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def get(port, path):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open("http://127.0.0.1:%d%s" % (port, path), timeout=2) as resp:
        return resp.status, resp.read().decode()


def serve(args, env):
    """Start the double, wait for /healthz, return (process, configz)."""
    proc = subprocess.Popen([sys.executable, DOUBLE] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    port = [int(a.split("=", 1)[1]) for a in args if a.startswith("--healthz-port=")][0]
    deadline = time.time() + 10
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError("double exited %s: %s" % (proc.returncode, proc.stderr.read()))
        try:
            status, body = get(port, "/healthz")
            if status == 200 and body == "ok":
                return proc, json.loads(get(port, "/configz")[1])
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("double did not become healthy")


def stop(proc):
    proc.terminate()
    assert proc.wait(timeout=5) == 0


def test_version_and_help(env, tmp_path):
    assert run(["--version"], env).stdout == "Kubernetes v1.29.3\n"
    (tmp_path / "state" / "version").write_text("1.26.15\n")
    assert run(["--version"], env).stdout == "Kubernetes v1.26.15\n"
    env["KUBELET_DOUBLE_VERSION"] = "v1.31.2"
    assert run(["--version"], env).stdout == "Kubernetes v1.31.2\n"
    helptext = run(["--help"], env).stdout
    assert "TEST DOUBLE" in helptext and "--config-dir" in helptext


def test_merge_order_config_dropins_flags_and_configz(env, tmp_path):
    port = free_port()
    cfg = write(tmp_path / "config.yaml", HEADER + "# comment\nkubeAPIQPS: 11\neventRecordQPS: 12\neventBurst: 13\n"
                "evictionHard:\n  memory.available: 200Mi\n  nodefs.available: 5%\nclusterDNS:\n- 10.0.0.1\n- 10.0.0.2\n"
                "containerRuntimeEndpoint: unix:///run/containerd/containerd.sock\n")
    write(tmp_path / "conf.d" / "10-a.conf", HEADER + "eventRecordQPS: 22\neventBurst: 23\nevictionHard:\n  memory.available: 300Mi\n"
          "clusterDNS: [10.0.0.9]\n")
    write(tmp_path / "conf.d" / "20-b.conf", HEADER + "eventBurst: 33\n")
    write(tmp_path / "conf.d" / "30-c.yaml", "not: read\n")
    proc, configz = serve(["--config=" + cfg, "--config-dir", str(tmp_path / "conf.d"), "--healthz-port=%d" % port,
                           "--event-burst=44", "--v=2"], env)
    try:
        kc = configz["kubeletconfig"]
        assert kc["kubeAPIQPS"] == 11
        assert kc["eventRecordQPS"] == 22
        assert kc["eventBurst"] == 44
        assert kc["evictionHard"] == {"memory.available": "300Mi", "nodefs.available": "5%"}
        assert kc["clusterDNS"] == ["10.0.0.9"]
        assert kc["kubeAPIBurst"] == 100 and kc["serializeImagePulls"] is True
        assert get(port, "/nope")[0] == 404
    except OSError as exc:  # urllib raises HTTPError (an OSError) for 404
        assert "404" in str(exc)
    finally:
        stop(proc)
    assert "Flag --event-burst has been deprecated" in proc.stderr.read()


def test_kubeadm_layout_config_with_stale_flags(env):
    port = free_port()
    proc, configz = serve(["--config=" + KUBEADM_CONFIG, "--healthz-port=%d" % port,
                           "--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock",
                           "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
                           "--pod-infra-container-image=registry.k8s.io/pause:3.9", "--kube-api-qps=5", "--event-qps=5"], env)
    stop(proc)
    kc = configz["kubeletconfig"]
    assert (kc["kubeAPIQPS"], kc["eventRecordQPS"], kc["kubeAPIBurst"], kc["eventBurst"]) == (5, 5, 100, 100)


def test_defaults_before_1_27(env, tmp_path):
    env["KUBELET_DOUBLE_VERSION"] = "1.26.3"
    port = free_port()
    cfg = write(tmp_path / "c.yaml", HEADER)
    proc, configz = serve(["--config=" + cfg, "--healthz-port=%d" % port, "--container-runtime-endpoint=unix:///x"], env)
    stop(proc)
    kc = configz["kubeletconfig"]
    assert (kc["kubeAPIQPS"], kc["kubeAPIBurst"], kc["eventRecordQPS"], kc["eventBurst"]) == (5, 10, 5, 10)


@pytest.mark.parametrize("version,body,flags,message", [
    ("1.29.3", "maxParallelImagePulls: 5\n", [],
     "maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls (--serialize-image-pulls) is set to false"),
    ("1.29.3", "maxParallelImagePulls: 5\nserializeImagePulls: false\n", ["--serialize-image-pulls=true"],
     "maxParallelImagePulls cannot be larger than 1"),
    ("1.29.3", "maxParallelImagePulls: 0\nserializeImagePulls: false\n", [], "maxParallelImagePulls 0 must be a positive number"),
    ("1.26.3", "maxParallelImagePulls: 2\nserializeImagePulls: false\n", [], 'strict decoding error: unknown field \\"maxParallelImagePulls\\"'),
    ("1.29.3", "kubeApiQps: 50\n", [], 'unknown field \\"kubeApiQps\\"'),
    ("1.29.3", "kubeAPIQPS: fifty\n", [], "cannot unmarshal string into Go struct field KubeletConfiguration.kubeAPIQPS of type int32"),
    ("1.29.3", "kubeAPIQPS: -1\n", [], "kubeAPIQPS (--kube-api-qps) -1 must not be a negative number"),
    ("1.29.3", "", ["--event-qps=-3"], "eventRecordQPS (--event-qps) -3 must not be a negative number"),
    ("1.29.3", "", ["--kube-api-qps=x"], "invalid argument 'x' for \\\"--kube-api-qps\\\" flag"),
    ("1.29.3", "", ["--no-such-flag=1"], "unknown flag: --no-such-flag"),
    ("1.27.0", "", ["--config-dir=/tmp"], "unknown flag: --config-dir"),
    ("1.29.3", "kubeAPIQPS: [1\n", [], "failed to decode: yaml"),
    ("1.29.3", "  bad: indent\nkubeAPIQPS: 1\n", [], "failed to decode: yaml"),
])
def test_refuses_to_start(env, tmp_path, version, body, flags, message):
    env["KUBELET_DOUBLE_VERSION"] = version
    cfg = write(tmp_path / "c.yaml", HEADER + "containerRuntimeEndpoint: unix:///x\nhealthzPort: %d\n" % free_port() + body)
    res = run(["--config=" + cfg] + flags, env)
    assert res.returncode == 1, res.stderr
    assert '"command failed"' in res.stderr and message in res.stderr


def test_missing_config_file(env, tmp_path):
    res = run(["--config=%s" % (tmp_path / "missing.yaml")], env)
    assert res.returncode == 1 and "failed to load kubelet config file" in res.stderr


@pytest.mark.parametrize("spec,fails", [("", True), ("kubeAPIQPS=50\n", True), ("kubeAPIQPS=50\neventBurst=7\n", False),
                                        ("kubeAPIQPS=5", False)])
def test_fault_injection(env, tmp_path, spec, fails):
    (tmp_path / "state" / "fail-start").write_text(spec)
    port = free_port()
    cfg = write(tmp_path / "c.yaml", HEADER + "containerRuntimeEndpoint: unix:///x\nhealthzPort: %d\n" % port)
    if fails:
        res = run(["--config=" + cfg], env)
        assert res.returncode == 1 and "injected start failure" in res.stderr
    else:
        proc, _cz = serve(["--config=" + cfg, "--healthz-port=%d" % port], env)
        stop(proc)


def test_fault_injection_from_environment(env, tmp_path):
    env["KUBELET_DOUBLE_FAIL_START"] = "serializeImagePulls=false"
    cfg = write(tmp_path / "c.yaml", HEADER + "containerRuntimeEndpoint: unix:///x\nserializeImagePulls: false\n")
    res = run(["--config=" + cfg], env)
    assert res.returncode == 1 and "injected start failure (serializeImagePulls=false)" in res.stderr


def test_yaml_written_by_the_module_is_read(env, tmp_path):
    """ruamel.yaml's output (what kubelet_config writes) is inside the double's YAML subset."""
    from ruamel.yaml import YAML
    import io
    yml = YAML()
    data = yml.load(open(KUBEADM_CONFIG).read())
    data["evictionHard"] = {"memory.available": "500Mi", "nodefs.available": "10%"}
    data["systemReserved"] = {"memory": "512Mi"}
    data["maxParallelImagePulls"] = 5
    data["serializeImagePulls"] = False
    buf = io.StringIO()
    yml.dump(data, buf)
    cfg = write(tmp_path / "c.yaml", buf.getvalue())
    port = free_port()
    proc, configz = serve(["--config=" + cfg, "--healthz-port=%d" % port, "--container-runtime-endpoint=unix:///x"], env)
    stop(proc)
    kc = configz["kubeletconfig"]
    assert kc["evictionHard"]["memory.available"] == "500Mi" and kc["maxParallelImagePulls"] == 5
    assert kc["logging"]["options"]["json"]["infoBufferSize"] == "0"
