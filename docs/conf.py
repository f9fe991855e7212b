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

import inspect
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
    # Internal objects named by docstrings of the state evolution's public functions (``theory``, the
    # multi-head options): they render as code, not as links, since the API reference leaves them out.
    ("py:class", "singlehead.state_evolution.block_map.BlockSEMap"),
    ("py:func", "singlehead.state_evolution.block_map.check_block_options"),
    ("py:func", "singlehead.numerics.thread_map.thread_map"),
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


# ---- references by an object's defining path resolve to its public, documented name ----------------------------
#
# The API reference documents each public object once, under its public name (``singlehead.Channel``, not
# ``singlehead.model.channels.base.Channel``). A docstring may still name an object by the module that defines
# it; such a reference resolves to the documented entry of the same object. A reference to an object that is
# not documented at all (an internal one) stays unresolved, and the nitpicky build fails on it.

_KINDS = ("class", "function", "method", "property", "exception", "attribute", "classmethod", "staticmethod")


def _lookup(dotted: str) -> object | None:
    """The object at ``dotted`` (a module path, then attributes), or None. Where a package attribute and a
    submodule share a name (``singlehead.state_evolution.stability``), the attribute is the object."""
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        if i == len(parts) and i > 1:
            attr = getattr(importlib.import_module(".".join(parts[:-1])), parts[-1], None)
            if attr is not None and not inspect.ismodule(attr):
                return attr
        try:
            for name in parts[i:]:
                obj = getattr(obj, name)
        except AttributeError:
            return None
        return obj
    return None


def _key(obj: object) -> int | None:
    """Identity of a documentable object (functions, classes, methods, properties); None for plain values,
    whose identity means nothing (interned numbers and strings)."""
    obj = getattr(obj, "__func__", obj)
    if isinstance(obj, (type, property)) or callable(obj):
        return id(obj)
    return None


def _documented_by_identity(env) -> dict[int, str]:
    table = getattr(env, "_singlehead_public", None)
    if table is None:
        table = {}
        for fullname, entry in env.get_domain("py").objects.items():
            if entry.objtype in _KINDS and not getattr(entry, "aliased", False):
                key = _key(_lookup(fullname))
                if key is not None:
                    table.setdefault(key, fullname)
        env._singlehead_public = table
    return table


def _resolve_public_alias(app, env, node, contnode):
    if node.get("refdomain") != "py" or not node.get("reftarget", "").strip("~."):
        return None
    target = node["reftarget"].lstrip("~.")
    module, cls = node.get("py:module"), node.get("py:class")
    candidates = (
        [target] + ([f"{module}.{cls}.{target}"] if module and cls else []) + ([f"{module}.{target}"] if module else [])
    )
    # the module that defines the documented object whose docstring holds the reference
    owner = _lookup(f"{module}.{cls}") if module and cls else None
    home = getattr(owner, "__module__", None)
    if home:
        candidates.append(f"{home}.{target}")
    py, table = env.get_domain("py"), _documented_by_identity(env)
    for dotted in candidates:
        if not dotted.startswith("singlehead"):
            continue
        fullname = table.get(_key(_lookup(dotted)))
        if fullname is None and "." in dotted:  # an attribute of a documented class: Channel.name
            head, _, last = dotted.rpartition(".")
            base = table.get(_key(_lookup(head)))
            fullname = f"{base}.{last}" if base and f"{base}.{last}" in py.objects else None
        if fullname is not None:
            return py.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], fullname, node, contnode)
    if "." not in target:  # a bare name (an autosummary table's summary line): the one documented object so named
        named = [
            name
            for name, entry in py.objects.items()
            if name.rpartition(".")[2] == target and not getattr(entry, "aliased", False)
        ]
        if len(named) == 1:
            return py.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], named[0], node, contnode)
    return None


def setup(app):
    app.connect("missing-reference", _resolve_public_alias)
