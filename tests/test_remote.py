"""Remote spilling: the Python host (tinyseg_plugin.deploy.remote, `tinyseg remote-host`) against the C++
client built from tflm_ops/core and against the Python reference client, over pseudo-terminals.

Covers every command, a corrupted request (host NAKs, client resends), a corrupted and a lost
response (client resends, host answers from its cache), and a host that stops answering (the
client fails with a timeout after its retries, never with made-up data).
"""

from __future__ import annotations

import importlib.util
import os
import select
import shutil
import subprocess
import sys
import threading
import time
import tty
import zlib
from pathlib import Path

import pytest

from tinyseg_plugin.deploy import remote
from tinyseg_plugin.deploy.remote import (
    DirStore,
    Faults,
    Frame,
    FrameError,
    MemoryStore,
    MsgType,
    RemoteClient,
    RemoteError,
    RemoteServer,
    Status,
    cobs_decode,
    cobs_encode,
    encode_frame,
    parse_frame,
)

ROOT = Path(__file__).resolve().parent.parent
# The protocol tests need nothing; the serial-port ones need pyserial (in the test extra).
needs_serial = pytest.mark.skipif(
    importlib.util.find_spec("serial") is None,
    reason="pyserial is not installed (pip install 'tinyseg-plugin[test]')",
)


# ----------------------------------------------------------------------------- helpers


class FdSerialLine:
    """The client's end of a pty (the master has no path pyserial could open)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.in_waiting = 0

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        return len(data)

    def read(self, size: int = 1) -> bytes:
        r, _, _ = select.select([self.fd], [], [], 0.02)
        return os.read(self.fd, 4096) if r else b""


class Pty:
    """A raw pseudo-terminal pair: the host opens `name` with pyserial, the client uses `master`."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)  # no echo / line editing before pyserial configures the port
        self.name = os.ttyname(self.slave)

    def close(self) -> None:
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


class HostThread:
    """remote.run() on the pty's slave, in a thread, with optional faults."""

    def __init__(
        self, pty: Pty, faults: Faults | None = None, store=None, timeout: float = 1.0
    ) -> None:
        self.ser = remote._open_port(pty.name, 921600)
        self.logs: list[str] = []
        self.server = RemoteServer(
            store if store is not None else MemoryStore(), faults=faults, on_log=self.logs.append
        )
        self.stop = threading.Event()
        self.result: list[str] = []
        self.thread = threading.Thread(
            target=lambda: self.result.append(
                remote.run(self.ser, self.server, timeout, self.stop)
            ),
            daemon=True,
        )
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.ser.close()


@pytest.fixture
def pty_pair():
    p = Pty()
    yield p
    p.close()


class Loop:
    """In-process link without a tty: the server runs when the client waits for bytes."""

    def __init__(self, server: RemoteServer) -> None:
        self.server = server
        self.pending = bytearray()
        self.inbox = bytearray()
        self.in_waiting = 0

    def write(self, data: bytes) -> int:
        self.pending += data
        return len(data)

    def read(self, size: int = 1) -> bytes:
        if not self.inbox and self.pending:
            data, self.pending = bytes(self.pending), bytearray()
            for wire in self.server.feed(data):
                self.inbox += wire
        out, self.inbox = bytes(self.inbox), bytearray()
        return out


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 0.01
        return self.t


# ----------------------------------------------------------------------------- framing


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\0",
        b"\0\0\0",
        bytes(range(1, 255)),
        bytes(range(1, 256)) * 3,
        bytes(range(256)) * 4,
        b"\x11" * 254 + b"\0" + b"\x22" * 600,
    ],
)
def test_cobs_round_trip(data: bytes) -> None:
    enc = cobs_encode(data)
    assert 0 not in enc
    assert len(enc) <= len(data) + len(data) // 254 + 1
    assert cobs_decode(enc) == data


def test_frame_crc_is_zlib_crc32_and_any_flip_is_caught() -> None:
    f = Frame(MsgType.WRITE, seq=0xBEEF, slot=7, offset=0x01020304, arg=5, payload=b"\0\1\0\2\0")
    wire = encode_frame(f)
    assert wire.endswith(b"\0") and 0 not in wire[:-1]
    raw = cobs_decode(wire[:-1])
    assert int.from_bytes(raw[-4:], "little") == zlib.crc32(raw[:-4])
    assert parse_frame(wire[:-1]) == f
    for i in range(len(raw)):
        bad = bytearray(raw)
        bad[i] ^= 0x04
        with pytest.raises(FrameError):
            parse_frame(cobs_encode(bytes(bad)))


