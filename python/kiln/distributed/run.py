"""Starts one process per rank of a single-node data-parallel job.

    python -m kiln.distributed.run --nproc 4 train.py --epochs 3
    python -m kiln.distributed.run --nproc 2 --master-port 29500 --timeout 60 train.py
    python -m kiln.distributed.run --nproc 2 -m mypkg.train       # a module instead of a script
    python path/to/kiln/distributed/run.py --nproc 2 train.py      # the same, run as a file

Each of the N children runs ``sys.executable script.py args...`` (``-m``: ``sys.executable -m
module args...``) with the environment the ``env://`` init method reads (see
include/kiln/distributed.h):

    RANK, LOCAL_RANK          0 .. N-1 (the same number: one node)
    WORLD_SIZE, LOCAL_WORLD_SIZE   N
    MASTER_ADDR, MASTER_PORT  where rank 0 serves the rendezvous (--master-addr, default
                              127.0.0.1, or a host name or IPv6 address such as ::1;
                              --master-port, default a port free when the launcher looked)
    KILN_DIST_TIMEOUT         --timeout, when given: seconds every blocking distributed call waits
                              (from 0.001 to 1e9, the range the ranks accept)
    OMP_NUM_THREADS           unless already set: the cores divided among the ranks (at least 1),
                              which Kiln's intra-op thread pool follows

The children share the launcher's stdout and stderr, unprefixed. Each runs in its own session
(process group), so a signal the launcher sends a rank also reaches the processes that rank
started; a consequence is that children cannot read from the terminal.

Exit status:
    0          every rank exited with 0
    code       the first rank seen to fail exited with `code`; the launcher names it on stderr and
               stops the other ranks: SIGTERM, then SIGKILL after --kill-grace seconds
    128 + sig  the first rank seen to fail was killed by signal `sig`, or the launcher itself got
               SIGINT/SIGTERM `sig`, which it forwards to every rank (then SIGKILL after
               --kill-grace seconds to those still running)
    2          bad arguments (after printing the usage)

From Python, ``main(["--nproc", "2", "train.py"])`` does the same and returns the status, 2 for
bad arguments included (it does not raise SystemExit).
This module uses the standard library only, so it runs without Kiln's compiled core.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import time

__all__ = ["main"]

_PROG = "kiln.distributed.run"
# How often the launcher checks its children. A failure is noticed within this long, and two
# failures within one interval are ranked by rank rather than by time.
_POLL_S = 0.05
# The timeouts the ranks accept (timeout_seconds in src/distributed/process_group.cc refuses more
# than 1e9 s, in the argument and in KILN_DIST_TIMEOUT). They count whole milliseconds, so a
# shorter timeout would become 0 ms and fail every wait at once. kiln.distributed checks its
# init_process_group(timeout=...) here too.
_MIN_TIMEOUT_S = 1e-3
_MAX_TIMEOUT_S = 1e9


def _parse(kind, text: str):
    # A ValueError would make argparse name the checking function ("invalid _port value").
    try:
        return kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None


def _positive_int(text: str) -> int:
    value = _parse(int, text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _port(text: str) -> int:
    value = _parse(int, text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be in 1..65535, got {value}")
    return value


def _timeout_problem(seconds: float):
    """What is wrong with a timeout of `seconds`, or None when the ranks accept it."""
    if _MIN_TIMEOUT_S <= seconds <= _MAX_TIMEOUT_S:  # also False for NaN
        return None
    return f"must be a positive number of seconds from 0.001 (1 ms) to 1e9, got {seconds:g}"


def _timeout(text: str) -> float:
    value = _parse(float, text)
    problem = _timeout_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


def _non_negative_float(text: str) -> float:
    value = _parse(float, text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m {_PROG}",
        description="Start NPROC processes of a Python script, one per rank, with the "
                    "environment kiln.distributed's env:// rendezvous reads. Exits with the "
                    "first failing rank's status after stopping the others, or 0.")
    parser.add_argument("--nproc", type=_positive_int, required=True,
                        help="number of ranks (processes) to start, at least 1")
    parser.add_argument("--master-addr", default="127.0.0.1",
                        help="address of rank 0's rendezvous store (default: %(default)s)")
    parser.add_argument("--master-port", type=_port, default=None,
                        help="port of rank 0's rendezvous store (default: a free port)")
    parser.add_argument("--timeout", type=_timeout, default=None,
                        help="seconds each blocking distributed call waits, 0.001 to 1e9, "
                             "passed to the ranks as KILN_DIST_TIMEOUT (default: "
                             "KILN_DIST_TIMEOUT as inherited; unset, the ranks wait 300 s)")
    parser.add_argument("--kill-grace", type=_non_negative_float, default=5.0,
                        help="seconds a rank has to exit after SIGTERM before SIGKILL "
                             "(default: %(default)s)")
    parser.add_argument("-m", "--module", action="store_true",
                        help="treat SCRIPT as a module name, run as `python -m SCRIPT`")
    parser.add_argument("script", help="the Python script (or, with -m, module) each rank runs")
    # argparse makes every REMAINDER positional required, and would list script_args among the
    # missing arguments when SCRIPT is missing, though it may be empty.
    parser.add_argument("script_args", nargs=argparse.REMAINDER,
                        help="arguments passed to the script unchanged").required = False
    return parser


def _free_port(addr: str) -> int:
    # The port is free now; another process could take it before rank 0 binds it. Pass
    # --master-port where that race matters. The address is resolved as rank 0's store resolves
    # MASTER_ADDR (getaddrinfo's first answer, brackets of "[::1]" dropped), so that an IPv6
    # address gets an IPv6 socket.
    host = addr[1:-1] if len(addr) > 2 and addr[0] == "[" and addr[-1] == "]" else addr
    family, kind, proto, _, sockaddr = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
    with socket.socket(family, kind, proto) as s:
        s.bind(sockaddr)
        return s.getsockname()[1]


def _describe(returncode: int) -> str:
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:  # real-time signals have no name of their own
        name = f"signal {-returncode}"
    return f"was killed by {name}"


def _status(returncode: int) -> int:
    # Popen reports death by signal s as -s; a shell reports it as 128 + s, and sys.exit(-s)
    # would turn into 256 - s, which reads like an ordinary code.
    return 128 - returncode if returncode < 0 else returncode


def _log(message: str) -> None:
    print(f"{_PROG}: {message}", file=sys.stderr, flush=True)


class _Ranks:
    """The children, one per rank."""

    def __init__(self):
        self.procs = []

    def running(self):
        return [(rank, p) for rank, p in enumerate(self.procs) if p.poll() is None]

    def send(self, sig: int) -> None:
        # Only to children not yet reaped: a reaped child's pid may belong to another process.
        for _, p in self.running():
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:  # exited since poll()
                pass


def _arguments(argv):
    """The parsed arguments, with a master port; on bad arguments argparse prints the usage and
    the problem to stderr and raises SystemExit(2) (--help: prints the help, SystemExit(0))."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.module and not os.path.isfile(args.script):
        parser.error(f"script not found: {args.script}")
    if args.master_port is None:
        try:
            args.master_port = _free_port(args.master_addr)
        except OSError as e:
            parser.error(f"cannot find a free port on {args.master_addr} ({e}); "
                         f"pass --master-port")
    return args


