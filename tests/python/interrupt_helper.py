"""Ctrl-C against a kvsim call in a child Python: the one way the interrupt tests check that a
long run or sweep stops promptly with KeyboardInterrupt."""
import signal
import subprocess
import sys
import textwrap
import time


def ctrl_c_during(call):
    """Runs `call` (one Python statement using `kvsim`) in a child, sends SIGINT two seconds after
    it starts, and asserts the child caught KeyboardInterrupt within 10 s."""
    code = textwrap.dedent("""\
        import sys, kvsim
        print("started", flush=True)
        try:
            %s
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(9)
        """) % call
    # SIGINT as a terminal's Ctrl-C delivers it: a child started in the background (ctest under
    # a non-interactive shell) would inherit it ignored, and Python keeps an ignored SIGINT so.
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert p.stdout.readline().strip() == "started"
        time.sleep(2)
        p.send_signal(signal.SIGINT)
        sent = time.monotonic()
        stdout, err = p.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 9, err
    assert "interrupted" in stdout
    assert took < 10, took
