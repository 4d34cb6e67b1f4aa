"""One exception type for bad user input, so every entry point can print it as one line."""


class ConfigError(ValueError):
    """A configuration value is invalid. The message names the field and the fix, on one line."""

    def __init__(self, field: str, problem: str, fix: str):
        self.field, self.problem, self.fix = field, problem, fix
        super().__init__(f"{field}: {problem}; {fix}")

    def __reduce__(self):
        # Rebuild from the three parts, so the error survives a trip through a worker process.
        return (ConfigError, (self.field, self.problem, self.fix))
