#!/usr/bin/env python3
"""Starts a recording run and signals it once its recording has committed
samples: what the crash tests need to kill a run at a known point instead
of after a guessed delay.

  signal_run.py PARTIAL AT_LEAST SIGNALS GAP_S JITTER_S LOG -- CMD...

Starts CMD (stdout to LOG.out, stderr to LOG.err), reads PARTIAL (the run's .partial
file, opened for SWMR reading as any reader may while it is written) until
its /meta/samples_committed is at least AT_LEAST, waits JITTER_S seconds (so
that the signal lands anywhere in a batch or a commit), then sends SIGNALS
(comma-separated names, e.g. KILL or INT,INT) and waits for CMD to end.
Each signal after the first goes as soon as CMD has taken the one before
(Linux: /proc/PID/status no longer lists it as caught, its handler reset
by SA_RESETHAND, nor as pending), at most GAP_S seconds later: sent
sooner, two SIGINTs could merge into one; later, a run could finish its
batch in between. Prints one line, "SEEN RETURNCODE EXIT_S":
  SEEN: the counter when the signals were sent (>= AT_LEAST), or -1 when
      CMD ended first (finished or failed, see LOG.*);
  RETURNCODE: Popen's (-N: killed by signal N; 128 + N: exited on its own);
  EXIT_S: seconds from the last signal to CMD's end.
Exit 0 unless PARTIAL never appeared or never reached AT_LEAST in 300 s."""
import signal
import subprocess
import sys
import time

import h5py


def committed(path):
    """The committed-sample counter of PARTIAL, or None while it cannot be
    opened (not created yet, or not yet in SWMR mode)."""
    try:
        with h5py.File(path, "r", swmr=True) as f:
            return int(f["meta/samples_committed"][()])
    except (OSError, KeyError):
        return None


def wait_taken(pid, sig, limit):
    """Waits until process PID has taken signal SIG (neither caught, i.e. its
    one-shot handler ran, nor pending), or LIMIT seconds."""
    bit = 1 << (int(sig) - 1)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            return  # it has ended
        masks = [int(fields[k], 16) for k in ("SigCgt", "SigPnd", "ShdPnd")]
        if not any(m & bit for m in masks):
            return
        time.sleep(0.001)


def main():
    partial, at_least, names, gap, jitter, log = sys.argv[1:7]
    assert sys.argv[7] == "--", "usage: see the docstring"
    cmd = sys.argv[8:]
    at_least, gap, jitter = int(at_least), float(gap), float(jitter)
    signals = [getattr(signal, "SIG" + n) for n in names.split(",")]
    with open(log + ".out", "wb") as out, open(log + ".err", "wb") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
    seen = -1
    deadline = time.monotonic() + 300
    while proc.poll() is None:
        k = committed(partial)
        if k is not None and k >= at_least:
            seen = k
            break
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            sys.exit(f"signal_run: {partial} did not reach {at_least} committed samples in 300 s (last: {k})")
        time.sleep(0.01)
    exit_s = 0.0
    if seen >= 0:
        time.sleep(jitter)
        for i, s in enumerate(signals):
            if i:
                wait_taken(proc.pid, signals[i - 1], gap)
            proc.send_signal(s)
        sent = time.monotonic()
        proc.wait()
        exit_s = time.monotonic() - sent
    print(seen, proc.wait(), f"{exit_s:.3f}")


if __name__ == "__main__":
    main()
