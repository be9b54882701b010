"""Host side of remote spilling (paper section 6.2.2): the board sends spilled tensors over a serial
line and reads them back when a Fetching operator needs them.

The wire format is the one of ``tflm_ops/core/include/tinyseg/remote_protocol.h`` (the C++ client
that runs on the board): each frame is

    u8 type | u8 flags | u16 seq | u32 slot | u32 offset | u32 arg | payload | u32 crc32

little-endian, CRC-32 = ``zlib.crc32`` over everything before it, COBS-encoded and ended by one
0x00 byte. Requests: HELLO, WRITE, READ, ERASE (fill with 0xFF), DROP, SIZE, LOG (text from the
board, printed by the host: its prints share the USB link); responses: ACK, DATA,
NAK (bad frame: resend), ERROR (arg = the core's Status code). The client resends a request with
the same seq after a timeout, a NAK or a corrupted response; the host answers a repeated seq from
its cache instead of running the request twice.

``serve`` is what ``tinyseg remote-host`` runs. ``RemoteServer`` is the protocol without I/O (tests
drive it directly) and ``RemoteClient`` is a Python reference client (tests, host-side tools).
"""

from __future__ import annotations

import enum
import os
import struct
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from ..errors import TinySegError

PROTOCOL_VERSION = 1
HEADER = struct.Struct("<BBHIII")  # type, flags, seq, slot, offset, arg
HEADER_BYTES = HEADER.size  # 16
CRC_BYTES = 4
DEFAULT_MAX_PAYLOAD = 4096  # the host accepts up to this; the board's client picks <= it
MAX_SLOT_BYTES = 64 << 20  # one spilled tensor; more is a bug on the board, not a real tensor
# Bytes all slots together may hold (`remote-host --capacity`), and so the largest slot: a wrong
# offset must not make the host allocate (or write to disk) without bound. 16 MiB is over seven times
# the most any example model spills per inference (Attention U-Net: 2,150,400 B, README).
DEFAULT_CAPACITY = 16 << 20
MAX_SLOTS = 65536  # slots held at once: each costs memory (or a file) even when empty
# Erased bytes are written in pieces of this size: a frame's length never becomes one allocation.
FILL_CHUNK = 1 << 16
_ERASED = b"\xff" * FILL_CHUNK


class MsgType(enum.IntEnum):
    HELLO = 0x01
    WRITE = 0x02
    READ = 0x03
    ERASE = 0x04
    DROP = 0x05
    SIZE = 0x06
    LOG = 0x07
    ACK = 0x80
    DATA = 0x81
    NAK = 0x82
    ERROR = 0x83


class NakReason(enum.IntEnum):
    CRC = 1
    FRAMING = 2
    TOO_LONG = 3
    MALFORMED = 4


class Status(enum.IntEnum):
    """The core's ``tinyseg::Status`` values (status.h); they travel in ERROR frames."""

    OK = 0
    INVALID_ARGUMENT = 1
    OUT_OF_RANGE = 2
    MISALIGNED = 3
    NOT_ERASED = 4
    BUFFER_TOO_SMALL = 5
    CORRUPT = 6
    IO_ERROR = 7
    BUSY = 8
    NO_SPACE = 9
    NOT_FOUND = 10
    UNSUPPORTED = 11


class FrameError(ValueError):
    """A frame that fails COBS decoding, its CRC, or the header layout."""


class SlotError(Exception):
    """A request the store refuses; carries the Status sent back in an ERROR frame."""

    def __init__(self, status: Status, message: str = "") -> None:
        super().__init__(message or status.name.lower())
        self.status = status


# ----------------------------------------------------------------------------- framing


def cobs_encode(data: bytes) -> bytes:
    """COBS without the trailing delimiter: the output has no 0x00 byte."""
    out = bytearray([0])
    code_at, code = 0, 1
    for b in data:
        if b == 0:
            out[code_at] = code
            code_at, code = len(out), 1
            out.append(0)
        else:
            out.append(b)
            code += 1
            if code == 0xFF:
                out[code_at] = code
                code_at, code = len(out), 1
                out.append(0)
    out[code_at] = code
    return bytes(out)


