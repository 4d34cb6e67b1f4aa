"""One exception type for bad user input, so every entry point can print it as one line."""


class ConfigError(ValueError):
    """A configuration value is invalid. The message names the field and the fix, on one line."""

    def __init__(self, field: str, problem: str, fix: str):
        self.field = field
        super().__init__(f"{field}: {problem}; {fix}")