def main(argv=None) -> int:
    """Runs the launcher on `argv` (default: sys.argv[1:]) and returns its exit status: 2 for bad
    arguments (after printing the usage and the problem to stderr), 0 after --help.

    Installs handlers for SIGINT and SIGTERM while it runs (so it must run on the main thread)
    and restores the previous ones before it returns.
    """
    try:
        args = _arguments(argv)
    except SystemExit as stop:  # argparse's way to stop; main's callers get the status instead
        return stop.code

    command = [sys.executable] + (["-m"] if args.module else []) + [args.script] + args.script_args
    base_env = dict(os.environ, WORLD_SIZE=str(args.nproc), LOCAL_WORLD_SIZE=str(args.nproc),
                    MASTER_ADDR=args.master_addr, MASTER_PORT=str(args.master_port))
    if args.timeout is not None:
        base_env["KILN_DIST_TIMEOUT"] = str(args.timeout)
    # N ranks each running a thread per core would oversubscribe the machine N times, and
    # OpenMP's spinning workers then steal the cores the other ranks compute on (a 2-rank run of
    # the digits MLP on 2 cores: 2.9 s with 2 threads per rank, 1.3 s with 1). Split the cores
    # as torchrun does, unless the user chose.
    if "OMP_NUM_THREADS" not in os.environ:
        base_env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // args.nproc))

    # The handler only records the signal; the supervising loop forwards it. Sending from the
    # handler could interrupt a Popen.poll() that has reaped a child but not yet recorded it,
    # and signal a pid that is no longer ours.
    received = []
    previous = {sig: signal.signal(sig, lambda signum, frame: received.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        ranks = _Ranks()
        for rank in range(args.nproc):
            if received:  # stopped while starting: start no more ranks
                break
            env = dict(base_env, RANK=str(rank), LOCAL_RANK=str(rank))
            ranks.procs.append(subprocess.Popen(command, env=env, start_new_session=True))
        return _supervise(ranks, received, args.kill_grace)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _supervise(ranks: _Ranks, received: list, kill_grace: float) -> int:
    """Waits for every rank, stopping them all at the first failure or signal; returns the
    launcher's exit status."""
    forwarded = 0         # how many of `received` the ranks have been sent
    failure = None        # (rank, returncode) of the first failure seen
    kill_deadline = None  # when ranks still running get SIGKILL; set once stopping begins
    killed = False
    while True:
        for signum in received[forwarded:]:
            _log(f"got {signal.Signals(signum).name}; forwarding it to every rank")
            ranks.send(signum)
        forwarded = len(received)
        # A rank that fails after the launcher was signalled is most likely failing because of
        # the signal, so it is not reported as the cause.
        if failure is None and not received:
            for rank, p in enumerate(ranks.procs):
                if p.poll() not in (None, 0):
                    failure = (rank, p.returncode)
                    others = len(ranks.running())
                    _log(f"rank {rank} (pid {p.pid}) {_describe(p.returncode)}"
                         + (f"; stopping the other {others} rank(s)" if others else ""))
                    ranks.send(signal.SIGTERM)
                    break
        if kill_deadline is None and (failure is not None or received):
            kill_deadline = time.monotonic() + kill_grace
        running = ranks.running()
        if not running:
            break
        if not killed and kill_deadline is not None and time.monotonic() >= kill_deadline:
            for rank, p in running:
                _log(f"rank {rank} (pid {p.pid}) still running {kill_grace:g} s after being "
                     f"signalled; sending SIGKILL")
            ranks.send(signal.SIGKILL)
            killed = True
        time.sleep(_POLL_S)
    if failure is not None:
        return _status(failure[1])
    if received:
        return 128 + received[0]
    return 0


if __name__ == "__main__":
    sys.exit(main())
