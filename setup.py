"""Package layout that pyproject.toml cannot express alone.

The repo keeps conf/ (Hydra configs) and sweeps/ (sweep presets) at the top level; the wheel
carries them inside the package as fixedcode_study/conf and fixedcode_study/sweeps, so a
non-editable install (`pip install .`, a git URL, a built wheel) has them too.
fixedcode_study/config.py looks inside the package first, then beside it (checkout, editable).
Every folder of conf/ is listed as a data package (conf/hydra/launcher ->
fixedcode_study.conf.hydra.launcher), so a new config group ships without editing this file.

Metadata, dependencies and scripts are in pyproject.toml.
"""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent
DATA = {"conf": ["*.yaml"], "sweeps": ["*.yaml", "*.md"]}  # top-level folder -> files it ships


def data_packages(folder: str) -> list[str]:
    """fixedcode_study.<folder> and one package per sub-folder (no __init__.py needed)."""
    root = HERE / folder
    subs = sorted(p.relative_to(root).parts for p in root.rglob("*")
                  if p.is_dir() and not any(part.startswith((".", "__")) for part in p.relative_to(root).parts))
    return [f"fixedcode_study.{folder}"] + [".".join(("fixedcode_study", folder, *parts)) for parts in subs]


packages = find_packages(include=["fixedcode_study", "fixedcode_study.*"])  # not the checkout-only analysis/ alias
package_data = {"fixedcode_study.analysis.tables": ["*.csv"]}  # reference_results.csv (analyze reference=true)
for folder, patterns in DATA.items():
    for name in data_packages(folder):
        packages.append(name)
        package_data[name] = patterns

setup(
    packages=packages,
    package_dir={f"fixedcode_study.{folder}": folder for folder in DATA},
    package_data=package_data,
)
