"""Sphinx configuration of the singlehead documentation.

Build (nitpicky: every cross-reference must resolve; warnings are errors; every gallery example
is executed)::

    pip install -e '.[docs]'
    python -m sphinx -n -W --keep-going -b html docs docs/_build/html

Add ``-D plot_gallery=0`` (``singlehead docs --no-gallery``) to build without executing the
gallery: a quick check of the reST and the cross-references; CI executes it.

or ``singlehead docs``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The package is normally installed (editable); the source tree also works without installing it.
sys.path.insert(0, str(ROOT / "src"))

import singlehead  # noqa: E402
# Gallery examples are timed one thread each (the budget is <= 60 s per example on 2 cores);
# a headless backend so that the build runs anywhere.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

project = "singlehead"
author = "singlehead contributors"
copyright = "2026, singlehead contributors"
release = version = singlehead.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    # Ships MathJax into _static/mathjax and points mathjax_path there: equations render offline.
    "sphinx-mathjax-offline",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
default_role = "code"

autosummary_generate = True
# Nitpicky builds (``-n``) require every cross-reference to resolve. Without intersphinx (the build
# runs offline), third-party types named in docstrings cannot resolve; these are the only ones ignored.
nitpick_ignore = [
    ("py:class", "pandas.DataFrame"),
]
autodoc_typehints = "none"  # the signatures carry them; numpydoc sections carry the meaning
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# The docstrings of this project use ``Attributes`` and prose sections freely; numpydoc's
# validation stays off, tests/architecture/test_docstrings.py checks what the project requires.
numpydoc_validation_checks: set[str] = set()

sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "min_reported_time": 0,
    # A failing example fails the build (sphinx-gallery's default, stated explicitly).
    "only_warn_on_example_error": False,
    "abort_on_example_error": False,
}

html_theme = "pydata_sphinx_theme"
html_title = f"singlehead {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path: list[str] = []
html_show_sourcelink = False
html_copy_source = False  # the reST sources are not linked, so they are not shipped either