# ----------------------------------------------------------------------------- server logic


def test_every_command_in_process() -> None:
    logs: list[str] = []
    client = RemoteClient(
        Loop(RemoteServer(MemoryStore(), max_payload=256, on_log=logs.append)), max_payload=1024
    )
    assert client.hello() == remote.PROTOCOL_VERSION
    assert client.chunk == 256
    data = os.urandom(3000)
    client.write(2, 10, data)
    assert client.size(2) == 3010
    assert client.read(2, 10, 3000) == data
    assert client.read(2, 0, 10) == b"\xff" * 10
    client.erase(2, 100, 50)
    assert client.read(2, 100, 50) == b"\xff" * 50
    with pytest.raises(RemoteError) as e:
        client.read(2, 3000, 20)
    assert e.value.kind == "remote_status" and e.value.status == Status.OUT_OF_RANGE
    client.drop(2)
    with pytest.raises(RemoteError) as e:
        client.size(2)
    assert e.value.status == Status.NOT_FOUND
    client.log("inference 1: 1270 ms\n")
    assert logs == ["inference 1: 1270 ms"]
    assert client.stats.retries == 0


def test_repeated_seq_is_answered_from_cache_not_run_twice() -> None:
    store = MemoryStore()
    server = RemoteServer(store)
    hello = encode_frame(Frame(MsgType.HELLO, seq=1, arg=1, payload=(1024).to_bytes(4, "little")))
    write = encode_frame(Frame(MsgType.WRITE, seq=2, slot=0, offset=0, arg=3, payload=b"abc"))
    first = server.feed(hello + write)
    store.slots[0][:] = b"xyz"  # if the repeat ran again, it would write abc over this
    again = server.feed(write)
    assert again == first[1:]
    assert bytes(store.slots[0]) == b"xyz"
    assert server.stats.duplicates == 1
    # HELLO restarts the session: the same seq is new again.
    server.feed(hello + write)
    assert bytes(store.slots[0]) == b"abc"


def test_garbage_and_overlong_input_get_naks() -> None:
    server = RemoteServer(MemoryStore(), max_payload=64)
    out = server.feed(b"\x05garbage\0" + b"\x01" * 1000 + b"\0")
    assert [parse_frame(w[:-1]).type for w in out] == [MsgType.NAK, MsgType.NAK]
    assert server.stats.bad_frames == 2


def _answer(server: RemoteServer, frame: Frame) -> Frame:
    out = server.feed(encode_frame(frame))
    assert len(out) == 1
    return parse_frame(out[0][:-1])


def test_oversized_frame_gets_a_nak_and_the_host_keeps_serving() -> None:
    """20 KB without a delimiter, then a 20 KB WRITE frame (well-formed but over any payload the host
    accepts): each is answered with a NAK, nothing is buffered past the limit, and the next request
    is served."""
    server = RemoteServer(MemoryStore())
    out = server.feed(bytes(range(1, 256)) * 80 + b"\0")
    big = encode_frame(Frame(MsgType.WRITE, seq=9, slot=1, arg=20_000, payload=b"\x01" * 20_000))
    out += server.feed(big[:7000]) + server.feed(big[7000:])
    assert [(f.type, f.arg) for f in (parse_frame(w[:-1]) for w in out)] == [(MsgType.NAK, 3)] * 2
    assert len(server._rx) == 0
    assert (
        _answer(server, Frame(MsgType.WRITE, seq=10, slot=1, arg=3, payload=b"abc")).type
        == MsgType.ACK
    )
    assert _answer(server, Frame(MsgType.READ, seq=11, slot=1, arg=3)).payload == b"abc"


def _stores(tmp_path: Path, capacity: int | None = None):
    kw = {} if capacity is None else {"capacity": capacity}
    return {"memory": MemoryStore(**kw), "directory": DirStore(tmp_path / "slots", **kw)}


def _held(store) -> int:
    """Bytes the store really holds: its buffers, or its files on disk."""
    if isinstance(store, MemoryStore):
        return sum(len(b) for b in store.slots.values())
    return sum(p.stat().st_size for p in store.root.iterdir())


