"""Model generators."""
from .autotree import auto_tree

__all__ = ["auto_tree"]