def cobs_decode(data: bytes) -> bytes:
    out = bytearray()
    i, n = 0, len(data)
    pending_zero = False
    while i < n:
        code = data[i]
        i += 1
        if code == 0:
            raise FrameError("0x00 inside a COBS frame")
        if pending_zero:
            out.append(0)
        block = data[i : i + code - 1]
        if len(block) != code - 1 or 0 in block:
            raise FrameError("truncated COBS block")
        out += block
        i += code - 1
        pending_zero = code != 0xFF
    return bytes(out)


@dataclass(frozen=True)
class Frame:
    type: int
    seq: int = 0
    slot: int = 0
    offset: int = 0
    arg: int = 0
    payload: bytes = b""
    flags: int = 0


def encode_frame(f: Frame) -> bytes:
    """Wire bytes of one frame, delimiter included."""
    raw = HEADER.pack(int(f.type), f.flags, f.seq & 0xFFFF, f.slot, f.offset, f.arg) + bytes(
        f.payload
    )
    raw += struct.pack("<I", zlib.crc32(raw))
    return cobs_encode(raw) + b"\0"


def parse_frame(wire: bytes) -> Frame:
    """Decode the bytes between two delimiters (delimiter excluded)."""
    raw = cobs_decode(wire)
    if len(raw) < HEADER_BYTES + CRC_BYTES:
        raise FrameError(f"frame of {len(raw)} bytes is shorter than header + CRC")
    body, (crc,) = raw[:-CRC_BYTES], struct.unpack("<I", raw[-CRC_BYTES:])
    if zlib.crc32(body) != crc:
        raise FrameError("CRC mismatch")
    t, flags, seq, slot, offset, arg = HEADER.unpack_from(body)
    if t not in MsgType._value2member_map_:
        raise FrameError(f"unknown frame type 0x{t:02x}")
    return Frame(t, seq, slot, offset, arg, body[HEADER_BYTES:], flags)


# ----------------------------------------------------------------------------- slot storage


class SlotStore(Protocol):
    def write(self, slot: int, offset: int, data: bytes) -> None: ...
    def read(self, slot: int, offset: int, length: int) -> bytes: ...
    def erase(self, slot: int, offset: int, length: int) -> None: ...
    def drop(self, slot: int) -> None: ...
    def size(self, slot: int) -> int: ...


def _erased_pieces(length: int):
    """``length`` bytes of 0xFF as pieces of at most FILL_CHUNK bytes."""
    while length > 0:
        n = min(length, FILL_CHUNK)
        yield _ERASED if n == FILL_CHUNK else _ERASED[:n]
        length -= n


def _fill(buf: bytearray, offset: int, length: int) -> None:
    for piece in _erased_pieces(length):
        buf[offset : offset + len(piece)] = piece
        offset += len(piece)


def _check_end(end: int, limit: int) -> None:
    if end > limit:
        raise SlotError(Status.NO_SPACE, f"slot would grow to {end} bytes (limit {limit})")


class _Capacity:
    """The bytes every slot holds together, against the store's capacity. A slot grows only when its
    new end fits both the per-slot limit and what the other slots leave; the check comes before any
    byte is allocated or written, so a far offset costs nothing."""

    capacity: int
    max_slot_bytes: int
    used: int

    def _limit(self) -> int:
        return min(self.max_slot_bytes, self.capacity)

    def _reserve(self, slot_bytes: int, end: int, new_slot: bool, slots: int) -> None:
        _check_end(end, self._limit())
        if new_slot and slots >= MAX_SLOTS:
            raise SlotError(Status.NO_SPACE, f"{slots} slots held (limit {MAX_SLOTS})")
        grow = max(end - slot_bytes, 0)
        if self.used + grow > self.capacity:
            raise SlotError(
                Status.NO_SPACE,
                f"the store would hold {self.used + grow} bytes (capacity {self.capacity})",
            )


