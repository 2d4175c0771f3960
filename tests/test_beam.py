"""The Euler-Bernoulli beam link and the modal data of flexible bodies (partree.flexible)."""
import numpy as np
import pytest

from partree.errors import PartreeInputError
from partree.flexible import FlexibleBody, body_mass_matrix
from partree.model import Model
from partree.models.beam import beam_frequencies, clamped_free_roots, euler_bernoulli_beam, mode_shape
from partree.spatial import spatial_inertia

#: beta L of the clamped-free modes (Euler-Bernoulli), from the tables
BETA_L = (1.8751, 4.6941, 7.8548, 10.9955)


def test_roots_are_the_tabulated_ones():
    roots = clamped_free_roots(4)
    assert np.allclose(roots, BETA_L, rtol=1e-4, atol=0)


@pytest.mark.parametrize("bending", ["y", "z"])
def test_clamped_frequencies_match_euler_bernoulli(bending):
    L, EI, rhoA = 10.0, 1.4e4, 1.2
    body, *_ = euler_bernoulli_beam(L, EI, rhoA, 6, bending=bending)
    expected = np.array(BETA_L) ** 2 * np.sqrt(EI / (rhoA * L ** 4))
    assert np.allclose(body.frequencies()[:4], expected, rtol=1e-3, atol=0)
    # the quadrature against the exact roots, well inside 0.1 %
    assert np.allclose(body.frequencies(), beam_frequencies(L, EI, rhoA, 6), rtol=1e-9, atol=0)


def test_modes_are_orthogonal_and_tip_normalised():
    L, EI, rhoA = 2.0, 30.0, 0.7
    body, mass, com, I_com = euler_bernoulli_beam(L, EI, rhoA, 8, bending="yz")
    M = body.modal_mass
    K = body.stiffness
    scale = np.sqrt(np.outer(np.diag(M), np.diag(M)))
    assert np.abs(M / scale - np.eye(8)).max() < 1e-10
    assert np.abs((K - np.diag(np.diag(K))) / np.sqrt(np.outer(np.diag(K), np.diag(K)))).max() < 1e-10
    # tip-normalised shapes: the modal mass of each is rho A L / 4 (the classical integral)
    assert np.allclose(np.diag(M), rhoA * L / 4, rtol=1e-10)
    point, Phi, Psi = body.nodes["tip"]
    assert np.allclose(point, (L, 0, 0))
    assert np.allclose(np.abs(Phi).sum(axis=0), 1.0)
    # the first mode's tip slope: 1.3765 / L (clamped-free beam with unit tip displacement)
    assert abs(np.abs(Psi[:, 0]).sum() * L - 1.37654) < 1e-4
    assert mass == pytest.approx(rhoA * L)
    assert np.allclose(com, (L / 2, 0, 0))


def test_mode_shape_is_clamped():
    for bL in clamped_free_roots(5):
        assert abs(mode_shape(bL, 0.0)) < 1e-12
        assert abs(mode_shape(bL, 0.0, 1)) < 1e-10
        assert abs(mode_shape(bL, 1.0) - 1.0) < 1e-12
        assert abs(mode_shape(bL, 1.0, 2)) < 1e-8 * bL ** 2      # free end: no moment


def test_body_mass_matrix_at_rest_holds_the_rigid_inertia():
    body, mass, com, I_com = euler_bernoulli_beam(1.5, 10.0, 2.0, 4, bending="yz", polar=1e-3)
    Mb = body_mass_matrix(mass, com, I_com, body, np.zeros(4))
    assert np.allclose(Mb[:6, :6], spatial_inertia(mass, com, I_com), atol=1e-12)
    assert np.allclose(Mb, Mb.T)
    assert np.linalg.eigvalsh(Mb).min() > 0


def _one_link(body, mass, com, I_com, children=0, at=None):
    n = 1 + children
    parent = np.arange(n) - 1
    r = np.zeros((n, 3))
    if children:
        r[1] = at
    return Model(parent, "revolute", np.tile([0, 0, 1.0], (n, 1)), np.tile(np.eye(3), (n, 1, 1)), r,
                 [mass] * n, np.tile(com, (n, 1)), np.tile(I_com, (n, 1, 1)))


