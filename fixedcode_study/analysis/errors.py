"""One exception type for problems the user can fix, so the CLI can print it as a single line."""


class AnalysisError(RuntimeError):
    """Bad input to the analysis (missing directory, no jobs, W&B unreachable). Message is one line."""
