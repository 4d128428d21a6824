"""Shared fixtures for the memory tests: a fresh store per test, on each backend.

The ``store`` fixture is parametrised over SQLite (a file under ``tmp_path``) and
PostgreSQL (a fresh schema in the database named by ``WMKIT_POSTGRES_URL``, dropped
after the test). Without that variable the PostgreSQL cases skip, saying why.
"""

import os
import uuid

import pytest
import sqlalchemy as sa

from wmkit.memory import Governor, StateManager, Store

POSTGRES_URL = os.environ.get("WMKIT_POSTGRES_URL")
NO_POSTGRES = 'WMKIT_POSTGRES_URL is not set (start a server with: eval "$(.ci/postgres.sh)")'


def open_store(backend: str, tmp_path) -> tuple[str, str | None]:
    """Return ``(url, schema)`` of a fresh, empty store on ``backend``."""
    if backend == "sqlite":
        return str(tmp_path / "memory.db"), None
    if not POSTGRES_URL:
        pytest.skip(NO_POSTGRES)
    return POSTGRES_URL, f"t_{uuid.uuid4().hex[:12]}"


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def location(backend, tmp_path):
    """``(url, schema)`` of a fresh store; the PostgreSQL schema is dropped afterwards."""
    url, schema = open_store(backend, tmp_path)
    yield url, schema
    if schema is not None:
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.execute(sa.schema.DropSchema(schema, cascade=True, if_exists=True))
        engine.dispose()


@pytest.fixture
def store(location):
    url, schema = location
    s = Store.open(url, schema=schema)
    yield s
    s.close()


@pytest.fixture
def memory(store) -> StateManager:
    return StateManager(store)


@pytest.fixture
def governor(store) -> Governor:
    return Governor(store, backoff_s=0.0, max_backoff_s=0.0)