def test_model_holds_the_modal_description():
    body, mass, com, I_com = euler_bernoulli_beam(1.0, 10.0, 2.0, 3)
    rigid = _one_link(body, mass, com, I_com, children=1, at=(1.0, 0, 0))
    flex = rigid.with_flexible({0: body})
    assert rigid.flexible is None
    assert flex.flexible.n_modal == 3
    assert list(flex.flexible.nmodes) == [3, 0]
    assert list(flex.flexible.idx_eta) == [0, 3]
    assert flex.flexible.node_of == {1: "tip"}
    assert flex.nq == rigid.nq and flex.nv == rigid.nv       # the joints' coordinates are unchanged
    assert "3 modes" in repr(flex)


def test_child_off_every_node_is_refused():
    body, mass, com, I_com = euler_bernoulli_beam(1.0, 10.0, 2.0, 3)
    m = _one_link(body, mass, com, I_com, children=1, at=(0.5, 0, 0))
    with pytest.raises(PartreeInputError, match="no node"):
        m.with_flexible({0: body})


def test_inconsistent_mode_data_is_refused():
    body, *_ = euler_bernoulli_beam(1.0, 10.0, 2.0, 3)
    with pytest.raises(PartreeInputError, match="shape"):
        FlexibleBody(body.first, body.xphi[:2], body.phiphi, body.stiffness)
    with pytest.raises(PartreeInputError, match="shape"):
        FlexibleBody(body.first, body.xphi, body.phiphi, np.eye(4))
    with pytest.raises(PartreeInputError, match="Phi"):
        FlexibleBody(body.first, body.xphi, body.phiphi, body.stiffness,
                     nodes={"tip": ((1, 0, 0), np.zeros((3, 2)), np.zeros((3, 3)))})
    with pytest.raises(PartreeInputError, match="not symmetric"):
        K = body.stiffness.copy()
        K[0, 1] += 1.0
        FlexibleBody(body.first, body.xphi, body.phiphi, K)


def test_non_positive_definite_modal_mass_is_refused():
    body, *_ = euler_bernoulli_beam(1.0, 10.0, 2.0, 3)
    C = body.phiphi.copy()
    C[2, 2] = 0.0                # the third mode moves no mass
    with pytest.raises(PartreeInputError, match="modal mass .* not positive definite"):
        FlexibleBody(body.first, body.xphi, C, body.stiffness)
    with pytest.raises(PartreeInputError, match="modal mass"):
        C = np.zeros_like(body.phiphi)
        C[:, :] = body.phiphi[0, 0]          # three copies of one mode
        FlexibleBody(body.first, body.xphi, C, body.stiffness)


def test_modal_data_that_does_not_fit_the_body_is_refused():
    body, mass, com, I_com = euler_bernoulli_beam(1.0, 10.0, 2.0, 3)
    light = _one_link(body, 0.1 * mass, com, 0.1 * I_com)       # modes carrying more mass than the body
    with pytest.raises(PartreeInputError, match=r"\(6 \+ m\) x \(6 \+ m\) mass matrix"):
        light.with_flexible({0: body})


def test_flexible_model_pickles_and_rigid_model_has_none():
    import pickle

    body, mass, com, I_com = euler_bernoulli_beam(1.0, 10.0, 2.0, 3, stiffening=True)
    rigid = _one_link(body, mass, com, I_com, children=1, at=(1.0, 0, 0))
    flex = rigid.with_flexible({0: body})
    back = pickle.loads(pickle.dumps(flex))
    assert back.flexible.n_modal == 3 and back.flexible.node_of == {1: "tip"}
    assert np.array_equal(back.flexible.bodies[0].stiffening, body.stiffening)
    assert pickle.loads(pickle.dumps(rigid)).flexible is None
    assert rigid.with_flexible({0: body}).with_flexible({}).flexible is None
