"""How a day on a worker offers its slices to the other workers: only on a worker, and a broker that fails
is a warning without its password (the day's machine reads the slices itself), never a failed day."""

import logging

from pipelines.lib.settings import WORKER_BROKER_ENV
from pipelines.workers import slice_offer


def test_outside_a_worker_slices_are_not_offered(monkeypatch):
    monkeypatch.delenv(WORKER_BROKER_ENV, raising=False)
    assert slice_offer() is None


class _Kept(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_broker_that_fails_is_a_warning_without_its_password(monkeypatch, tmp_path):
    monkeypatch.setenv(WORKER_BROKER_ENV, "redis://:s3cret-pw@127.0.0.1:1/0")  # nothing listens on port 1
    offer = slice_offer()
    kept = _Kept()
    logger = logging.getLogger("pipelines.workers")
    logger.addHandler(kept)
    try:
        offer([tmp_path / "slice-0.task.json"])
    finally:
        logger.removeHandler(kept)
    (record,) = kept.records
    assert "slices not offered to other workers" in record.getMessage()
    assert "this machine reads them" in record.getMessage() and "s3cret-pw" not in record.getMessage()
