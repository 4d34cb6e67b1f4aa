"""The training progress bar of one job on the terminal (console.py says where output goes)."""

from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks.progress.progress_bar import ProgressBar

from ..console import bars_enabled, terminal

__all__ = ["JobProgressBar"]


class JobProgressBar(ProgressBar):
    """One bar per job on the terminal: optimizer steps of the whole run (resumed runs start where
    they left off), the last validation's perplexity as its postfix; validation passes draw no
    bar of their own. Off a terminal (a batch system's log file) it redraws at most once a minute."""

    def __init__(self, label: str = "train"):
        super().__init__()
        self.label = label
        self._enabled = True
        self._bar: Any = None

    @property
    def is_enabled(self) -> bool:
        return self._enabled

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def on_train_start(self, trainer, pl_module) -> None:
        if not self._enabled or not bars_enabled():
            return
        from tqdm.std import tqdm

        stream = terminal(err=True)
        tty = bool(getattr(stream, "isatty", lambda: False)())
        self._bar = tqdm(total=trainer.max_steps, initial=trainer.global_step, desc=self.label, unit="step",
                         file=stream, leave=True, dynamic_ncols=tty, ncols=None if tty else 100,
                         mininterval=0.5 if tty else 60.0, smoothing=0.1)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._bar is not None and trainer.global_step > self._bar.n:
            self._bar.update(trainer.global_step - self._bar.n)

    def on_validation_end(self, trainer, pl_module) -> None:
        ppl = (getattr(pl_module, "last_val", None) or {}).get("val/ppl")
        if self._bar is not None and ppl is not None and not trainer.sanity_checking:
            self._bar.set_postfix_str(f"val_ppl={ppl:.4g}", refresh=False)

    def _close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def on_train_end(self, trainer, pl_module) -> None:
        self._close()

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self._close()

    def teardown(self, trainer, pl_module, stage: str) -> None:
        self._close()

    def print(self, *args: Any, **kwargs: Any) -> None:
        if self._bar is not None:
            self._bar.write(" ".join(str(a) for a in args), file=terminal(err=True))
        else:
            print(*args, **kwargs)
