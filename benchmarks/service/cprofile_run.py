"""Run a module under cProfile and write its statistics however it ends.

`python -m benchmarks.service.cprofile_run OUT MODULE [ARG ...]`. `python -m cProfile` writes
nothing when the program ends by a signal, and uvicorn re-raises the SIGTERM it
handled once it has shut down; here SIGTERM raises SystemExit instead, so the
statistics are written to OUT after a graceful stop.
"""

from __future__ import annotations

import cProfile
import runpy
import signal
import sys
from types import FrameType


def _exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main() -> None:
    output, module, *args = sys.argv[1:]
    signal.signal(signal.SIGTERM, _exit)
    sys.argv = [module, *args]
    profile = cProfile.Profile()
    try:
        profile.runcall(runpy.run_module, module, run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    finally:
        profile.dump_stats(output)


if __name__ == "__main__":
    main()
