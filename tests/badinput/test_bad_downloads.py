# SPDX-License-Identifier: GPL-3.0-or-later
"""Hostile mirrors against the download paths of the gvisor and containerd roles.

The roles' own task files run on the controller (local connection) against two local mirrors in
this process: plain HTTP, and HTTPS with a CA made for the test by openssl. Install paths point into
the test's directory. The "runsc" the mirror serves is a TEST DOUBLE (a shell script that prints a
runsc version and records every run), so the test can tell whether a download was ever executed.
"""

import hashlib
import http.server
import json
import os
import ssl
import subprocess
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV = os.environ.get("NODEFIX_VENV") or os.path.join(ROOT, ".venv")
PY = os.path.join(VENV, "bin", "python")
PLAYBOOK = os.path.join(ROOT, "tests", "badinput", "playbooks", "download.yml")
RELEASE = "20240729.0"
OLD_RUNSC = "#!/bin/sh\necho 'runsc version release-20221219.0'\n"


class Mirror(object):
    """A directory served over HTTP or HTTPS on 127.0.0.1; ``requests`` lists the paths asked for."""

    def __init__(self, directory, tls=None, auth=None):
        self.requests = []
        mirror = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=str(directory), **kw)

            def do_GET(self):  # noqa: N802 - http.server's name
                # ``auth``: {header: value} every request must carry (a mirror behind Basic auth or an API key)
                if auth and any(self.headers.get(k) != v for k, v in auth.items()):
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="mirror"')
                    self.end_headers()
                    mirror.requests.append("401 " + self.path)
                    return
                super().do_GET()

            def log_message(self, *args):
                mirror.requests.append(self.path)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.url = "%s://127.0.0.1:%d" % ("https" if tls else "http", self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


def make_ca(d):
    def ssl_cmd(*argv):
        subprocess.run(["openssl"] + list(argv), check=True, capture_output=True)
    ssl_cmd("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test CA",
            "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"))
    ssl_cmd("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", str(d / "server.key"), "-out", str(d / "server.csr"))
    (d / "ext").write_text("subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\n")
    ssl_cmd("x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca.crt"), "-CAkey", str(d / "ca.key"),
            "-CAcreateserial", "-days", "2", "-extfile", str(d / "ext"), "-out", str(d / "server.crt"))
    return str(d / "server.crt"), str(d / "server.key"), str(d / "ca.crt")


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return make_ca(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def site(tmp_path, tls):
    """A gVisor release tree, a node directory with the old runsc, and both mirrors."""
    marker = tmp_path / "executed"
    runsc = ("#!/bin/sh\necho run >> %s\necho 'runsc version release-%s'\necho 'spec: 1.1.0-rc.1'\n"
             % (marker, RELEASE)).encode()
    arch = tmp_path / "mirror" / "release" / RELEASE / "x86_64"
    arch.mkdir(parents=True)
    (arch / "runsc").write_bytes(runsc)
    (arch / "runsc.sha512").write_text("%s  runsc\n" % hashlib.sha512(runsc).hexdigest())
    node = tmp_path / "node"
    (node / "bin").mkdir(parents=True)
    (node / "bin" / "runsc").write_text(OLD_RUNSC)
    (node / "bin" / "runsc").chmod(0o755)
    plain, secure = Mirror(tmp_path / "mirror"), Mirror(tmp_path / "mirror", tls[:2])
    yield {"tmp": tmp_path, "arch": arch, "node": node, "marker": marker, "runsc": runsc, "http": plain,
           "https": secure, "ca": tls[2], "sha512": hashlib.sha512(runsc).hexdigest()}
    plain.stop()
    secure.stop()


def gvisor(site, mirror, verbose=False, **extra):
    evars = {"role_under_test": "gvisor", "ansible_python_interpreter": PY,
             "gvisor_info": {"runsc": {"version": "20221219.0", "path": str(site["node"] / "bin" / "runsc")}},
             "gvisor_runsc_install_path": str(site["node"] / "bin" / "runsc"), "gvisor_install_shim": False,
             "gvisor_arch": "x86_64", "gvisor_manage_dependencies": False, "gvisor_release": RELEASE,
             "gvisor_containerd_config_path": str(site["tmp"] / "no-containerd.toml"),
             "gvisor_mirror_base_url": site[mirror].url + "/release", "gvisor_mirror_ca_path": site["ca"]}
    evars.update(extra)
    return play(site, evars, verbose)


def play(site, evars, verbose=False):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"), LC_ALL="C.UTF-8")
    proc = subprocess.run([os.path.join(VENV, "bin", "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-e", json.dumps(evars), PLAYBOOK] + (["-vvv", "--diff"] if verbose else []),
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def node_files(site):
    out = {}
    for dirpath, _dirs, files in os.walk(str(site["node"])):
        for name in files:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, str(site["node"]))] = (hashlib.sha256(fh.read()).hexdigest(), os.stat(p).st_mode)
    return out


def refused(site, rc, out, words, requests=None):
    assert rc != 0, out[-3000:]
    for word in words:
        assert word in out, "%r not in output:\n%s" % (word, out[-3000:])
    assert not site["marker"].exists(), "a download was executed before its checksum passed"
    assert (site["node"] / "bin" / "runsc").read_text() == OLD_RUNSC
    if requests is not None:
        assert site["http"].requests + site["https"].requests == requests


def test_plain_http_is_refused_before_any_download(site):
    rc, out = gvisor(site, "http")
    refused(site, rc, out, ["is plain HTTP", "nothing was downloaded"], requests=[])


def test_plain_http_checksum_is_no_verification(site):
    rc, out = gvisor(site, "http", gvisor_allow_insecure_mirror=True)
    refused(site, rc, out, ["proves nothing", "pin", "runsc in gvisor_checksums"], requests=[])


def test_plain_http_with_a_pinned_checksum_installs(site):
    rc, out = gvisor(site, "http", gvisor_allow_insecure_mirror=True, gvisor_checksums={"runsc": site["sha512"]})
    assert rc == 0, out[-3000:]
    assert (site["node"] / "bin" / "runsc").read_bytes() == site["runsc"]
    assert "/release/%s/x86_64/runsc.sha512" % RELEASE not in site["http"].requests  # the pin is the authority


def test_https_mirror_installs_after_the_checksum_and_a_second_run_changes_nothing(site):
    """One install and the same run again (two tests before, whose first runs were the same run: one install)."""
    rc, out = gvisor(site, "https")
    assert rc == 0, out[-3000:]
    assert (site["node"] / "bin" / "runsc").read_bytes() == site["runsc"]
    assert site["marker"].exists()  # run (version check) only after the checksum passed
    before = node_files(site)
    rc, out = gvisor(site, "https")
    assert rc == 0 and node_files(site) == before, out[-3000:]
    assert "changed=0" in out, out[-3000:]


def test_wrong_published_checksum_is_refused(site):
    (site["arch"] / "runsc.sha512").write_text("%s  runsc\n" % ("0" * 128))
    rc, out = gvisor(site, "https")
    refused(site, rc, out, ["Checksum mismatch", "runsc.sha512 on the mirror", "Nothing was replaced"])


def test_wrong_pinned_checksum_is_refused(site):
    rc, out = gvisor(site, "https", gvisor_checksums={"runsc": "ab" * 64})
    refused(site, rc, out, ["Checksum mismatch", "checksums (pinned)", "Nothing was replaced"])


def test_missing_checksum_file_is_refused(site):
    (site["arch"] / "runsc.sha512").unlink()
    rc, out = gvisor(site, "https")
    refused(site, rc, out, ["runsc.sha512", "404"])


def test_untrusted_certificate_is_refused(site):
    rc, out = gvisor(site, "https", gvisor_mirror_ca_path="")
    refused(site, rc, out, ["CERTIFICATE_VERIFY_FAILED"])


@pytest.mark.parametrize("release", ["9.9.9/../../etc/cron.d", "20240729.0/../../x", "2024", "latest; rm -rf /"])
def test_release_names_are_validated_before_a_url_is_built(site, release):
    rc, out = gvisor(site, "https", gvisor_release=release)
    refused(site, rc, out, ["is not a gVisor release", "nothing was downloaded"], requests=[])


def test_pinned_checksum_must_be_sha512_hex(site):
    rc, out = gvisor(site, "https", gvisor_checksums={"runsc": "md5:abc"})
    refused(site, rc, out, ["sha512 hex digests"], requests=[])


def test_ftp_scheme_is_refused(site):
    rc, out = gvisor(site, "https", gvisor_mirror_base_url="ftp://127.0.0.1/release")
    refused(site, rc, out, ["must be an https:// URL"], requests=[])


def publish(site, name, data):
    (site["arch"] / name).write_bytes(data)
    (site["arch"] / (name + ".sha512")).write_text("%s  %s\n" % (hashlib.sha512(data).hexdigest(), name))


def tarball(members):
    """A gvisor.tar.bz2 from (name, bytes or None for a directory, tar type) tuples."""
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:bz2") as tar:
        for name, data, kind in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.mode = 0o755
            if kind == tarfile.SYMTYPE:
                info.linkname = "/etc/passwd"
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def test_tarball_layout_installs_runsc_shim_and_gvisor_bin_and_skips_hostile_members(site):
    import tarfile
    shim = b"#!/bin/sh\necho shim\n"
    publish(site, "gvisor.tar.bz2", tarball([
        ("gvisor", None, tarfile.DIRTYPE), ("gvisor/runsc", site["runsc"], tarfile.REGTYPE),
        ("gvisor/containerd-shim-runsc-v1", shim, tarfile.REGTYPE),
        ("gvisor/gvisor-bin", None, tarfile.DIRTYPE), ("gvisor/gvisor-bin/helper", b"helper", tarfile.REGTYPE),
        ("../../escaped", b"x", tarfile.REGTYPE), ("/abs-escaped", b"x", tarfile.REGTYPE),
        ("gvisor/link", None, tarfile.SYMTYPE)]))
    node = site["node"] / "bin"
    rc, out = gvisor(site, "https", gvisor_mirror_layout="tarball", gvisor_install_shim=True,
                     gvisor_shim_install_path=str(node / "containerd-shim-runsc-v1"))
    assert rc == 0, out[-3000:]
    assert (node / "runsc").read_bytes() == site["runsc"]
    assert (node / "containerd-shim-runsc-v1").read_bytes() == shim
    assert (node / "gvisor-bin" / "helper").read_bytes() == b"helper"
    assert (node / "runsc.nodefix-release-20221219.0").read_text() == OLD_RUNSC  # the old binary, kept
    assert not (site["tmp"] / "escaped").exists() and not os.path.exists("/abs-escaped")
    assert not [p for p in os.listdir(tempfile_dir()) if p.startswith("nodefix-gvisor-")]  # downloads removed


def tempfile_dir():
    import tempfile
    return tempfile.gettempdir()


def test_tarball_without_the_shim_is_refused(site):
    import tarfile
    publish(site, "gvisor.tar.bz2", tarball([("runsc", site["runsc"], tarfile.REGTYPE)]))
    rc, out = gvisor(site, "https", gvisor_mirror_layout="tarball", gvisor_install_shim=True,
                     gvisor_shim_install_path=str(site["node"] / "bin" / "containerd-shim-runsc-v1"))
    assert rc != 0 and "has no runsc or no containerd-shim-runsc-v1" in out and "nothing was replaced" in out, out[-3000:]
    assert (site["node"] / "bin" / "runsc").read_text() == OLD_RUNSC


def test_installed_runsc_that_does_not_answer_as_downloaded_is_put_back(site):
    """The download reports the new release from the temporary directory but something else once
    installed (as a binary that reads a missing helper would): the old runsc must come back."""
    fickle = ("#!/bin/sh\ncase \"$0\" in */nodefix-gvisor-*) echo 'runsc version release-%s';;\n"
              "*) echo 'runsc version release-20221219.0';; esac\n" % RELEASE).encode()
    publish(site, "runsc", fickle)
    rc, out = gvisor(site, "https")
    assert rc != 0, out[-3000:]
    assert "after the install, expected release-%s" % RELEASE in out and "the old files were put back" in out, out[-3000:]
    assert (site["node"] / "bin" / "runsc").read_text() == OLD_RUNSC


# ---- containerd's release archive -----------------------------------------------------------------

def containerd(site, mirror, verbose=False, **extra):
    evars = {"role_under_test": "containerd", "ansible_python_interpreter": PY,
             "containerd_target_version": "1.7.24", "containerd_archive_arch": "amd64",
             "containerd_archive_base_url": site[mirror].url, "containerd_archive_ca_path": site["ca"],
             "containerd_state_dir": str(site["node"] / "state"),
             "containerd_archive_install_dir": str(site["node"] / "bin"),
             "containerd_dropin": str(site["node"] / "dropin" / "10-nodefix-binary.conf")}
    evars.update(extra)
    return play(site, evars, verbose)


@pytest.mark.parametrize("extra,words", [
    ({}, ["is plain HTTP", "nothing was downloaded"]),
    ({"containerd_allow_insecure_mirror": True}, ["proves nothing", "pin containerd_archive_checksum"]),
])
def test_containerd_plain_http_is_refused(site, extra, words):
    rc, out = containerd(site, "http", **extra)
    refused(site, rc, out, words, requests=[])


@pytest.mark.parametrize("version", ["9.9.9/../../etc/cron.d", "1.7", "v1.7.24", "1.7.24 "])
def test_containerd_version_is_validated(site, version):
    rc, out = containerd(site, "https", containerd_target_version=version)
    refused(site, rc, out, ["is not a containerd version", "nothing was downloaded"], requests=[])


def test_containerd_stale_extraction_is_never_installed(site):
    """An earlier run left bin/containerd in the release directory; the archive's checksum is wrong."""
    stale = site["node"] / "state" / "releases" / "1.7.24" / "bin"
    stale.mkdir(parents=True)
    (stale / "containerd").write_text("#!/bin/sh\necho stale, unverified\n")
    (site["tmp"] / "mirror" / "v1.7.24").mkdir()
    (site["tmp"] / "mirror" / "v1.7.24" / "containerd-1.7.24-linux-amd64.tar.gz").write_bytes(b"not an archive")
    before = node_files(site)
    rc, out = containerd(site, "https", containerd_archive_checksum="0" * 64)
    assert rc != 0 and "checksum" in out.lower(), out[-3000:]
    after = node_files(site)
    assert not os.path.exists(str(site["node"] / "bin" / "containerd"))
    assert dict((k, v) for k, v in after.items() if k.startswith("bin/")) == \
        dict((k, v) for k, v in before.items() if k.startswith("bin/"))


# ---- credentials (issue 61): options, never shown; a URL's user information works, warns, never shown ----------

def basic(user, password):
    import base64
    return "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()


@pytest.fixture
def locked(site, tls):
    """The HTTPS mirror again, behind credentials the test sets (``locked(auth)`` -> its URL)."""
    mirrors = []

    def start(auth):
        mirrors.append(Mirror(site["tmp"] / "mirror", tls[:2], auth=auth))
        site["locked"] = mirrors[-1]
        return mirrors[-1].url
    yield start
    for m in mirrors:
        m.stop()


def test_gvisor_mirror_credentials_are_sent_and_never_shown(site, locked):
    locked({"Authorization": basic("robot", "Gv-Pass-61"), "X-JFrog-Art-Api": "Gv-Header-61"})
    rc, out = gvisor(site, "locked", verbose=True, gvisor_mirror_username="robot", gvisor_mirror_password="Gv-Pass-61",
                     gvisor_mirror_headers={"X-JFrog-Art-Api": "Gv-Header-61"})
    assert rc == 0, out[-3000:]
    assert (site["node"] / "bin" / "runsc").read_bytes() == site["runsc"]
    assert "Gv-Pass-61" not in out and "Gv-Header-61" not in out
    assert "X-JFrog-Art-Api" in out or "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" in out   # the invocation shows its shape


def test_gvisor_url_userinfo_works_warns_and_is_never_shown(site, locked):
    url = locked({"Authorization": basic("u", "Pr0xy@Tail-Gv-61")})
    userinfo_url = url.replace("https://", "https://u:Pr0xy@Tail-Gv-61@") + "/release"
    rc, out = gvisor(site, "locked", verbose=True, gvisor_mirror_base_url=userinfo_url)
    assert rc == 0, out[-3000:]
    assert "Tail-Gv-61" not in out and "Pr0xy" not in out
    assert "gvisor_mirror_username" in out and url + "/release/%s/x86_64" % RELEASE in out


def test_containerd_archive_credentials_are_sent_and_never_shown(site, locked):
    """The archive's checksum is pinned wrong: the download must pass the mirror's credentials to reach the
    checksum check that refuses it. The URL's password is percent-encoded (review finding L7): the mirror wants it
    decoded, as Go and runsc_install send it."""
    url = locked({"Authorization": basic("u", "Ctd@Pass-61"), "X-Registry-Auth": "Ctd-Header-61"})
    (site["tmp"] / "mirror" / "v1.7.24").mkdir()
    (site["tmp"] / "mirror" / "v1.7.24" / "containerd-1.7.24-linux-amd64.tar.gz").write_bytes(b"not an archive")
    rc, out = containerd(site, "locked", verbose=True, containerd_archive_checksum="0" * 64,
                         containerd_archive_base_url=url.replace("https://", "https://u:Ctd%40Pass-61@"),
                         containerd_archive_headers={"X-Registry-Auth": "Ctd-Header-61"})
    assert rc != 0 and "Checksum mismatch for %s/v1.7.24/" % url in out, out[-3000:]
    assert "Pass-61" not in out and "Ctd-Header-61" not in out
    assert "containerd_archive_username" in out                     # the warning names the variables
    assert "/v1.7.24/containerd-1.7.24-linux-amd64.tar.gz" in site["locked"].requests


def test_containerd_archive_refused_credentials_are_said_redacted(site, locked):
    url = locked({"Authorization": basic("u", "the-right-one")})
    rc, out = containerd(site, "locked", containerd_archive_checksum="0" * 64, containerd_archive_username="u",
                         containerd_archive_password="Ctd-Wrong-61",
                         containerd_archive_headers={"X-Registry-Auth": "Ctd-Header-62"})
    assert rc != 0 and "Downloading %s/v1.7.24/containerd-1.7.24-linux-amd64.tar.gz failed" % url in out, out[-3000:]
    assert "HTTP 401" in out and "Ctd-Wrong-61" not in out and "Ctd-Header-62" not in out
