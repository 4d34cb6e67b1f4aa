"""A sweep's data, prepared once in the sweep's process before its jobs fan out.

Every job's config is composed by the launcher first, and `data.prepare` runs once per distinct
data config among the jobs that still train (not for jobs already trained), so the workers find
the token cache ready instead of tokenizing the corpus side by side.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["prepare_data_once"]

log = logging.getLogger(__name__)


def prepare_data_once(jobs: Sequence[tuple[Path, Mapping[str, Any]]]) -> int:
    """data.prepare once per distinct data config among the jobs (job directory, composed config) that
    still train; returns how many. A config that fails here is left to its job, which reports the
    error as its own."""
    from ..data.prepare import prepare
    from ..record.jobdir import JobDir

    seen: set[str] = set()
    for job_dir, config in jobs:
        try:
            if not config["force"] and JobDir(job_dir).is_trained():
                continue  # skipped or evaluated only: no tokens needed
            key = json.dumps(config["data"], sort_keys=True, default=str)
            if key in seen:
                continue
            seen.add(key)
            prepare(config["data"])
        except Exception as err:  # noqa: BLE001 - the job meets it again and reports it
            log.debug("data preparation left to the job: %s", err)
    return len(seen)
