"""A failed build of our own image files fails the test, whatever its output says: the
network words in it (an apt mirror that does not resolve, our own base image missing) used
to turn it into a skip. The one skip left: a registry refusing a third-party image. The
build outputs are real (build_errors/capture.sh: podman and apt-get on this machine)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness import builds, images, kind, rook
from harness.builds import environmental

FIX = Path(__file__).resolve().parent / "build_errors"
OURS_FAILING = ("apt-mirror-unresolved.err", "podman-build-ours-missing.err")
THIRD_PARTY = {"podman-pull-third-party.err": "debian:bookworm-slim",
               "podman-build-third-party.err": "busybox:1.36"}  # fmt: skip


def test_only_a_registry_refusing_a_third_party_image_counts() -> None:
    for name, ref in THIRD_PARTY.items():
        why = builds.registry_pull_refusal((FIX / name).read_text())
        assert why.startswith(f"the registry refused the third-party image {ref}: "), why
        assert "no such host" in why
    for name in OURS_FAILING:
        text = (FIX / name).read_text()
        assert environmental(RuntimeError(text))  # what used to make it a skip
        assert builds.registry_pull_refusal(text) == ""


def fake_build(tmp_path: Path, fixture: str) -> Path:
    """A build script that fails as the real build did (its stderr, exit 1)."""
    script = tmp_path / "build.sh"
    script.write_text(f"#!/usr/bin/env bash\ncat '{FIX / fixture}' >&2\nexit 1\n")
    script.chmod(0o755)
    return script


@pytest.fixture()
def tools_present(monkeypatch: pytest.MonkeyPatch) -> None:
    """product_archives' own check for podman, runc and debootstrap passes."""
    monkeypatch.setattr(images.shutil, "which", lambda name: f"/usr/bin/{name}")


@pytest.mark.parametrize("fixture", OURS_FAILING)
@pytest.mark.usefixtures("tools_present")
def test_our_images_failing_build_is_a_failure(
    fixture: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(images, "BUILD_IMAGES", fake_build(tmp_path, fixture))
    with pytest.raises(images.ImageBuildFailed) as err:
        images.product_archives(timeout=60)
    # not a RuntimeError: no `except RuntimeError` + environmental() turns it into a skip
    assert not isinstance(err.value, RuntimeError)
    assert "build.sh failed (rc=1)" in str(err.value)


@pytest.mark.usefixtures("tools_present")
def test_a_refused_third_party_pull_skips_saying_which_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        images, "BUILD_IMAGES", fake_build(tmp_path, "podman-build-third-party.err")
    )
    with pytest.raises(images.ImagesUnavailable) as err:
        images.product_archives(timeout=60)
    assert str(err.value).startswith("the registry refused the third-party image busybox:1.36")
    assert environmental(err.value)  # the callers' rule: a skip, the reason printed


@pytest.fixture()
def rook_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rook, "REPO", tmp_path)  # it names the script relative to the repo


@pytest.mark.parametrize("fixture", OURS_FAILING)
@pytest.mark.usefixtures("rook_here")
def test_our_rook_and_kind_images_failing_builds_are_failures(fixture: str, tmp_path: Path) -> None:
    script = fake_build(tmp_path, fixture)
    with pytest.raises(RuntimeError) as err:
        rook._run_build(script, 60, image=True)
    assert not isinstance(err.value, rook.RookUnavailable)
    with pytest.raises(RuntimeError) as err:
        kind._script(str(script), dict(os.environ), 60, image=True)
    assert not isinstance(err.value, kind.KindUnavailable)
    # a third-party build (Rook's binary from the Go proxy): the machine's fault, a skip
    with pytest.raises(rook.RookUnavailable):
        rook._run_build(script, 60)


@pytest.mark.usefixtures("rook_here")
def test_a_refused_third_party_pull_in_rook_and_kind_images_skips(tmp_path: Path) -> None:
    script = fake_build(tmp_path, "podman-pull-third-party.err")
    with pytest.raises(rook.RookUnavailable, match="third-party image debian:bookworm-slim"):
        rook._run_build(script, 60, image=True)
    with pytest.raises(kind.KindUnavailable, match="third-party image debian:bookworm-slim"):
        kind._script(str(script), dict(os.environ), 60, image=True)
