# SPDX-License-Identifier: GPL-3.0-or-later
"""The lab images are cached: with their recipe unchanged, a rebuild is a no-op."""

import pytest

from conftest import assert_ok, run_logged

IMAGES = ("debian11", "debian12", "debian13")


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
    rc, out = run_logged("images-rebuild", ["bash", "lab/images/build.sh"])
    assert_ok("images-rebuild", rc, out)
    for name in IMAGES:
        assert "image localhost/nodefix-%s is up to date" % name in out, out
    assert "building" not in out
