"""The documentation builds: the Sphinx API reference and the guide pages in docs/, with every
warning an error (``sphinx-build -W --keep-going -b html docs/api OUT``)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx", reason="needs the docs extra: pip install 'partree[docs]'")
pytest.importorskip("numpydoc", reason="needs the docs extra: pip install 'partree[docs]'")
pytest.importorskip("myst_parser", reason="needs the docs extra: pip install 'partree[docs]'")

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "docs" / "api"

#: page -> objects that must have an API entry there (the id Sphinx gives the entry)
API_ENTRIES = {
    "models": ["partree.Model", "partree.Data", "partree.resolve_model", "partree.load_urdf", "partree.load_mjcf",
               "partree.io.from_pinocchio", "partree.io.to_pinocchio", "partree.io.PinocchioMap",
               "partree.io.loop_constraints_to_pinocchio", "partree.ModelBuilder", "partree.Loop",
               "partree.loops.LoopSet",
               "partree.load_model", "partree.save_model", "partree.models.auto_tree",
               "partree.spatial.motion_xform", "partree.inertia.undetermined_joints"],
    "serial": ["partree.aba", "partree.rnea", "partree.crba", "partree.mass_matrix_operator",
               "partree.forward_kinematics", "partree.energy", "partree.set_num_threads",
               "partree.apply_impulse", "partree.generalized_impulse"],
    "constraint-forces": ["partree.cfa", "partree.CFAResult", "partree.constraint_bases",
                          "partree.constraint_forces"],
    "loops": ["partree.constrained_dynamics", "partree.loop_constraints", "partree.correct_state", "partree.assemble",
              "partree.algorithms.constrained_dynamics.ConstrainedResult"],
    "parallel": ["partree.forward_dynamics", "partree.parallel.evaluate_batch", "partree.parallel.partition.Partition",
                 "partree.parallel.serial.SerialEngine", "partree.parallel.mpi.MPIEngine",
                 "partree.parallel.dask_backend.DaskEngine", "partree.parallel.partition.partition",
                 "partree.parallel.partition.partition_for_ranks"],
    "simulation": ["partree.simulate", "partree.simulate_ensemble", "partree.SimulationOptions", "partree.load_results",
                   "partree.simulation.SimulationResult"],
    "figures": ["partree.plotting.plot_results", "partree.plotting.tree.show_model",
                "partree.plotting.animate.animate_results"],
    "errors": ["partree.errors.PartreeError", "partree.errors.PartreeInputError",
               "partree.errors.MissingDependencyError", "partree.errors.PartreeInertiaWarning"],
}

#: guide pages (docs/*.md, included in the toctree) -> a heading each must show
GUIDES = {
    "performance": "Summary",
    "parallel-engine": "What crosses the network",
    "conventions": "Joint types and their q / v layouts",
    "results-format": "The model blob",
    "loops-examples": "Why the corrections use the kinetic-energy metric",
    "momentum-form": "The sixth-order method",
    "scaling-model": "Limits of the model",
    "flexible-bodies": "The parallel engine",
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs_html")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           str(SOURCE), str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"sphinx-build failed:\n{proc.stderr}\n{proc.stdout}"
    return out


def _page(built, name):
    path = built / f"{name}.html"
    assert path.is_file(), f"{path.name} was not built"
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("page", sorted(API_ENTRIES))
def test_api_page_documents_its_objects(built, page):
    html = _page(built, page)
    ids = set(re.findall(r'<dt class="sig sig-object py" id="([^"]+)"', html))
    missing = [name for name in API_ENTRIES[page] if name not in ids]
    assert not missing, f"{page}.html has no API entry for {missing}"


@pytest.mark.parametrize("page", sorted(GUIDES))
def test_guide_page_is_in_the_build(built, page):
    html = _page(built, page)
    assert GUIDES[page] in html
    index = _page(built, "index")
    assert f'href="{page}.html"' in index, f"{page} is not in the index's toctree"


def test_performance_page_links_its_raw_results(built):
    html = _page(built, "performance")
    downloads = set(re.findall(r'href="(_downloads/[^"]+)"', html))
    assert any(d.endswith("/chain_1e6.json") for d in downloads)
    assert any(d.endswith("/scaling.csv") for d in downloads)
    for d in downloads:
        assert (built / d).is_file(), f"{d} is linked but was not copied"
    for src in re.findall(r'<img [^>]*src="([^"]+)"', html):
        assert (built / src).is_file(), f"image {src} is missing"
