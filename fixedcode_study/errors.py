"""The exceptions every layer may raise: bad user input (one line, naming the field and the fix), a
job directory that another process holds, and a write that found no room (one line, naming the path)."""

import errno
import os


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


# The failed writes a user fixes outside the program, and how: what WriteFailed's line suggests.
WRITE_REMEDIES = {
    errno.ENOSPC: "free space",
    errno.EDQUOT: "free space or raise the quota",
    errno.EFBIG: "raise the file size limit (ulimit -f)",
    errno.EROFS: "make the filesystem writable",
}


class WriteFailed(OSError):
    """A write found no room: a full disk (ENOSPC), a quota (EDQUOT), the file size limit (EFBIG) or a
    read-only filesystem (EROFS). One line naming the reason, the path being written and the way out,
    e.g. `no space left on device writing .../last.ckpt; free space and re-run to resume from step 8`.

    Still an OSError with its errno, strerror and filename, so `except OSError` sees it as before.
    `fix` defaults to the remedy for the errno; the job replaces it with where a re-run resumes.
    """

    def __init__(self, code: int, path: str | os.PathLike, fix: str | None = None):
        super().__init__(code, os.strerror(code), str(path))
        self.fix = fix or f"{WRITE_REMEDIES.get(code, 'check the filesystem')} and try again"

    def __str__(self) -> str:
        reason = self.strerror[:1].lower() + self.strerror[1:]
        return f"{reason} writing {self.filename}; {self.fix}"

    def __reduce__(self):
        return (WriteFailed, (self.errno, self.filename, self.fix))

    @classmethod
    def of(cls, err: BaseException, path: str | os.PathLike) -> "WriteFailed | None":
        """`err` as a WriteFailed naming `path` (one that already names its path is kept as it is);
        None when `err` is not a write that found no room."""
        if isinstance(err, WriteFailed):
            return err
        if isinstance(err, OSError) and err.errno in WRITE_REMEDIES:
            return cls(err.errno, path)
        return None
