"""kiln.distributed.run, the launcher: each rank's environment, arguments and output; exit status
when all ranks succeed, when one fails or is killed by a signal; stopping the other ranks
(SIGTERM, then SIGKILL); forwarding SIGINT/SIGTERM; bad arguments, from the command line and from
main(); an IPv6 master address.

The launcher is run as a file, by path: it is standard library only, so these tests need neither
Kiln's compiled core nor the package to import. Children are small scripts written to tmp_path;
each test is bounded by subprocess timeouts of a few seconds.
"""

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parents[2] / "python" / "kiln" / "distributed" / "run.py"
TIMEOUT_S = 10  # far above any test's expected run time; a hang fails instead of blocking


def write_child(tmp_path, body, name="child.py"):
    path = tmp_path / name
    path.write_text("import os, signal, sys, time\n"
                    "from pathlib import Path\n"
                    "rank = int(os.environ['RANK'])\n" + textwrap.dedent(body))
    return path


def launch(*args, **kwargs):
    return subprocess.run([sys.executable, str(RUN), *map(str, args)], capture_output=True,
                          text=True, timeout=TIMEOUT_S, **kwargs)


def wait_for(paths, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, f"not all of {paths} appeared"
        time.sleep(0.02)


def test_environment_arguments_and_output(tmp_path):
    child = write_child(tmp_path, """
        keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                "MASTER_PORT", "KILN_DIST_TIMEOUT"]
        record = {k: os.environ.get(k) for k in keys}
        record["argv"] = sys.argv[1:]
        Path(sys.argv[1], f"rank{rank}.json").write_text(__import__("json").dumps(record))
        # One write per line: print() writes the text and the newline separately when stdout
        # is unbuffered (PYTHONUNBUFFERED), and three children's writes then interleave.
        sys.stdout.write(f"hello from rank {rank}\\n")
    """)
    r = launch("--nproc", 3, "--master-port", 29517, "--timeout", 42, child, tmp_path,
               "--flag", "-x")
    assert r.returncode == 0, r.stderr
    for rank in range(3):
        record = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert record == {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "3",
                          "LOCAL_WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1",
                          "MASTER_PORT": "29517", "KILN_DIST_TIMEOUT": "42.0",
                          "argv": [str(tmp_path), "--flag", "-x"]}
    # The children write to the launcher's stdout themselves: no prefixes, nothing added.
    assert sorted(r.stdout.splitlines()) == [f"hello from rank {i}" for i in range(3)]
    assert r.stderr == ""


def test_default_port_and_no_timeout(tmp_path):
    child = write_child(tmp_path, """
        Path(sys.argv[1], f"rank{rank}").write_text(
            os.environ["MASTER_PORT"] + " " + str("KILN_DIST_TIMEOUT" in os.environ))
    """)
    env = {k: v for k, v in os.environ.items() if k != "KILN_DIST_TIMEOUT"}
    r = launch("--nproc", 2, child, tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    seen = {(tmp_path / f"rank{rank}").read_text() for rank in range(2)}
    assert len(seen) == 1  # both ranks got the same port
    port, has_timeout = seen.pop().split()
    assert 0 < int(port) < 65536 and has_timeout == "False"


def test_cores_are_divided_among_the_ranks_unless_chosen(tmp_path):
    child = write_child(tmp_path, """
        Path(sys.argv[1], f"rank{rank}").write_text(os.environ["OMP_NUM_THREADS"])
    """)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    assert launch("--nproc", 2, child, tmp_path, env=env).returncode == 0
    expected = str(max(1, os.cpu_count() // 2))
    assert {(tmp_path / f"rank{rank}").read_text() for rank in range(2)} == {expected}
    assert launch("--nproc", 2, child, tmp_path, env={**env, "OMP_NUM_THREADS": "3"}).returncode == 0
    assert {(tmp_path / f"rank{rank}").read_text() for rank in range(2)} == {"3"}


def test_module(tmp_path):
    write_child(tmp_path, "Path(sys.argv[1], f'rank{rank}').write_text(__name__)\n",
                name="rank_module.py")
    r = launch("--nproc", 2, "-m", "rank_module", tmp_path, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [(tmp_path / f"rank{i}").read_text() for i in range(2)] == ["__main__"] * 2


def failing_rank_1(tmp_path, sibling_setup=""):
    """A child script: rank 0 records its pid and sleeps 60 s (after `sibling_setup`); rank 1
    waits until rank 0 is up, then exits with 3."""
    return write_child(tmp_path, f"""
        if rank == 0:
            {sibling_setup}
            Path(sys.argv[1], "rank0.pid").write_text(str(os.getpid()))
            time.sleep(60)
        else:
            while not Path(sys.argv[1], "rank0.pid").exists():
                time.sleep(0.01)
            sys.exit(3)
    """)


def assert_gone(pid):
    # The launcher waited for the child before exiting, so the pid is reaped.
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_failing_rank_stops_the_others(tmp_path):
    start = time.monotonic()
    r = launch("--nproc", 2, failing_rank_1(tmp_path), tmp_path)
    assert r.returncode == 3
    assert time.monotonic() - start < 20  # the sibling (asleep for 60 s) was stopped, not waited out
    assert "rank 1 " in r.stderr and "exited with code 3" in r.stderr, r.stderr
    assert_gone(int((tmp_path / "rank0.pid").read_text()))


def test_sibling_ignoring_sigterm_gets_sigkill(tmp_path):
    child = failing_rank_1(tmp_path, "signal.signal(signal.SIGTERM, signal.SIG_IGN)")
    start = time.monotonic()
    r = launch("--nproc", 2, "--kill-grace", 0.5, child, tmp_path)
    assert r.returncode == 3  # the first failure's code, not the SIGKILLed sibling's
    assert time.monotonic() - start < 20
    assert "rank 0 " in r.stderr and "SIGKILL" in r.stderr, r.stderr
    assert_gone(int((tmp_path / "rank0.pid").read_text()))


def test_rank_killed_by_signal(tmp_path):
    child = write_child(tmp_path, """
        if rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    r = launch("--nproc", 2, child)
    assert r.returncode == 128 + signal.SIGKILL
    assert "rank 1 " in r.stderr and "killed by SIGKILL" in r.stderr, r.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_signal_reaches_every_rank(tmp_path, sig):
    child = write_child(tmp_path, f"""
        def stop(signum, frame):
            Path(sys.argv[1], f"got{{rank}}").write_text(signal.Signals(signum).name)
            sys.exit(0)
        signal.signal({int(sig)}, stop)
        Path(sys.argv[1], f"ready{{rank}}").touch()
        time.sleep(60)
    """)
    launcher = subprocess.Popen([sys.executable, str(RUN), "--nproc", "3", str(child),
                                 str(tmp_path)], stderr=subprocess.PIPE, text=True)
    try:
        wait_for([tmp_path / f"ready{rank}" for rank in range(3)])
        launcher.send_signal(sig)
        _, stderr = launcher.communicate(timeout=TIMEOUT_S)
    finally:
        launcher.kill()
    assert launcher.returncode == 128 + sig, stderr
    assert [(tmp_path / f"got{rank}").read_text() for rank in range(3)] == [sig.name] * 3


TIMEOUT_RANGE = "--timeout: must be a positive number of seconds from 0.001 (1 ms) to 1e9, got"


@pytest.mark.parametrize("args, message", [
    (["--nproc", "0", "x.py"], "--nproc: must be at least 1"),
    (["--nproc", "-2", "x.py"], "--nproc: must be at least 1"),
    (["--nproc", "2", "--master-port", "70000", "x.py"], "--master-port: must be in 1..65535"),
    (["--nproc", "2", "--timeout", "0", "x.py"], f"{TIMEOUT_RANGE} 0\n"),
    # The ranks refuse more than 1e9 s, and count whole milliseconds (0.0001 s would be 0 ms).
    (["--nproc", "2", "--timeout", "inf", "x.py"], f"{TIMEOUT_RANGE} inf\n"),
    (["--nproc", "2", "--timeout", "1e10", "x.py"], f"{TIMEOUT_RANGE} 1e+10\n"),
    (["--nproc", "2", "--timeout", "nan", "x.py"], f"{TIMEOUT_RANGE} nan\n"),
    (["--nproc", "2", "--timeout", "0.0001", "x.py"], f"{TIMEOUT_RANGE} 0.0001\n"),
    (["--nproc", "two", "x.py"], "--nproc: not an integer: 'two'"),
    (["--nproc", "2", "no_such_script.py"], "script not found: no_such_script.py"),
    (["x.py"], "the following arguments are required: --nproc\n"),
    # script_args may be empty: only SCRIPT is missing.
    (["--nproc", "2"], "the following arguments are required: script\n"),
])
def test_bad_arguments(tmp_path, args, message):
    (tmp_path / "x.py").touch()
    r = launch(*args, cwd=tmp_path)
    assert r.returncode == 2
    assert message in r.stderr, r.stderr


def test_timeout_bounds_reach_the_ranks(tmp_path):
    child = write_child(tmp_path, """
        Path(sys.argv[1], f"rank{rank}").write_text(os.environ["KILN_DIST_TIMEOUT"])
    """)
    for timeout, passed in [("0.001", "0.001"), ("1e9", "1000000000.0")]:
        assert launch("--nproc", 1, "--timeout", timeout, child, tmp_path).returncode == 0
        assert (tmp_path / "rank0").read_text() == passed


def load_launcher():
    spec = importlib.util.spec_from_file_location("kiln_launcher_under_test", RUN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_main_returns_the_status_for_bad_arguments_and_help(tmp_path, capsys):
    main = load_launcher().main
    assert main(["--nproc", "0", str(tmp_path)]) == 2  # returned, not raised as SystemExit
    assert "--nproc: must be at least 1" in capsys.readouterr().err
    assert main(["--nproc", "1", str(tmp_path / "missing.py")]) == 2
    assert "script not found" in capsys.readouterr().err
    assert main(["--help"]) == 0
    assert "usage:" in capsys.readouterr().out


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback")
@pytest.mark.parametrize("addr", ["::1", "[::1]"])
def test_ipv6_master_addr_gets_a_free_ipv6_port(tmp_path, addr):
    # The default port was looked for over IPv4 only: "cannot find a free port" for ::1. Rank 0
    # binds the port it was given on ::1, as its rendezvous store would.
    child = write_child(tmp_path, """
        import socket
        if rank == 0:
            with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
                s.bind(("::1", int(os.environ["MASTER_PORT"])))
        Path(sys.argv[1], f"rank{rank}").write_text(os.environ["MASTER_ADDR"])
    """)
    r = launch("--nproc", 2, "--master-addr", addr, child, tmp_path)
    assert r.returncode == 0, r.stderr
    assert [(tmp_path / f"rank{rank}").read_text() for rank in range(2)] == [addr] * 2
