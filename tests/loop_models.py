"""Models with closed loops shared by the loop tests and the MPI check scripts."""
import numpy as np

import partree
from partree import Loop
from partree.models.generators import chain, random_tree
from partree.models.local_loops import with_local_loops


def four_bar(L=1.0, g=9.81):
    """Seed 003's planar four-bar: crank and rocker on the ground (two trees), the coupler on the
    crank, the coupler's tip pinned to the rocker's by a revolute loop."""
    Icom = np.diag([1e-9, L * L / 12, L * L / 12])
    return partree.Model(parent=[-1, 0, -1], jtype="revolute", axis=[[0, 0, 1]] * 3,
                         E_tree=np.tile(np.eye(3), (3, 1, 1)), r_tree=[[0, 0, 0], [L, 0, 0], [L, 0, 0]],
                         mass=[1, 1, 1], com=[[L / 2, 0, 0]] * 3, I_com=[Icom] * 3, gravity=(0, -g, 0),
                         joint_names=["crank", "coupler", "rocker"], body_names=["b1", "b2", "b3"],
                         name="four-bar", loops=[Loop("cut", "revolute", "b2", "b3", (L, 0, 0), (L, 0, 0))])


def forest(sizes=(30, 30, 30), seed=0):
    """Random trees side by side (a forest), with local loops, a loop joining the first two trees
    and a weld of the last tree to the world."""
    trees = [random_tree(n, seed=seed + k) for k, n in enumerate(sizes)]
    off = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    parent = np.concatenate([np.where(t.parent >= 0, t.parent + o, -1) for t, o in zip(trees, off)])

    def cat(name):
        return np.concatenate([getattr(t, name) for t in trees])

    m = partree.Model(parent=parent, jtype=cat("jtype"), axis=cat("axis"), axis2=cat("axis2"), E_tree=cat("E_tree"),
                      r_tree=cat("r_tree"), mass=cat("mass"), com=cat("com"), I_com=cat("I_com"), name="forest")
    m = with_local_loops(m, 6, seed=seed)
    a, b = int(off[0] + sizes[0] // 2), int(off[1] + sizes[1] // 3)
    return m.with_loops([Loop("join", "spherical", a, b, None, (0.1, 0.0, 0.0)),
                         Loop("anchor", "weld", int(off[-1] + sizes[-1] - 1), None)])


def local_loop_models():
    """Trees of each kind with loops between nearby bodies (and one to the world)."""
    return [with_local_loops(random_tree(120, seed=3, floating_base=True), 6, seed=3, kinds=("spherical", "weld")),
            with_local_loops(chain(150, joint="universal"), 8, seed=4, world=1),
            with_local_loops(random_tree(100, seed=5), 5, seed=5)]


def scissor_pins(units):
    """The tree scissor mast with its left-out pins between neighbouring units as revolute loops
    about the pin axis y (B_k's upper end to B_{k+1}'s lower end, closed at q = 0): loops that
    join two units, so the partitioner lets them span parts."""
    m = partree.resolve_model(f"scissor:units={units}")
    return m.with_loops([Loop(f"pin{k}", "revolute", 2 * k + 1, 2 * k + 3, (0.5, 0, 0), (-0.5, 0, 0), axis=(0, 1, 0))
                         for k in range(units - 1)])


def spanning_cases():
    """(model, part roots) whose partitions split loops, which the engine then solves at the
    root: a loop cut inside its paths, a loop to the world from a part below others, random
    trees cut at random bodies, and the forest with its joining loop across parts."""
    from partree.models.generators import chain as _chain
    rng = np.random.default_rng(11)
    span = _chain(20).with_loops([Loop("l", "spherical", 5, 12, (0.5, 0, 0), (0.2, 0, 0))])
    world = _chain(20).with_loops([Loop("w", "spherical", 15, None, (0.5, 0, 0), (3.0, 4.0, 0))])
    out = [(span, [8]), (span, [3, 8, 10]), (world, [10]), (world, [3, 16])]
    for m in local_loop_models()[1:] + [forest()]:
        both = np.flatnonzero((m.loops.body_a >= 0) & (m.loops.body_b >= 0))[:3]
        split = np.maximum(m.loops.body_a[both], m.loops.body_b[both])      # the later end: its subtree
        roots = np.union1d(split, rng.choice(np.arange(1, m.n), size=3, replace=False))   # lacks the other
        out.append((m, roots[m.parent[roots] >= 0].tolist()))
    return out


def state(m, seed):
    """A random state (q, qd, tau) and random external wrenches."""
    rng = np.random.default_rng(seed)
    return (m.random_configuration(rng), m.random_velocity(rng, 2.0), rng.normal(size=m.nv),
            rng.normal(size=(m.n, 6)))
