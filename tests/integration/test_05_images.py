# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab images are cached: with their recipe unchanged, a rebuild is a no-op."""

import os

import pytest

from conftest import ENV, assert_ok, run_logged

IMAGES = ("debian11", "debian12", "debian13", "debian12-containerd", "debian12-gvisor")


@pytest.mark.lab
def test_images_exist_with_systemd_and_python():
    for name in IMAGES:
        argv = ["podman", "image", "inspect", "--format", "{{index .Labels \"nodefix.recipe\"}} {{.Config.Cmd}}",
                "localhost/nodefix-" + name]
        rc, out = run_logged("image-" + name, argv)
        assert_ok("image-" + name, rc, out)
        assert "/sbin/init" in out


@pytest.mark.lab
def test_unchanged_recipe_does_not_rebuild():
    rc, out = run_logged("images-rebuild", ["bash", "lab/images/build_all.sh"])
    assert_ok("images-rebuild", rc, out)
    for name in IMAGES:
        assert "image localhost/nodefix-%s is up to date" % name in out, out
    assert "building" not in out


@pytest.mark.lab
def test_vm_image_is_cached_and_holds_disk_kernel_and_initramfs():
    rc, out = run_logged("images-vm-rebuild", ["bash", "lab/vm/build.sh"])
    assert_ok("images-vm-rebuild", rc, out)
    assert "image nodefix-vm-debian12 is up to date" in out, out
    assert "building" not in out
    image = ENV["NODEFIX_VM_IMAGE_DIR"]  # machine-wide (scripts/env.sh), reused by a fresh checkout
    with open(os.path.join(image, "recipe")) as fh:
        recipe = fh.read().strip()
    assert len(recipe) == 16 and recipe in out, (recipe, out)
    # a kernel, an initramfs and a qcow2 disk (its magic is "QFI\xfb")
    for name in ("vmlinuz", "initrd"):
        assert os.path.getsize(os.path.join(image, name)) > 1 << 20, name
    with open(os.path.join(image, "disk.qcow2"), "rb") as fh:
        assert fh.read(4) == b"QFI\xfb"