@pytest.mark.parametrize("kind", ["memory", "directory"])
def test_far_write_is_refused_before_anything_is_allocated(tmp_path: Path, kind: str) -> None:
    """A 1-byte WRITE (and an ERASE) at 64 MiB - 1, twenty times: each is refused with no_space under
    the default capacity, the store holds nothing, and the host keeps serving."""
    store = _stores(tmp_path)[kind]
    server = RemoteServer(store)
    assert store.capacity == remote.DEFAULT_CAPACITY < (64 << 20)
    for slot in range(20):
        r = _answer(
            server,
            Frame(
                MsgType.WRITE, seq=1 + slot, slot=slot, offset=(64 << 20) - 1, arg=1, payload=b"x"
            ),
        )
        assert (r.type, r.arg) == (MsgType.ERROR, Status.NO_SPACE)
    r = _answer(server, Frame(MsgType.ERASE, seq=30, slot=0, offset=0xFFFF_FF00, arg=0xFF))
    assert (r.type, r.arg) == (MsgType.ERROR, Status.NO_SPACE)
    assert _held(store) == 0 and store.used == 0
    r = _answer(server, Frame(MsgType.WRITE, seq=31, slot=4, offset=100, arg=2, payload=b"ok"))
    assert r.type == MsgType.ACK
    assert _answer(server, Frame(MsgType.SIZE, seq=32, slot=4)).arg == 102
    assert _held(store) == 102


@pytest.mark.parametrize("kind", ["memory", "directory"])
def test_the_whole_store_is_bounded_by_its_capacity(tmp_path: Path, kind: str) -> None:
    store = _stores(tmp_path, capacity=5000)[kind]
    client = RemoteClient(
        Loop(RemoteServer(store)), max_payload=4096
    )  # each write below is one frame
    client.hello()
    client.write(1, 0, b"a" * 3000)
    with pytest.raises(RemoteError) as e:
        client.write(2, 0, b"b" * 3000)  # alone it fits; with slot 1 the store would hold 6,000
    assert e.value.status == Status.NO_SPACE
    with pytest.raises(RemoteError) as e:
        client.write(1, 4999, b"cc")  # one slot past the capacity
    assert e.value.status == Status.NO_SPACE
    client.write(1, 3000, b"c" * 2000)  # exactly the capacity
    assert _held(store) == store.used == 5000
    client.drop(1)
    client.write(2, 0, b"b" * 3000)
    assert client.read(2, 0, 3000) == b"b" * 3000
    assert _held(store) == store.used == 3000


def test_dir_store_counts_the_slot_files_already_there(tmp_path: Path) -> None:
    DirStore(tmp_path, capacity=1000).write(1, 0, b"x" * 800)
    again = RemoteServer(DirStore(tmp_path, capacity=1000))  # a restarted host
    r = _answer(again, Frame(MsgType.WRITE, seq=1, slot=2, arg=300, payload=b"y" * 300))
    assert (r.type, r.arg) == (MsgType.ERROR, Status.NO_SPACE)
    assert (
        _answer(again, Frame(MsgType.WRITE, seq=2, slot=2, arg=200, payload=b"y" * 200)).type
        == MsgType.ACK
    )


