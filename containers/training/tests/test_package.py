"""The trainer as a package: pyproject.toml agrees with requirements.txt and with what the code imports,
it builds into a wheel holding every subpackage, and importing a module changes nothing in the process."""

from __future__ import annotations

import ast
import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import zipfile

import tomllib
from conftest import PKG_ROOT
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PYPROJECT = tomllib.loads((PKG_ROOT / "pyproject.toml").read_text())
PACKAGE = PKG_ROOT / "sift_trainer"


def _declared() -> list[Requirement]:
    project = PYPROJECT["project"]
    extras = [r for group in project.get("optional-dependencies", {}).values() for r in group]
    return [Requirement(r) for r in project["dependencies"] + extras]


def _pins() -> dict[str, str]:
    pins = {}
    for line in (PKG_ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_every_declared_dependency_is_satisfied_by_its_pin_in_requirements_txt():
    pins = _pins()
    problems = []
    for req in _declared():
        pin = pins.get(canonicalize_name(req.name))
        if pin is None:
            problems.append(f"{req.name}: not pinned in requirements.txt")
        elif not req.specifier.contains(pin, prereleases=True):
            problems.append(f"{req}: requirements.txt pins {pin}")
        for extra in req.extras:  # an extra's own requirements must be pinned too
            for dep in md.requires(req.name) or []:
                r = Requirement(dep)
                if r.marker and r.marker.evaluate({"extra": extra}) and canonicalize_name(r.name) not in pins:
                    problems.append(f"{req.name}[{extra}] needs {r.name}, not pinned in requirements.txt")
    assert problems == []


def _third_party_imports() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "sift_trainer":
                    found.setdefault(top, []).append(str(f.relative_to(PKG_ROOT)))
    return found


def test_every_third_party_import_is_a_declared_dependency():
    declared = {canonicalize_name(r.name) for r in _declared()}
    providers = md.packages_distributions()
    imports = _third_party_imports()
    assert "torch" in imports and "gliner2" in imports  # the walk sees the package's imports
    undeclared = {
        name: files
        for name, files in imports.items()
        if not declared & {canonicalize_name(d) for d in providers.get(name, [name])}
    }
    assert undeclared == {}


def test_the_wheel_holds_every_subpackage_and_the_version(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(PKG_ROOT / name, src / name)
    shutil.copytree(PACKAGE, src / "sift_trainer", ignore=shutil.ignore_patterns("__pycache__"))
    # offline: the venv's own setuptools, nothing fetched
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(src),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    import sift_trainer

    assert wheel.name == f"sift_trainer-{sift_trainer.__version__}-py3-none-any.whl"
    in_wheel = {n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".py")}
    in_tree = {str(f.relative_to(PKG_ROOT)) for f in PACKAGE.rglob("*.py")}
    assert in_wheel == in_tree


def test_importing_every_module_leaves_the_process_environment_alone():
    """Entry points call process.configure_process(); a module that sets the environment when imported
    would change every program that merely imports it (tests, bench scripts, the images' import check)."""
    script = """
import importlib, json, os, pkgutil, sys
before = dict(os.environ)
import sift_trainer
names = [i.name for i in pkgutil.walk_packages(sift_trainer.__path__, "sift_trainer.") if not i.name.endswith(".__main__")]
for name in names:
    importlib.import_module(name)
changed = sorted(k for k in set(os.environ) | set(before) if os.environ.get(k) != before.get(k))
from sift_trainer.process import configure_process
configure_process()
set_by_configure = sorted(k for k in os.environ if k not in before)
print(json.dumps({"modules": len(names), "changed": changed, "set_by_configure": set_by_configure}))
"""
    keys = (
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "TOKENIZERS_PARALLELISM",
        "TRANSFORMERS_NO_ADVISORY_WARNINGS",
        "OMP_WAIT_POLICY",
    )
    env = {k: v for k, v in os.environ.items() if k not in keys}
    env["PYTHONPATH"] = str(PKG_ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=str(PKG_ROOT),
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["modules"] >= 30
    # torch sets its own inductor cache dir when imported; nothing of ours may appear
    assert [k for k in out["changed"] if not k.startswith("TORCHINDUCTOR_")] == []
    assert set(keys) <= set(out["set_by_configure"])
