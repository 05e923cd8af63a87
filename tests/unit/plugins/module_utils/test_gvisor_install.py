# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for _gvisor.install (the runsc_install module's fixer code): option checks, downloads
against a fake fetch, checksum verification, tarball unpacking of hostile archives, replace/undo."""

import hashlib
import io
import os
import tarfile

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._gvisor import install as gvisor_install

GOOD = {"release": "20240729.0", "base_url": "https://mirror/release", "layout": "loose", "install_shim": True,
        "checksums": {}, "allow_insecure": False, "arch": "", "minimum_release": "20231106.0",
        "dest": "/usr/bin/runsc", "shim_dest": "/usr/bin/containerd-shim-runsc-v1"}


class Resp(object):
    def __init__(self, data):
        self.buf = io.BytesIO(data)

    def read(self, n):
        return self.buf.read(n)


def fake_fetch(files, asked=None):
    def fetch(url):
        if asked is not None:
            asked.append(url)
        name = url.rsplit("/", 1)[-1]
        if name not in files:
            return None, {"status": 404, "msg": "HTTP Error 404: File not found"}
        return Resp(files[name]), {"status": 200}
    return fetch


@pytest.mark.parametrize("change,words", [
    ({}, None),
    ({"release": "20240729.0/../../x"}, "is not a gVisor release"),
    ({"release": "release-20240729.0"}, None),
    ({"base_url": "ftp://mirror/release"}, "must be an https:// URL"),
    ({"base_url": "mirror/release"}, "must be an https:// URL"),
    ({"base_url": "http://mirror/release"}, "is plain HTTP"),
    ({"base_url": "http://mirror/release", "allow_insecure": True}, "proves nothing: pin runsc, containerd-shim"),
    ({"base_url": "http://mirror/release", "allow_insecure": True, "install_shim": False,
      "checksums": {"runsc": "a" * 128}}, None),
    ({"checksums": {"runsc": "md5:abc"}}, "sha512 hex digests"),
    ({"checksums": {"gvisor.tar.bz2": "a" * 128}}, "which the loose layout does not download"),
    ({"arch": "armv7l"}, "x86_64 and aarch64 builds only"),
    ({"minimum_release": "soon"}, "is not a runsc release"),
    ({"dest": "bin/runsc"}, "dest must be an absolute path"),
])
def test_input_errors(change, words):
    errors = gvisor_install.input_errors(dict(GOOD, **change))
    if words is None:
        assert errors == []
    else:
        assert len(errors) == 1 and words in errors[0], errors


def test_release_dir_and_files():
    assert gvisor_install.release_dir("release-20240729.0") == "20240729.0" and gvisor_install.release_dir("latest") == "latest"
    assert gvisor_install.files_for("loose", True) == ["runsc", "containerd-shim-runsc-v1"]
    assert gvisor_install.files_for("loose", False) == ["runsc"] and gvisor_install.files_for("tarball", True) == ["gvisor.tar.bz2"]


def test_verify_published_and_pinned(tmp_path):
    data = b"runsc bytes"
    digest = hashlib.sha512(data).hexdigest()
    asked = []
    files = {"runsc": data, "runsc.sha512": ("%s  runsc\n" % digest.upper()).encode()}
    out = gvisor_install.verify(fake_fetch(files, asked), "https://m/r/x86_64", str(tmp_path), ["runsc"], {}, "old")
    assert out == [{"name": "runsc", "sha512": digest, "source": "mirror"}]
    assert asked == ["https://m/r/x86_64/runsc", "https://m/r/x86_64/runsc.sha512"]
    os.unlink(str(tmp_path / "runsc"))
    asked[:] = []
    out = gvisor_install.verify(fake_fetch(files, asked), "https://m/r/x86_64", str(tmp_path), ["runsc"], {"runsc": digest}, "old")
    assert out[0]["source"] == "pinned" and asked == ["https://m/r/x86_64/runsc"]  # the pin is the authority


@pytest.mark.parametrize("sums,words", [
    ({"runsc.sha512": b"0" * 128 + b"  runsc\n"}, ["Checksum mismatch for https://m/r/x86_64/runsc",
                                                   "runsc.sha512 on the mirror says 000", "Nothing was replaced: old"]),
    ({"runsc.sha512": b""}, ["says nothing"]),
    ({}, ["runsc.sha512 failed: HTTP 404"]),
    ({"runsc.sha512": b"a" * 5000}, ["is over 4096 bytes"]),
])
def test_verify_refuses(tmp_path, sums, words):
    files = dict({"runsc": b"runsc bytes"}, **sums)
    with pytest.raises(gvisor_install.InstallError) as exc:
        gvisor_install.verify(fake_fetch(files), "https://m/r/x86_64", str(tmp_path), ["runsc"], {}, "old")
    for word in words:
        assert word in exc.value.msg, exc.value.msg


def test_download_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(gvisor_install, "MAX_DOWNLOAD_BYTES", 10)
    with pytest.raises(gvisor_install.InstallError, match="larger than 10 bytes"):
        gvisor_install.download(fake_fetch({"runsc": b"x" * 11}), "https://m/runsc", str(tmp_path / "runsc"))


def make_tar(path, members):
    with tarfile.open(str(path), mode="w:bz2") as tar:
        for name, data, kind in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.mode = 0o777
            if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                info.linkname = "/etc/shadow"
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)


def test_unpack_takes_regular_files_only_and_nothing_outside(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    make_tar(work / "g.tar.bz2", [
        ("../outside", b"x", tarfile.REGTYPE), ("/abs", b"x", tarfile.REGTYPE),
        ("a/../../up", b"x", tarfile.REGTYPE), ("runsc", None, tarfile.SYMTYPE),
        ("hard", None, tarfile.LNKTYPE), ("dev", None, tarfile.CHRTYPE),
        ("rel/runsc", b"new runsc", tarfile.REGTYPE), ("rel/containerd-shim-runsc-v1", b"shim", tarfile.REGTYPE),
        ("rel/gvisor-bin", None, tarfile.DIRTYPE), ("rel/gvisor-bin/h", b"h", tarfile.REGTYPE)])
    runsc, shim, bindir = gvisor_install.unpack(str(work / "g.tar.bz2"), str(work))
    assert open(runsc, "rb").read() == b"new runsc" and open(shim, "rb").read() == b"shim"
    assert os.listdir(bindir) == ["h"]
    assert not (tmp_path / "outside").exists() and not (tmp_path / "up").exists() and not os.path.exists("/abs")
    assert sorted(os.listdir(str(work / "x"))) == ["rel"]
    assert oct(os.stat(runsc).st_mode & 0o7777) == oct(0o755)  # never group/world-writable


def test_unpack_refuses_what_is_not_a_bzip2_tarball(tmp_path):
    (tmp_path / "g.tar.bz2").write_bytes(b"not a tarball")
    with pytest.raises(gvisor_install.InstallError, match="not a readable bzip2 tarball"):
        gvisor_install.unpack(str(tmp_path / "g.tar.bz2"), str(tmp_path))


class FakeModule(object):
    @staticmethod
    def atomic_move(src, dest):
        os.rename(src, dest)


def test_replace_follows_a_symlink_backs_up_and_undoes(tmp_path):
    real = tmp_path / "opt" / "runsc"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "runsc"
    link.symlink_to(real)
    new = tmp_path / "new"
    new.write_text("new")
    work = tmp_path / "work"
    work.mkdir()
    inst = gvisor_install.Installer(FakeModule(), str(work))
    inst.backup(str(link), "1.0")
    inst.backup(str(link), "1.0")  # an existing backup is kept
    inst.replace(str(new), str(link))
    inst.replace(str(new), str(tmp_path / "absent"))
    assert link.is_symlink() and real.read_text() == "new" and oct(real.stat().st_mode & 0o777) == oct(0o755)
    assert inst.backups == [str(link) + ".nodefix-1.0"] and (tmp_path / "runsc.nodefix-1.0").read_text() == "old"
    inst.undo()
    assert link.is_symlink() and real.read_text() == "old" and not (tmp_path / "absent").exists()
