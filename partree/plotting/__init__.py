"""Pictures of models and results (matplotlib, an optional dependency: the ``plot`` extra).

- :func:`show_model` draws a model's tree in one configuration (``partree show``);
- :func:`animate_results` animates a simulation's results file (``partree animate``);
- :func:`plot_results` writes the figures of a run: joint trajectories, energy, joint wrenches and
  configurations (``partree plot``); :func:`joints_figure`, :func:`energy_figure`,
  :func:`wrenches_figure` and :func:`configuration_figure` return each of them as a figure.

All of them draw a model through :class:`~partree.plotting.tree.TreeDrawing`.  Importing this
package does not import matplotlib; each function imports it (Agg backend, no display) and fails
with a message naming the extra before doing any work when it is missing.
"""
from .animate import animate_results
from .results import configuration_figure, energy_figure, joints_figure, plot_results, wrenches_figure
from .tree import TreeDrawing, View, apply_view, choose_view, draw_tree, engine_partition, show_model

__all__ = ["show_model", "animate_results", "plot_results", "joints_figure", "energy_figure", "wrenches_figure",
           "configuration_figure", "TreeDrawing", "View", "draw_tree", "choose_view",
           "apply_view", "engine_partition"]
