"""Sphinx configuration of partree's API reference (build: sphinx-build -b html docs/api OUT)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..")))

import partree  # noqa: E402

project = "partree"
author = "partree developers"
copyright = "partree developers"
release = version = partree.__version__

extensions = [
    "sphinx.ext.autodoc",
    "numpydoc",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# MyST: $...$ math is not used; heading anchors for links inside the markdown pages
myst_heading_anchors = 3

# autodoc: the public API is documented where it is exported, in source order
autodoc_member_order = "bysource"
autodoc_typehints = "none"
add_module_names = True

# numpydoc: no auto-generated member tables for classes (members are listed explicitly)
numpydoc_show_class_members = False

html_theme = "alabaster"
html_title = f"partree {release}"