def test_a_request_that_fails_unexpectedly_is_answered(monkeypatch) -> None:
    """Whatever a store raises, the host answers with an error and serves the next request."""
    store = MemoryStore()
    server = RemoteServer(store)
    monkeypatch.setattr(store, "size", lambda slot: 1 // 0)
    r = _answer(server, Frame(MsgType.SIZE, seq=1, slot=0))
    assert (r.type, r.arg) == (MsgType.ERROR, Status.IO_ERROR)
    assert server.stats.failed == 1
    assert (
        _answer(server, Frame(MsgType.WRITE, seq=2, slot=0, arg=1, payload=b"z")).type
        == MsgType.ACK
    )


def test_dir_store_persists_slots(tmp_path: Path) -> None:
    client = RemoteClient(Loop(RemoteServer(DirStore(tmp_path / "slots"))))
    client.hello()
    client.write(5, 0, b"tensor-bytes")
    assert (tmp_path / "slots" / "slot_00000005.bin").read_bytes() == b"tensor-bytes"
    again = RemoteClient(Loop(RemoteServer(DirStore(tmp_path / "slots"))))
    again.hello()
    assert again.read(5, 0, 12) == b"tensor-bytes"
    again.drop(5)
    assert not (tmp_path / "slots" / "slot_00000005.bin").exists()


def test_python_client_times_out_on_a_silent_host() -> None:
    clock = FakeClock()
    client = RemoteClient(
        Loop(RemoteServer(MemoryStore(), faults=Faults(silent_after=1))),
        timeout=0.5,
        attempts=3,
        clock=clock,
    )
    client.hello()
    with pytest.raises(RemoteError) as e:
        client.read(0, 0, 10)
    assert e.value.kind == "timeout"
    assert "timeout after 3 attempts" in str(e.value)
    assert client.stats.frames_sent == 4


# ----------------------------------------------------------------------------- over a pty, Python client


@needs_serial
def test_python_client_over_pty_with_corruption(pty_pair: Pty) -> None:
    host = HostThread(
        pty_pair, Faults(corrupt_responses=frozenset({2}), drop_responses=frozenset({4}))
    )
    try:
        client = RemoteClient(FdSerialLine(pty_pair.master), timeout=0.3, attempts=4)
        client.hello()
        data = bytes((i * 7) & 0xFF for i in range(5000))
        client.write(1, 0, data)
        assert client.read(1, 0, len(data)) == data
        assert client.stats.bad_frames == 1 and client.stats.timeouts == 1
        assert host.server.stats.duplicates == 2
    finally:
        host.close()


# ----------------------------------------------------------------------------- over a pty, C++ client


@pytest.fixture(scope="session")
def cpp_client(tmp_path_factory) -> Path:
    """Build tflm_ops' remote_pty_client with cmake (skip only when the toolchain is missing)."""
    if not shutil.which("cmake") or not (shutil.which("g++") or shutil.which("c++")):
        pytest.skip("cmake / a C++ compiler are not installed")
    build = tmp_path_factory.mktemp("remote_client_build")
    cfg = subprocess.run(
        [
            "cmake",
            "-S",
            str(ROOT / "tflm_ops"),
            "-B",
            str(build),
            "-DTINYSEG_FUZZ=OFF",
            "-DTINYSEG_WERROR=OFF",
            "-DCMAKE_BUILD_TYPE=Release",
        ],
        capture_output=True,
        text=True,
    )
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr
    b = subprocess.run(
        ["cmake", "--build", str(build), "--target", "remote_pty_client", "-j2"],
        capture_output=True,
        text=True,
    )
    assert b.returncode == 0, b.stdout[-4000:] + b.stderr[-4000:]
    return build / "remote_pty_client"


def _run_client(exe: Path, pty: Pty, scenario: str, *args: str, timeout: float = 120):
    t0 = time.monotonic()
    p = subprocess.run(
        [str(exe), f"fd:{pty.master}", scenario, *args],
        pass_fds=[pty.master],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return p, time.monotonic() - t0


def _stats(line: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


@needs_serial
def test_cpp_client_round_trip(cpp_client: Path, pty_pair: Pty) -> None:
    host = HostThread(pty_pair)
    try:
        p, _ = _run_client(cpp_client, pty_pair, "roundtrip")
    finally:
        host.close()
    assert p.returncode == 0, p.stderr
    s = _stats(p.stdout)
    assert s["retries"] == "0" and s["naks"] == "0"
    enc, raw = s["encoded"].split("/")
    assert int(enc) < int(raw)  # the spill went through the codec
    assert host.server.stats.bad_frames == 0
    assert host.logs == ["remote_pty_client: all slots verified"]


@needs_serial
def test_cpp_client_recovers_from_corrupted_frames(cpp_client: Path, pty_pair: Pty) -> None:
    # Request 3 is corrupted on the way to the host (NAK, resend); responses 6 and 9 are corrupted
    # and response 12 is lost on the way back (client resends; host answers from its cache).
    host = HostThread(
        pty_pair, Faults(corrupt_responses=frozenset({6, 9}), drop_responses=frozenset({12}))
    )
    try:
        p, _ = _run_client(
            cpp_client, pty_pair, "roundtrip", "--corrupt-request", "3", "--timeout-ms", "300"
        )
    finally:
        host.close()
    assert p.returncode == 0, p.stderr
    s = _stats(p.stdout)
    assert int(s["naks"]) == 1
    assert int(s["bad_frames"]) == 2
    assert int(s["timeouts"]) == 1
    assert int(s["retries"]) == 4
    assert host.server.stats.bad_frames == 1
    assert host.server.stats.duplicates == 3


@needs_serial
def test_cpp_client_reports_timeout_when_host_goes_silent(cpp_client: Path, pty_pair: Pty) -> None:
    host = HostThread(pty_pair, Faults(silent_after=2))  # hello + one write, then nothing
    try:
        p, elapsed = _run_client(
            cpp_client, pty_pair, "timeout", "--timeout-ms", "200", "--attempts", "3"
        )
    finally:
        host.close()
    assert p.returncode == 3, p.stdout + p.stderr
    assert (
        "io_error (timeout, 5 frames sent, 2 retries)" in p.stderr
    )  # hello + write + 3 sends of the read
    assert len(p.stderr.strip().splitlines()) == 1
    assert 0.55 < elapsed < 10


# ----------------------------------------------------------------------------- the CLI


@needs_serial
def test_cli_bad_port_is_one_line_exit_2(tmp_path: Path) -> None:
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "tinyseg_plugin.cli",
            "remote-host",
            "--port",
            str(tmp_path / "no-such-tty"),
            "--baud",
            "115200",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot open serial port" in lines[0] and "Traceback" not in p.stderr


@needs_serial
def test_cli_serves_until_the_board_disconnects(pty_pair: Pty, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tinyseg_plugin.cli",
            "remote-host",
            "--port",
            pty_pair.name,
            "--baud",
            "921600",
            "--storage",
            str(tmp_path),
            "--once",
            "--timeout",
            "1",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        client = RemoteClient(FdSerialLine(pty_pair.master), timeout=2.0)
        deadline = time.monotonic() + 30
        while True:  # the host needs a moment to start and open the port
            try:
                client.hello()
                break
            except RemoteError:
                assert time.monotonic() < deadline, "remote-host did not answer"
        client.write(3, 0, b"skip-connection")
        assert client.read(3, 0, 15) == b"skip-connection"
        assert (tmp_path / "slot_00000003.bin").read_bytes() == b"skip-connection"
        os.close(pty_pair.slave)
        os.close(pty_pair.master)  # the board goes away
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read()
    assert rc == 0, err
    assert "board disconnected" in err


@needs_serial
def test_cli_answers_an_oversized_frame_and_a_far_write_and_keeps_serving(
    pty_pair: Pty, tmp_path: Path
) -> None:
    """`tinyseg remote-host` itself (memory store, --capacity): a 20 KB frame gets a NAK, a WRITE past the
    capacity an error, and the board's next requests are served by the same process."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tinyseg_plugin.cli",
            "remote-host",
            "--port",
            pty_pair.name,
            "--baud",
            "921600",
            "--once",
            "--timeout",
            "1",
            "--capacity",
            "1MiB",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        client = RemoteClient(FdSerialLine(pty_pair.master), timeout=2.0)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.hello()
                break
            except RemoteError:
                assert time.monotonic() < deadline, "remote-host did not answer"
        FdSerialLine(pty_pair.master).write(b"\x01" * 20_000 + b"\0")
        nak = client._receive(time.monotonic() + 5)
        assert nak is not None and parse_frame(nak).type == MsgType.NAK
        with pytest.raises(RemoteError) as e:
            client.write(7, (64 << 20) - 1, b"x")
        assert e.value.status == Status.NO_SPACE
        client.write(7, 0, b"still here")
        assert client.read(7, 0, 10) == b"still here"
        assert proc.poll() is None
        os.close(pty_pair.slave)
        os.close(pty_pair.master)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read()
    assert rc == 0, err
    assert "up to 1,048,576 bytes" in err


@needs_serial
def test_cli_bad_capacity_is_one_line_exit_2() -> None:
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "tinyseg_plugin.cli",
            "remote-host",
            "--port",
            "/dev/null",
            "--capacity",
            "lots",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "--capacity" in lines[0] and "Traceback" not in p.stderr


def test_hostile_frames_are_each_answered_and_the_host_keeps_serving(counts) -> None:
    """A table of malformed and hostile frames, each fed to one host in turn: every one gets exactly
    one answer (a NAK or an ERROR, never data), the store holds nothing afterwards, and a good WRITE
    and READ still work. The count goes to the run's summary."""

    def raw_frame(body: bytes, crc_ok: bool = True) -> bytes:
        crc = zlib.crc32(body) ^ (0 if crc_ok else 1)
        return cobs_encode(body + crc.to_bytes(4, "little")) + b"\0"

    header = remote.HEADER
    hostile = {
        "garbage": b"\x05garbage\0",
        "delimiter only run": b"\x01" * 5000 + b"\0",
        "20 KB without delimiter": bytes(range(1, 256)) * 80 + b"\0",
        "oversized WRITE": encode_frame(
            Frame(MsgType.WRITE, seq=1, slot=1, arg=20_000, payload=b"\x01" * 20_000)
        ),
        "bad CRC": raw_frame(header.pack(int(MsgType.READ), 0, 2, 1, 0, 4), crc_ok=False),
        "short frame": raw_frame(b"\x03\x00"),
        "unknown type": raw_frame(header.pack(0x7F, 0, 3, 1, 0, 0)),
        "answer type from the board": encode_frame(Frame(MsgType.DATA, seq=4, slot=1)),
        "WRITE longer than its payload": encode_frame(
            Frame(MsgType.WRITE, seq=5, slot=1, arg=100, payload=b"abc")
        ),
        "far WRITE": encode_frame(
            Frame(MsgType.WRITE, seq=6, slot=2, offset=(64 << 20) - 1, arg=1, payload=b"x")
        ),
        "far ERASE": encode_frame(
            Frame(MsgType.ERASE, seq=7, slot=2, offset=0xFFFF_FF00, arg=0xFF)
        ),
        "READ of a slot never written": encode_frame(Frame(MsgType.READ, seq=8, slot=77, arg=16)),
        "huge READ": encode_frame(Frame(MsgType.READ, seq=9, slot=1, arg=0xFFFF_FFFF)),
        "slot 2^32-1": encode_frame(
            Frame(MsgType.WRITE, seq=10, slot=0xFFFF_FFFF, offset=0xFFFF_FFF0, arg=1, payload=b"y")
        ),
    }
    store = MemoryStore()
    server = RemoteServer(store)
    answered = {}
    for name, wire in hostile.items():
        out = server.feed(wire)
        kinds = [parse_frame(w[:-1]).type for w in out]
        answered[name] = kinds
        assert len(kinds) == 1 and kinds[0] in (MsgType.NAK, MsgType.ERROR), (name, kinds)
    assert store.used == 0 and len(server._rx) == 0
    ok = _answer(server, Frame(MsgType.WRITE, seq=20, slot=1, arg=3, payload=b"abc"))
    assert ok.type == MsgType.ACK
    assert _answer(server, Frame(MsgType.READ, seq=21, slot=1, arg=3)).payload == b"abc"
    counts(
        f"hostile remote-host frames: {len(hostile)} kinds, each answered once with a NAK or an "
        f"ERROR, 0 bytes held afterwards, the host still serving"
    )


# A child process measures what each crafted frame makes the host allocate (tracemalloc's peak
# while the frame is served), under a 1 GiB address-space limit so that a host that allocates
# before its bound check fails the test instead of the machine.
_FRAME_PEAKS = r"""
import json, resource, sys, tracemalloc, zlib
from tinyseg_plugin.deploy import remote
from tinyseg_plugin.deploy.remote import *
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
kind, root, frames = sys.argv[1], sys.argv[2], json.loads(sys.stdin.read())
store = MemoryStore() if kind == "memory" else DirStore(root)
server = RemoteServer(store)
server.feed(encode_frame(Frame(MsgType.WRITE, seq=1, slot=1, arg=16, payload=b"s" * 16)))
tracemalloc.start()
out = {}
for name, wire in frames.items():
    tracemalloc.reset_peak()
    answers = server.feed(bytes.fromhex(wire))
    peak = tracemalloc.get_traced_memory()[1]
    got = [parse_frame(a[:-1]) for a in answers]
    out[name] = [[int(f.type), f.arg] for f in got], peak
# VmHWM, not getrusage: ru_maxrss keeps the parent's peak across fork and exec
hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]
out["rss"] = int(hwm) * 1024, store.used
print(json.dumps(out))
"""


def _crafted_frames() -> dict[str, bytes]:
    """Every length and offset field of a request at its extremes, and truncated frames."""
    top = 0xFFFF_FFFF
    cap = remote.DEFAULT_CAPACITY
    frames = {
        "ERASE 2^32-1 B": Frame(MsgType.ERASE, seq=2, slot=2, arg=top),
        "ERASE 100 MiB": Frame(MsgType.ERASE, seq=3, slot=2, arg=100 << 20),
        "ERASE 2^32-1 B at offset 2^32-1": Frame(MsgType.ERASE, seq=4, slot=2, offset=top, arg=top),
        "ERASE one byte past the capacity": Frame(MsgType.ERASE, seq=5, slot=2, arg=cap + 1),
        "READ 2^32-1 B": Frame(MsgType.READ, seq=6, slot=1, arg=top),
        "READ at offset 2^32-1": Frame(MsgType.READ, seq=7, slot=1, offset=top, arg=16),
        "READ that wraps 2^32": Frame(MsgType.READ, seq=8, slot=1, offset=top - 8, arg=32),
        "WRITE at offset 2^32-1": Frame(
            MsgType.WRITE, seq=9, slot=1, offset=top, arg=1, payload=b"x"
        ),
        "WRITE saying 2^32-1 B": Frame(MsgType.WRITE, seq=10, slot=1, arg=top, payload=b"x"),
        "WRITE to slot 2^32-1": Frame(
            MsgType.WRITE, seq=11, slot=top, offset=cap, arg=4, payload=b"abcd"
        ),
        "SIZE of slot 2^32-1": Frame(MsgType.SIZE, seq=12, slot=top),
    }
    wires = {name: encode_frame(f) for name, f in frames.items()}
    whole = encode_frame(Frame(MsgType.ERASE, seq=13, slot=3, arg=top))
    wires["ERASE 2^32-1 B cut to its header"] = remote.cobs_encode(whole[:10]) + b"\0"
    wires["ERASE 2^32-1 B without its CRC"] = (
        remote.cobs_encode(remote.HEADER.pack(int(MsgType.ERASE), 0, 14, 3, 0, top)) + b"\0"
    )
    wires["half a COBS block"] = whole[: len(whole) // 2] + b"\0"
    # served last: the largest erase the default capacity accepts (the capacity less slot 1's 16 B)
    wires["ERASE of the whole capacity"] = encode_frame(
        Frame(MsgType.ERASE, seq=15, slot=4, arg=cap - 16)
    )
    return wires


@pytest.mark.parametrize("kind", ["memory", "directory"])
def test_crafted_frames_are_bounded_before_anything_is_allocated(
    tmp_path: Path, kind: str, counts
) -> None:
    """Each crafted frame (lengths and offsets up to 2^32-1, truncated frames) gets one ERROR or
    NAK while the host allocates under 1 MiB for it; the one erase the capacity allows (16 MiB)
    allocates less than 64 MiB; the child's peak RSS (VmHWM) stays under 256 MiB."""
    import json

    wires = _crafted_frames()
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    p = subprocess.run(
        [sys.executable, "-c", _FRAME_PEAKS, kind, str(tmp_path / "slots")],
        input=json.dumps({n: w.hex() for n, w in wires.items()}),
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    rss, used = out.pop("rss")
    last = "ERASE of the whole capacity"
    for name, (answers, peak) in out.items():
        assert len(answers) == 1, (name, answers)
        if name == last:
            assert answers[0][0] == MsgType.ACK and peak < 64 << 20, (name, answers, peak)
        else:
            assert answers[0][0] in (MsgType.NAK, MsgType.ERROR), (name, answers)
            assert peak < 1 << 20, (name, peak)
    assert used == remote.DEFAULT_CAPACITY and rss < 256 << 20
    worst = max(peak for name, (_, peak) in out.items() if name != last)
    counts(
        f"remote-host crafted frames ({kind} store): {len(out) - 1} refused, each allocating at "
        f"most {worst / 1024:,.1f} KiB; the 16 MiB erase {out[last][1] / (1 << 20):,.1f} MiB; "
        f"peak RSS {rss / (1 << 20):,.0f} MiB"
    )
