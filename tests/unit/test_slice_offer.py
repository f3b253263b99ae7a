"""How a day on a worker offers its slices to the other workers: a broker that fails is a warning without
its password (the day's machine reads the slices itself), never a failed day."""

import logging

from pipelines.workers import offer_to


class _Kept(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_broker_that_fails_is_a_warning_without_its_password(tmp_path):
    offer = offer_to("redis://:s3cret-pw@127.0.0.1:1/0")  # nothing listens on port 1
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
