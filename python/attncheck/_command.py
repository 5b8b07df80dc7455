"""The checker's side of the protocol in Python, for one problem: what a regression test written by
`attncheck repro` runs its command with."""
import math
import os
import select
import signal
import subprocess
import time

import numpy as np

from . import _protocol as wire


class _TimedOut(Exception):
    """run_command's deadline passed."""


class _Pipes:
    """The child's stdin and stdout as wire's streams, each read and write waiting only until one
    deadline: unbuffered, our ends non-blocking, so that a child that stops reading or answering
    holds nothing past it (a blocking write of a problem larger than the pipe would)."""

    def __init__(self, child, timeout):
        self.stdin, self.stdout = child.stdin.fileno(), child.stdout.fileno()
        os.set_blocking(self.stdin, False)
        os.set_blocking(self.stdout, False)
        self.deadline = time.monotonic() + (math.inf if timeout is None else timeout)

    def left(self):
        """The seconds left, None for no deadline (as Popen.wait takes them)."""
        return None if self.deadline == math.inf else max(0.0, self.deadline - time.monotonic())

    def _wait(self, fd, event):
        poll = select.poll()
        poll.register(fd, event)
        left = self.left()
        if not poll.poll(None if left is None else math.ceil(left * 1000)):
            raise _TimedOut

    def read(self, n):
        """n bytes, fewer at the end of the stream."""
        data = bytearray()
        while len(data) < n:
            self._wait(self.stdout, select.POLLIN)
            chunk = os.read(self.stdout, n - len(data))
            if not chunk:
                break
            data += chunk
        return bytes(data)

    def write(self, data):
        view = memoryview(data)
        while view:
            self._wait(self.stdin, select.POLLOUT)
            view = view[os.write(self.stdin, view):]

    def flush(self):
        pass  # nothing is buffered


def run_command(command, *, dtype, causal="none", window=None, scale=None, softcap=None, want_lse=False, dropout_p=0.0,
                dropout_seed=0, want_keep=False, timeout=60, **tensors):
    """Runs `command` (a child of the protocol, as `attncheck check --impl-cmd` runs it) on one problem
    and returns out [B,H,Tq,dv] as float64 (f16 and bf16 widened exactly), or a tuple of out and what
    is asked, in the order (out, lse, keep): with want_lse lse [B,H,Tq], with want_keep (dropout_p > 0)
    the keep mask [B,H,Tq,Tk] as uint8. The tensors are the forward's inputs (_features.SLOTS), each
    a keyword named as its slot, None or left out when absent: q [B,H,Tq,dk], k [B,H_kv,Tk,dk],
    v [B,H_kv,Tk,dv], allow [B,Tq,Tk] (0 or 1), kv_lens [B] and bias [B,H,Tq,Tk]; those in the
    format (q, k, v, bias) are in its storage: float32 or float64, or uint16 bit patterns for f16
    and bf16. A crash, an exception (FAIL), a refusal or a
    broken frame is an AssertionError saying which. timeout bounds the whole exchange in seconds
    of wall-clock time (starting, the HELO, sending the problem, the answer; None: no bound): when
    it passes, the command's process group is killed (the command runs in a session of its own)
    and it is an AssertionError too."""
    (B, H, Tq, dk), (_, H_kv, Tk, dv) = tensors["q"].shape, tensors["v"].shape
    dims = dict(B=B, H=H, H_kv=H_kv, Tq=Tq, Tk=Tk, dk=dk, dv=dv)
    stored = {s["name"]: np.ascontiguousarray(tensors[s["name"]], wire.storage(s, dtype)).tobytes()
              for s in wire.inputs("forward") if tensors.get(s["name"]) is not None}
    payload = wire.problem_payload(dtype, tuple(dims.values()), causal, window, scale or 0.0, softcap or 0.0,
                                   want_lse=want_lse, dropout=(dropout_p, dropout_seed) if dropout_p else None,
                                   want_keep=want_keep, **stored)
    child = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
    pipes = _Pipes(child, timeout)
    waiting = "its HELO"
    try:
        hello = wire.read_frame(pipes)
        if hello is None or hello[0] != b"HELO":
            raise AssertionError(f"the command did not start: {hello[1].decode(errors='replace') if hello else 'no HELO'}")
        waiting = "it to read the problem"
        wire.write_frame(pipes, b"PROB", payload)
        waiting = "its answer"
        answer = wire.read_frame(pipes)
        if answer is None:
            raise AssertionError(f"the command ended while computing (exit status {child.wait(pipes.left())})")
        tag, body = answer
        if tag == b"FAIL":
            raise AssertionError("the command raised " + body.decode(errors="replace"))
        if tag != b"RSLT":
            raise AssertionError(f"the command broke the protocol: a {tag!r} frame where RSLT belongs")
        status = int.from_bytes(body[:4], "little", signed=True)
        if status:
            raise AssertionError(f"the command refused the problem (returned {status})")
        # the RSLT: the status, then the forward's outputs the call carries in SLOTS' order (out, keep, lse)
        flags = (wire.WANT_LSE if want_lse else 0) | (wire.WANT_KEEP if want_keep else 0)
        written = [s for s in wire.outputs("forward") if wire.carried(s, "forward", flags)]
        try:
            got = wire.read_buffers(body, 4, written, dtype, lambda s: wire.slot_shape(s, dims), "a RSLT")
        except ValueError as e:
            raise AssertionError(f"the command broke the protocol: {e}") from None
        results = [got["out"].astype(np.float64)]
        if want_lse:
            results.append(got["lse"].astype(np.float64))
        if want_keep:
            results.append(got["keep"])
        return results[0] if len(results) == 1 else tuple(results)
    except (_TimedOut, subprocess.TimeoutExpired):
        os.killpg(child.pid, signal.SIGKILL)  # all of it, even with its first process ended: not reaped yet
        raise AssertionError(f"the command gave no answer within {timeout} s (waiting for {waiting}); "
                             "its process group was killed") from None
    finally:
        child.stdin.close()
        child.stdout.close()
        try:
            child.wait(pipes.left())  # it ends at the end of its stdin
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)  # before it is reaped, while the group's id is still its own
            child.wait()
