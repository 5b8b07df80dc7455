"""A child of `attncheck check --impl-cmd` that misbehaves one way (argv[1]), to show that the
checker reports each: it speaks the protocol (docs/protocol.md) by hand, not through serve()."""
import os
import signal
import struct
import sys
import time

MODE = sys.argv[1]
out = sys.stdout.buffer


def frame(tag, payload=b""):
    out.write(tag + struct.pack("<I", len(payload)) + payload)
    out.flush()


if MODE == "cannot_start":
    raise ImportError("No module named 'my_kernel'")  # a traceback on stderr, exit 1, no HELO
if MODE == "garbage_first":
    print("Loading my kernel...")  # a print where HELO belongs
    out.flush()
    time.sleep(60)
if MODE == "old_protocol":
    frame(b"HELO", struct.pack("<3I", 9, 2, 1))
    time.sleep(60)
if MODE == "impossible_domain":  # a HELO with a domain no call can keep: both causal alignments alone
    frame(b"HELO", struct.pack("<3I", 1, 2, 1 | 32) + struct.pack("<Ii6i16i", 1 | 2 | 4, 92, *([0] * 22)))
    time.sleep(60)
if MODE == "hostile_fail":  # a refusal to start whose text would paint the terminal and fill it
    frame(b"FAIL", b"\x1b[2J\x1b[31mcannot start\r\n" + b"A" * 65000)
    sys.exit(0)
frame(b"HELO", struct.pack("<3I", 1, 2, 1))  # protocol 1, ABI 2, float32 alone
if MODE in ("setsid_grandchild", "setsid_hang"):  # a process in a session of its own (sleep argv[-1]),
    import subprocess  # which killing the group misses; then zeros, or a hang

    subprocess.Popen(["setsid", "sleep", sys.argv[-1]], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
if MODE == "stops_reading":  # never reads its problem: a problem larger than the pipe holds fills it
    time.sleep(60)
while True:
    header = sys.stdin.buffer.read(8)
    if len(header) < 8:
        sys.exit(0)
    (length,) = struct.unpack("<I", header[4:])
    payload = sys.stdin.buffer.read(length)
    B, H, H_kv, Tq, Tk, dk, dv = struct.unpack_from("<7i", payload, 8)
    out_bytes = 4 * B * H * Tq * dv
    if MODE == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif MODE in ("hang", "setsid_hang"):
        if len(sys.argv) > 2:  # a file to create once hanging in a call, for a test to wait on
            open(sys.argv[2], "w").close()
        time.sleep(60)
    elif MODE == "exit":
        sys.exit(3)
    elif MODE == "garbage":
        out.write(b"Hello, world: here is my output\n")
        out.flush()
        time.sleep(60)
    elif MODE == "wrong_length":
        frame(b"RSLT", struct.pack("<i", 0) + bytes(out_bytes - 4))
    elif MODE == "huge_length":
        out.write(b"FAIL" + struct.pack("<I", 0xFFFFFFF0))
        out.flush()
        time.sleep(60)
    elif MODE == "raise":
        print("Traceback (most recent call last):\n  File \"kernel.py\", line 7\nZeroDivisionError: division by zero",
              file=sys.stderr, flush=True)
        frame(b"FAIL", b"ZeroDivisionError: division by zero")
    elif MODE == "chatty":  # 20 KB of stderr, then an exception
        for line in range(1000):
            print(f"progress line {line:4d} of the kernel's log", file=sys.stderr)
        sys.stderr.flush()
        frame(b"FAIL", b"RuntimeError: gave up")
    elif MODE == "forges_mode":  # frames only the plugin host may send
        frame(b"MODE", struct.pack("<Q", 0x8040))
        frame(b"RSLT", struct.pack("<i", 0) + bytes(out_bytes))
    elif MODE == "forges_stray":
        frame(b"STRY", struct.pack("<2i", 7, 1))
        frame(b"RSLT", struct.pack("<i", 0) + bytes(out_bytes))
    elif MODE == "forges_fault":
        frame(b"FALT", struct.pack("<4iqQ", 11, 0, 2, 0, 0, 0))
        time.sleep(60)
    elif MODE == "refuse":
        frame(b"RSLT", struct.pack("<i", 7))
    elif MODE == "refusal_with_outputs":  # status 5, a refusal, in a RSLT as long as a result
        frame(b"RSLT", struct.pack("<i", 5) + bytes(out_bytes))
    elif MODE == "success_alone":  # status 0 with no outputs
        frame(b"RSLT", struct.pack("<i", 0))
    elif MODE == "utf8_fail":  # UTF-8 with a backslash in it, then a byte that is not UTF-8
        frame(b"FAIL", "ValueError: café \\ x".encode() + b" \xff")
    elif MODE == "not_taken":  # NotExpressible: the library cannot be given this problem
        frame(b"NTKN", b"Tq 3: this library decodes one query a call")
    elif MODE == "half_a_result":
        out.write(b"RSLT" + struct.pack("<I", 4 + out_bytes) + struct.pack("<i", 0))
        out.flush()
        time.sleep(60)
    else:
        frame(b"RSLT", struct.pack("<i", 0) + bytes(out_bytes))  # zeros: wrong, but well formed
