"""The joint dispatch is one branch written in every kernel that forms joint kinematics (see the
partree.joints docstring for why it is not an inlined helper): every copy must be the same branch,
so that a joint type added or changed in one kernel cannot silently differ in another."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "partree"

#: the kernels with a copy of the dispatch, and how many copies each holds
COPIES = {
    "algorithms/aba.py": 1,
    "algorithms/rnea.py": 1,
    "algorithms/crba.py": 1,
    "algorithms/kinematics.py": 1,
    "algorithms/velocity_from_momentum.py": 1,
    "algorithms/cfa/common.py": 1,
    "parallel/kernels.py": 2,
}

#: modules that call the one joint function with the joint type known at run time only, outside a
#: hot loop (no copy of the branch to keep equal)
PLAIN_CALLS = {
    "inertia.py": "the load-time check of each joint's motion, once per model",
    "algorithms/flexible_dynamics.py": "the flexible bodies' NumPy recursion: one call of the shared dispatch per body",
    "algorithms/flexible_kernels.py": "the flexible bodies' compiled recursion: one call of the shared dispatch per "
                                      "body, next to the modal work of a flexible body",
}

_BRANCH = re.compile(
    r"if jtype\[i\] == REVOLUTE:\s+# the joint dispatch.*?\n(?P<body>.*?)\n\s*else:\n\s*(?:nv = )?joint_kinematics_at\("
    r"(?P<at>[^)]*)\)", re.S)


def _normal(text):
    """A copy with what may differ between kernels taken out: whitespace, the name of the velocity
    vector, whether nv is kept, and the per-kernel work done after the kinematics in a branch."""
    text = re.sub(r"\bqd0\b", "qd", text)
    text = re.sub(r"\bnv = ", "", text)
    calls = re.findall(r"joint_kinematics\((?:[^()]|\([^()]*\))*\)", text)
    return [re.sub(r"\s+", " ", c) for c in calls]


@pytest.mark.parametrize("path", sorted(COPIES))
def test_every_kernel_holds_the_same_joint_dispatch(path):
    src = (ROOT / path).read_text()
    found = list(_BRANCH.finditer(src))
    assert len(found) == COPIES[path], f"{path}: {len(found)} copies of the joint dispatch, expected {COPIES[path]}"
    ref = ["joint_kinematics(REVOLUTE, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i], E[i], r[i], "
           "S[iv:], cJ, R, R2)",
           "joint_kinematics(PRISMATIC, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i], E[i], r[i], "
           "S[iv:], cJ, R, R2)",
           "joint_kinematics(FIXED, axis[i], axis2[i], q, idx_q[i], qd, iv, E_tree[i], r_tree[i], E[i], r[i], "
           "S[iv:], cJ, R, R2)"]
    for m in found:
        assert _normal(m.group("body")) == ref, f"{path}: the inlined branches differ from the dispatch"
        at = re.sub(r"\s+", " ", re.sub(r"\bqd0\b", "qd", m.group("at")))
        assert at == "i, jtype, axis, axis2, q, idx_q, qd, iv, E_tree, r_tree, E, r, S, cJ, R, R2", path


def test_no_other_kernel_calls_the_joint_kinematics():
    """A kernel forming joint kinematics outside the list above would escape the check."""
    users = set()
    for p in ROOT.rglob("*.py"):
        rel = p.relative_to(ROOT).as_posix()
        if rel == "joints.py":
            continue
        if re.search(r"\bjoint_kinematics(_at)?\(", p.read_text()):
            users.add(rel)
    assert users == set(COPIES) | set(PLAIN_CALLS)
    for rel in PLAIN_CALLS:
        src = (ROOT / rel).read_text()
        assert not _BRANCH.search(src) and re.search(r"joint_kinematics\(jtype\[i\]", src), rel
