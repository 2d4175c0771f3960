import numpy as np
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: longer tests (large models)")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def rel_err(a, b):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))
