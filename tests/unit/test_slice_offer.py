"""How a day on a worker offers its slices to the other workers: only in a worker's processes (never because
a broker is in the environment, never on import), and a broker that fails is a warning without its password
(the day's machine reads the slices itself), never a failed day."""

import logging
import os
import subprocess
import sys

from pipelines.workers import offer_to


def test_outside_a_worker_slices_are_not_offered():
    # As `fleet run` or `dagster dev` starts: a broker in the environment, the workers' module and the
    # definitions imported; only `fleet worker` (serve) sets the offer.
    code = (
        "import pipelines.workers, pipelines.definitions; from pipelines.lib.ingest import split; "
        "print(split._process_offer)"
    )
    env = {**os.environ, "FLEET_BROKER": "redis://127.0.0.1:1/0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "None"


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
