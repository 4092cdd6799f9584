"""reportgen as a package: every module in the wheel, the wheel working outside the source
tree (templates included: an installed reportgen read them from the checkout before)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port, small_demo


def test_every_package_under_reportgen_is_in_the_wheel_list() -> None:
    """pyproject.toml lists the packages by hand (templates/ is mapped into the package):
    a new folder under reportgen/ left out of the list would be missing from the wheel."""
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "reportgen").rglob("__init__.py")
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert listed - found == {"reportgen.templates"}


@pytest.mark.slow
def test_a_wheel_runs_a_campaign_outside_the_source_tree(tmp_path: Path) -> None:
    """The wheel built from this checkout, installed into a folder of its own and run from
    another folder: the demo campaign (smaller) gives its HTML, PDF and Markdown reports."""
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(wheels)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("reportgen-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for name in ("report.html.j2", "report.css", "diff.html.j2"):
        assert f"reportgen/templates/{name}" in names
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site)]
        + [str(wheel)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    campaign = small_demo(elsewhere, free_port())
    text = campaign.read_text()
    campaign.write_text(text[: text.index("[[experiment]]", text.index("[[experiment]]") + 1)])
    # only the installed copy on the path (the tests put this checkout there for the rest)
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run(
        [sys.executable, "-c", "import reportgen.render.html as h; print(h.TEMPLATES)"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
        check=True,
    )
    assert Path(where.stdout.strip()) == site / "reportgen" / "templates"
    ran = subprocess.run(
        [sys.executable, "-m", "reportgen", "run", str(campaign), "--output", "out", "--quiet"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
        timeout=240,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (run_dir,) = (elsewhere / "out" / "demo").iterdir()
    for name in ("report.html", "report.pdf", "report.md"):
        assert (run_dir / name).stat().st_size > 1000, name
    assert (
        subprocess.run(
            [sys.executable, "-m", "reportgen", "verify", str(run_dir)],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            timeout=120,
        ).returncode
        == 0
    )
