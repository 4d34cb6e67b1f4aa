"""The exceptions every layer may raise: bad user input (one line, naming the field and the fix), and a
job directory that another process holds."""


class ConfigError(ValueError):
    """A configuration value is invalid. The message names the field and the fix, on one line."""

    def __init__(self, field: str, problem: str, fix: str):
        self.field, self.problem, self.fix = field, problem, fix
        super().__init__(f"{field}: {problem}; {fix}")

    def __reduce__(self):
        # Rebuild from the three parts, so the error survives a trip through a worker process.
        return (ConfigError, (self.field, self.problem, self.fix))


class JobBusy(RuntimeError):
    """Another process holds the job's lock (record/jobdir.py takes it; the console passes it through)."""