@dataclass
class MemoryStore(_Capacity):
    """Slots in host memory (the default: spilled tensors live as long as the host runs)."""

    max_slot_bytes: int = MAX_SLOT_BYTES
    slots: dict[int, bytearray] = field(default_factory=dict)
    capacity: int = DEFAULT_CAPACITY
    used: int = 0  # bytes held by all slots

    def _grow(self, slot: int, end: int) -> bytearray:
        buf = self.slots.get(slot)
        self._reserve(len(buf) if buf is not None else 0, end, buf is None, len(self.slots))
        if buf is None:
            buf = self.slots[slot] = bytearray()
        if end > len(buf):
            self.used += end - len(buf)
            for piece in _erased_pieces(end - len(buf)):
                buf += piece
        return buf

    def write(self, slot: int, offset: int, data: bytes) -> None:
        self._grow(slot, offset + len(data))[offset : offset + len(data)] = data

    def read(self, slot: int, offset: int, length: int) -> bytes:
        buf = self.slots.get(slot)
        if buf is None:
            raise SlotError(Status.NOT_FOUND)
        if offset + length > len(buf):
            raise SlotError(Status.OUT_OF_RANGE)
        return bytes(buf[offset : offset + length])

    def erase(self, slot: int, offset: int, length: int) -> None:
        # the bound check (_grow) before any byte of the erase exists: a subscript assignment
        # would build its right-hand side first
        _fill(self._grow(slot, offset + length), offset, length)

    def drop(self, slot: int) -> None:
        buf = self.slots.pop(slot, None)
        if buf is not None:
            self.used -= len(buf)

    def size(self, slot: int) -> int:
        if slot not in self.slots:
            raise SlotError(Status.NOT_FOUND)
        return len(self.slots[slot])


SLOT_FILE = "slot_{:08x}.bin"


@dataclass
class DirStore(_Capacity):
    """One file per slot under a directory (``--storage DIR``): slots survive a host restart. The
    slot files already there count against the capacity."""

    root: Path
    max_slot_bytes: int = MAX_SLOT_BYTES
    capacity: int = DEFAULT_CAPACITY
    used: int = 0

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self._sizes = {
                int(p.name[5:13], 16): p.stat().st_size
                for p in self.root.glob("slot_*.bin")
                if len(p.name) == 17 and all(c in "0123456789abcdef" for c in p.name[5:13])
            }
        except OSError as exc:
            raise TinySegError(
                f"cannot use storage directory {self.root}: {exc.strerror or exc}"
            ) from None
        self.used = sum(self._sizes.values())

    def _path(self, slot: int) -> Path:
        return self.root / SLOT_FILE.format(slot)

    def _grow(self, slot: int, end: int):
        size = self._sizes.get(slot)
        self._reserve(size or 0, end, size is None, len(self._sizes))
        p = self._path(slot)
        f = open(p, "r+b") if p.exists() else open(p, "w+b")
        size = f.seek(0, os.SEEK_END)
        self._sizes[slot] = max(size, end)
        if end > size:
            self.used += end - size
            for piece in _erased_pieces(end - size):
                f.write(piece)
        return f

    def write(self, slot: int, offset: int, data: bytes) -> None:
        with self._grow(slot, offset + len(data)) as f:
            f.seek(offset)
            f.write(data)

    def read(self, slot: int, offset: int, length: int) -> bytes:
        p = self._path(slot)
        if not p.exists():
            raise SlotError(Status.NOT_FOUND)
        with open(p, "rb") as f:
            if offset + length > f.seek(0, os.SEEK_END):
                raise SlotError(Status.OUT_OF_RANGE)
            f.seek(offset)
            return f.read(length)

    def erase(self, slot: int, offset: int, length: int) -> None:
        with self._grow(slot, offset + length) as f:
            f.seek(offset)
            for piece in _erased_pieces(length):
                f.write(piece)

    def drop(self, slot: int) -> None:
        self._path(slot).unlink(missing_ok=True)
        self.used -= self._sizes.pop(slot, 0)

    def size(self, slot: int) -> int:
        p = self._path(slot)
        if not p.exists():
            raise SlotError(Status.NOT_FOUND)
        return p.stat().st_size


