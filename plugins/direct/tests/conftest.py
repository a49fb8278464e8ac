"""Fixtures of the direct plugin's tests: handles that look like other device classes."""
import pytest
from convsolve import testing


@pytest.fixture
def fake_handle():
    """fake_handle(kind) -> convsolve.testing.fake_handle(kind): the handle attributes the
    config hooks read, for an AVX-512 CPU ('avx512'), an AVX2 CPU ('avx2') or a GPU ('gpu'),
    with no device behind it."""
    return testing.fake_handle
