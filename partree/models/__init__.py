"""Model generators."""
from .autotree import auto_tree
from .generators import binary_tree, chain, random_tree
from .scissor import ScissorDrive, scissor_angle, scissor_drive, scissor_height, scissor_mast
from .seeds import cardan_chain, space_robot, three_arm_inputs, three_arm_manipulator

#: generators for model spec strings (``partree.specs`` merges this dict into its registry):
#: e.g. ``chain:n=100,joint=universal``, ``binary:n=1e6``, ``random:n=1000,seed=1,floating_base=true``,
#: ``spacerobot``, ``cardan:n=50``, ``threearm:floating_base=true``, ``scissor:units=100``,
#: ``scissor:units=3,closed=true,support=slider``, ``scissor:units=10,section=triangle``.
GENERATORS = {
    "chain": chain,
    "binary": binary_tree,
    "random": random_tree,
    "spacerobot": space_robot,
    "cardan": cardan_chain,
    "threearm": three_arm_manipulator,
    "scissor": scissor_mast,
}

__all__ = ["auto_tree", "chain", "binary_tree", "random_tree", "space_robot", "cardan_chain",
           "three_arm_manipulator", "three_arm_inputs", "scissor_mast", "ScissorDrive", "scissor_drive",
           "scissor_angle", "scissor_height", "GENERATORS"]