# ----------------------------------------------------------------------------- server


@dataclass(frozen=True)
class Faults:
    """Test-only misbehaviour of the host, counted from 0 over frames it receives / sends."""

    corrupt_responses: frozenset[int] = frozenset()  # flip one byte of these responses
    drop_responses: frozenset[int] = frozenset()  # never send these responses
    silent_after: int | None = None  # answer only this many request frames, then nothing


@dataclass
class ServerStats:
    frames: int = 0
    bad_frames: int = 0
    duplicates: int = 0
    stalled: int = 0  # partial frames dropped after the peer went silent mid-frame
    bytes_in: int = 0
    bytes_out: int = 0
    logs: int = 0
    failed: int = 0  # requests that raised something unexpected (answered with an I/O error)


def _flip(wire: bytes) -> bytes:
    """Corrupt one byte without creating a delimiter (the receiver sees exactly one bad frame)."""
    b = bytearray(wire)
    i = len(b) // 2
    b[i] ^= 0x10
    if b[i] == 0:
        b[i] = 0x01
    return bytes(b)


class RemoteServer:
    """The protocol state machine: feed it received bytes, send what it returns."""

    def __init__(
        self,
        store: SlotStore,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        faults: Faults | None = None,
        on_log: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.on_log = on_log
        self.max_payload = max_payload
        self.faults = faults or Faults()
        self.stats = ServerStats()
        self._rx = bytearray()
        self._overflow = False
        self._last: tuple[int, int, bytes] | None = None  # (seq, type, wire response)
        self._requests = 0
        self._responses = 0
        self._max_wire = 2 * (HEADER_BYTES + max_payload + CRC_BYTES) + 16

    @property
    def in_frame(self) -> bool:
        """True while part of a frame has arrived but not its delimiter."""
        return bool(self._rx) or self._overflow

    def drop_partial(self) -> None:
        if self.in_frame:
            self.stats.stalled += 1
        self._rx.clear()
        self._overflow = False

    def feed(self, data: bytes) -> list[bytes]:
        self.stats.bytes_in += len(data)
        out: list[bytes] = []
        start = 0
        while True:
            end = data.find(b"\0", start)
            chunk = data[start:] if end < 0 else data[start:end]
            if not self._overflow:
                self._rx += chunk
                if len(self._rx) > self._max_wire:
                    self._rx.clear()
                    self._overflow = True
            if end < 0:
                break
            start = end + 1
            wire, overflow = bytes(self._rx), self._overflow
            self._rx.clear()
            self._overflow = False
            if overflow:
                self.stats.bad_frames += 1
                out += self._emit(Frame(MsgType.NAK, arg=NakReason.TOO_LONG), None)
            elif wire:
                out += self._handle(wire)
        return out

    def _emit(self, f: Frame, request_type: int | None) -> list[bytes]:
        """Send a response; keep it for a repeated request unless it is a NAK (request_type None)."""
        wire = encode_frame(f)
        if request_type is not None:
            self._last = (f.seq, request_type, wire)
        return self._send(wire)

    def _send(self, wire: bytes) -> list[bytes]:
        k = self._responses
        self._responses += 1
        if k in self.faults.drop_responses:
            return []
        if k in self.faults.corrupt_responses:
            wire = _flip(wire)
        self.stats.bytes_out += len(wire)
        return [wire]

    def _handle(self, wire: bytes) -> list[bytes]:
        self._requests += 1
        if self.faults.silent_after is not None and self._requests > self.faults.silent_after:
            return []
        try:
            req = parse_frame(wire)
        except FrameError:
            self.stats.bad_frames += 1
            return self._emit(Frame(MsgType.NAK, arg=NakReason.CRC), None)
        self.stats.frames += 1
        if (
            req.type != MsgType.HELLO
            and self._last is not None
            and self._last[:2] == (req.seq, req.type)
        ):
            self.stats.duplicates += 1
            return self._send(self._last[2])
        return self._emit(self._execute(req), req.type)

    def _execute(self, req: Frame) -> Frame:
        ack = dict(seq=req.seq, slot=req.slot, offset=req.offset)
        try:
            if req.type == MsgType.HELLO:
                return Frame(
                    MsgType.ACK,
                    arg=PROTOCOL_VERSION,
                    payload=struct.pack("<I", self.max_payload),
                    **ack,
                )
            if req.type == MsgType.WRITE:
                if len(req.payload) != req.arg or len(req.payload) > self.max_payload:
                    raise SlotError(Status.INVALID_ARGUMENT)
                self.store.write(req.slot, req.offset, req.payload)
                return Frame(MsgType.ACK, arg=len(req.payload), **ack)
            if req.type == MsgType.READ:
                if req.arg > self.max_payload:
                    raise SlotError(Status.INVALID_ARGUMENT)
                return Frame(
                    MsgType.DATA,
                    arg=req.arg,
                    payload=self.store.read(req.slot, req.offset, req.arg),
                    **ack,
                )
            if req.type == MsgType.ERASE:
                self.store.erase(req.slot, req.offset, req.arg)
                return Frame(MsgType.ACK, arg=req.arg, **ack)
            if req.type == MsgType.DROP:
                self.store.drop(req.slot)
                return Frame(MsgType.ACK, **ack)
            if req.type == MsgType.SIZE:
                return Frame(MsgType.ACK, arg=self.store.size(req.slot), **ack)
            if req.type == MsgType.LOG:
                self.stats.logs += 1
                if self.on_log is not None:
                    self.on_log(req.payload.decode("utf-8", errors="replace").rstrip("\r\n"))
                return Frame(MsgType.ACK, arg=len(req.payload), **ack)
            raise SlotError(Status.UNSUPPORTED)
        except SlotError as exc:
            return Frame(MsgType.ERROR, arg=int(exc.status), **ack)
        except MemoryError:
            return Frame(MsgType.ERROR, arg=int(Status.NO_SPACE), **ack)
        except Exception:  # noqa: BLE001 - whatever a request does, the host answers and keeps serving
            self.stats.failed += 1
            return Frame(MsgType.ERROR, arg=int(Status.IO_ERROR), **ack)


# ----------------------------------------------------------------------------- serial loop


def _log(msg: str) -> None:
    print(f"tinyseg remote-host: {msg}", file=sys.stderr, flush=True)


def _open_port(port: str, baud: int, read_timeout: float = 0.05):
    try:
        import serial
    except ImportError:
        raise TinySegError(
            "pyserial is not installed: pip install 'tinyseg-plugin[serial]'"
        ) from None
    try:
        return serial.serial_for_url(port, baudrate=baud, timeout=read_timeout, write_timeout=10)
    except (serial.SerialException, OSError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TinySegError(f"cannot open serial port {port}: {reason}") from None


def _disconnect_errors() -> tuple[type[BaseException], ...]:
    """What pyserial raises when the device goes away (termios.error is no OSError)."""
    import serial

    errors: tuple[type[BaseException], ...] = (serial.SerialException, OSError)
    try:
        import termios

        errors += (termios.error,)
    except ImportError:  # not POSIX
        pass
    return errors


def run(
    ser,
    server: RemoteServer,
    timeout: float,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """Serve one open port until the peer disconnects ("disconnected") or `stop` is set ("stopped").

    A frame whose bytes stop arriving for `timeout` seconds is dropped, so a board that reset
    mid-frame cannot wedge the host.
    """
    gone = _disconnect_errors()
    last_rx = clock()
    while stop is None or not stop.is_set():
        try:
            data = ser.read(max(1, ser.in_waiting))
        except gone:
            return "disconnected"
        now = clock()
        if not data:
            if server.in_frame and now - last_rx > timeout:
                server.drop_partial()
                _log(f"dropped a partial frame: no byte for {timeout:g} s")
            continue
        last_rx = now
        try:
            for wire in server.feed(data):
                ser.write(wire)
            ser.flush()
        except gone:
            return "disconnected"
    return "stopped"


def serve(
    port: str,
    baud: int,
    storage: str | None,
    timeout: float,
    once: bool,
    capacity: int = DEFAULT_CAPACITY,
) -> int:
    """`tinyseg remote-host`: serve remote spilling on a serial port until interrupted."""
    if timeout <= 0:
        raise TinySegError(f"--timeout must be positive, got {timeout:g}")
    if capacity <= 0:
        raise TinySegError(f"--capacity must be positive, got {capacity}")
    store: SlotStore = (
        DirStore(Path(storage), capacity=capacity) if storage else MemoryStore(capacity=capacity)
    )
    ser = _open_port(port, baud)
    server = RemoteServer(store, on_log=lambda line: print(f"board: {line}", flush=True))
    _log(
        f"serving {port} at {baud} baud, slots in {storage or 'memory'} up to {capacity:,} bytes (Ctrl-C to stop)"
    )
    try:
        while True:
            reason = run(ser, server, timeout)
            try:
                ser.close()
            except Exception:  # noqa: BLE001 - the port is gone already
                pass
            s = server.stats
            _log(f"board {reason}: {s.frames} frames, {s.bad_frames} bad, {s.duplicates} resent")
            if once:
                return 0
            ser = _reopen(port, baud)
            _log(f"{port} is back")
    except KeyboardInterrupt:
        _log("stopped")
        return 0
    finally:
        try:
            ser.close()
        except Exception:  # noqa: BLE001
            pass


def _reopen(port: str, baud: int):
    """Wait for a USB serial port to come back after the board resets."""
    _log(f"waiting for {port} to come back")
    while True:
        try:
            return _open_port(port, baud)
        except TinySegError:
            time.sleep(0.5)


# ----------------------------------------------------------------------------- reference client


class RemoteError(TinySegError):
    """A client call failed: ``kind`` is timeout / corrupt_frame / nak / remote_status / protocol."""

    def __init__(self, message: str, kind: str, status: Status = Status.IO_ERROR) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


@dataclass
class ClientStats:
    requests: int = 0
    frames_sent: int = 0
    retries: int = 0
    timeouts: int = 0
    bad_frames: int = 0
    naks: int = 0
    stale: int = 0


class SerialLine(Protocol):
    """The serial line to the host, as the client needs it: pyserial's ``Serial`` fits (with a short
    read timeout). (Arduino calls its side a ``Stream``; "stream" in TinySeg means row streaming.)"""

    def write(self, data: bytes) -> int | None: ...
    def read(self, size: int = 1) -> bytes: ...


class RemoteClient:
    """Python reference client of the protocol (same behaviour as tinyseg::remote::RemoteClient)."""

    def __init__(
        self,
        line: SerialLine,
        timeout: float = 1.0,
        attempts: int = 4,
        max_payload: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.line = line
        self.timeout = timeout
        self.attempts = attempts
        self.max_payload = max_payload
        self.chunk = max_payload
        self.clock = clock
        self.seq = 0
        self.stats = ClientStats()
        self._rx = bytearray()

    def _receive(self, deadline: float) -> bytes | None:
        while True:
            i = self._rx.find(b"\0")
            if i >= 0:
                wire = bytes(self._rx[:i])
                del self._rx[: i + 1]
                if wire:
                    return wire
                continue
            if self.clock() >= deadline:
                return None
            self._rx += self.line.read(4096 if getattr(self.line, "in_waiting", 0) else 1)

    def _transact(self, req: Frame, expect: MsgType) -> Frame:
        self.seq = (self.seq + 1) & 0xFFFF or 1
        wire = encode_frame(Frame(req.type, self.seq, req.slot, req.offset, req.arg, req.payload))
        self.stats.requests += 1
        failure = "timeout"
        for attempt in range(self.attempts):
            if attempt:
                self.stats.retries += 1
            self.line.write(wire)
            self.stats.frames_sent += 1
            deadline = self.clock() + self.timeout
            while True:
                got = self._receive(deadline)
                if got is None:
                    self.stats.timeouts += 1
                    failure = "timeout"
                    break
                try:
                    resp = parse_frame(got)
                except FrameError:
                    self.stats.bad_frames += 1
                    failure = "corrupt_frame"
                    break
                if resp.type == MsgType.NAK:
                    self.stats.naks += 1
                    failure = "nak"
                    break
                if resp.seq != self.seq:
                    self.stats.stale += 1
                    continue
                if resp.type == MsgType.ERROR:
                    st = (
                        Status(resp.arg)
                        if resp.arg in Status._value2member_map_
                        else Status.IO_ERROR
                    )
                    raise RemoteError(
                        f"host refused {MsgType(req.type).name} slot {req.slot}: {st.name.lower()}",
                        "remote_status",
                        st,
                    )
                if resp.type != expect:
                    raise RemoteError(
                        f"expected {expect.name}, got {MsgType(resp.type).name}", "protocol"
                    )
                return resp
        raise RemoteError(
            f"{MsgType(req.type).name} slot {req.slot}: {failure} after {self.attempts} attempts "
            f"of {self.timeout:g} s",
            failure,
        )

    def hello(self) -> int:
        self.line.write(b"\0")
        self._rx.clear()
        r = self._transact(
            Frame(MsgType.HELLO, arg=PROTOCOL_VERSION, payload=struct.pack("<I", self.max_payload)),
            MsgType.ACK,
        )
        if r.arg != PROTOCOL_VERSION or len(r.payload) < 4:
            raise RemoteError(
                f"host speaks protocol {r.arg}, we speak {PROTOCOL_VERSION}", "protocol"
            )
        (host_max,) = struct.unpack_from("<I", r.payload)
        self.chunk = min(self.max_payload, host_max)
        return r.arg

    def write(self, slot: int, offset: int, data: bytes) -> None:
        for i in range(0, max(len(data), 1), self.chunk):
            part = bytes(data[i : i + self.chunk])
            r = self._transact(
                Frame(MsgType.WRITE, slot=slot, offset=offset + i, arg=len(part), payload=part),
                MsgType.ACK,
            )
            if r.arg != len(part):
                raise RemoteError("short write acknowledged", "protocol")

    def read(self, slot: int, offset: int, length: int) -> bytes:
        out = bytearray()
        for i in range(0, length, self.chunk):
            n = min(self.chunk, length - i)
            r = self._transact(
                Frame(MsgType.READ, slot=slot, offset=offset + i, arg=n), MsgType.DATA
            )
            if len(r.payload) != n:
                raise RemoteError(f"asked {n} bytes, got {len(r.payload)}", "protocol")
            out += r.payload
        return bytes(out)

    def erase(self, slot: int, offset: int, length: int) -> None:
        self._transact(Frame(MsgType.ERASE, slot=slot, offset=offset, arg=length), MsgType.ACK)

    def drop(self, slot: int) -> None:
        self._transact(Frame(MsgType.DROP, slot=slot), MsgType.ACK)

    def size(self, slot: int) -> int:
        return self._transact(Frame(MsgType.SIZE, slot=slot), MsgType.ACK).arg

    def log(self, text: str) -> None:
        data = text.encode()[: self.chunk]
        self._transact(Frame(MsgType.LOG, arg=len(data), payload=data), MsgType.ACK)
