"""Sphinx configuration of the rlcurves documentation (``make docs``).

The build is offline: no intersphinx, no remote images or fonts. The notebooks are rendered from
the outputs committed in ``notebooks/*.ipynb`` (CI executes them with nbmake; nothing is executed
here), copied into ``docs/notebooks/`` at the start of the build.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

import rlcurves  # noqa: E402

project = "rlcurves"
author = "the rlcurves authors"
copyright = "2025, the rlcurves authors"
release = version = rlcurves.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_nb",
    "sphinxarg.ext",
    "sphinx_copybutton",
]

# --- sources ---------------------------------------------------------------------------------
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
templates_path = ["_templates"]
# .rst first: autosummary writes its generated stubs (reST) with the first suffix
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]  # the notebooks' markdown opens with level-2 headings

# the notebooks: rendered from their committed outputs (executed by nbmake in CI), never here
nb_execution_mode = "off"
nb_merge_streams = True
nb_output_stderr = "remove"  # library warnings and progress bars of the run that saved them


def _copy_notebooks() -> None:
    dest = HERE / "notebooks"
    dest.mkdir(exist_ok=True)
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        target = dest / nb.name
        if not target.exists() or target.read_bytes() != nb.read_bytes():
            shutil.copyfile(nb, target)


_copy_notebooks()

# --- the API reference -------------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": True, "inherited-members": False, "show-inheritance": False}
autodoc_typehints = "none"  # numpydoc's Parameters section says the types
autodoc_member_order = "bysource"
autodoc_inherit_docstrings = False  # not a framework's own docstrings (Ray Tune's)
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = set()

# --- output ------------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"rlcurves {release}"
html_show_sourcelink = False
html_theme_options = {"navigation_with_keys": True}
nitpicky = False
linkcheck_ignore = [r"https?://.*"]  # `make docs` checks the links inside the site only


def _module_sections_as_rubrics(app, what, name, obj, options, lines) -> None:
    """numpydoc leaves module docstrings alone: their "Examples" headings would become sections
    (and duplicate labels across the module pages); render them as numpydoc renders a function's."""
    if what != "module":
        return
    for i in range(len(lines) - 1):
        title, rule = lines[i], lines[i + 1]
        underlined = rule.strip() and set(rule.strip()) == {"-"} and len(rule) >= len(title)
        if title.strip() and underlined:
            lines[i], lines[i + 1] = f".. rubric:: {title.strip()}", ""


def setup(app) -> None:
    app.connect("autodoc-process-docstring", _module_sections_as_rubrics)
