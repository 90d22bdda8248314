"""`python -m tracelab`, and the `tracelab` command."""
import signal
import sys


def run() -> int:
    """The command, with Ctrl-C ending it in one line at any moment: while it still loads, as
    later (exit 130), and once it has finished (the process ends as the signal says, with no
    traceback from the interpreter's shutdown)."""
    try:
        from tracelab.app.cli import main
    except KeyboardInterrupt:
        print("tracelab: interrupted", file=sys.stderr)
        return 130
    code = main()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    return code


if __name__ == "__main__":
    raise SystemExit(run())
