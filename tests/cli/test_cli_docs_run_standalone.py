"""The documented lines that read nothing another line makes, in a sandbox of their own (see
test_cli_docs_run.py, the other half): a file of its own so that xdist runs it beside that one."""

from __future__ import annotations

import pytest
from test_cli_docs_run import COMMANDS, check_documented_commands, standalone


@pytest.mark.slow
def test_every_standalone_documented_command_runs_as_written(tmp_path):
    check_documented_commands([doc for doc in COMMANDS if standalone(doc)], tmp_path)
