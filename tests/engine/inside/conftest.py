"""The `case` fixture: one tiny model of each variant with its decoded output and both traces."""
from __future__ import annotations

import pytest

from tests.engine.inside.inside_fixtures import VARIANTS, Case, make_case


@pytest.fixture(scope="module", params=list(VARIANTS))
def case(request: pytest.FixtureRequest) -> Case:
    return make_case(request.param)
