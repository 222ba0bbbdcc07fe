"""A GGUF file's header, read from a path or an http(s) URL without the weights.

ggml-org's ``gguf`` package gives the format's constants (value types, tensor types and their
block sizes, file types).  Its ``GGUFReader`` is not used to read: it memory-maps a whole local
file, and a model on Hugging Face is 5-200 GB that we must not download.  The header (key/values,
then one record per tensor) is at the front of the file and is parsed here from a byte stream that
is a local file or HTTP range requests, so only the header's bytes ever cross the network (a
server that ignores Range sends the file from its start, and the reader closes it after the header).
"""

from __future__ import annotations

import os
import re
import struct

MAGIC = b"GGUF"
MAX_HEADER = 256 << 20  # a header is KiB to a few MiB (the vocabulary); past this it is not a GGUF we can read
FIRST_RANGE = 1 << 20
MAX_RANGE = 32 << 20
KEEP_ARRAY = 4096  # longer arrays (token lists) are skipped and only their length kept
SPLIT_RE = re.compile(r"^(?P<stem>.*)-(?P<i>\d{5})-of-(?P<n>\d{5})\.gguf$")


class ModelError(Exception):
    """A model file that cannot be read: said in words, with the file or URL."""


class _Stream:
    """Sequential bytes with a buffer; ``_more(n)`` brings at least n more or raises EOFError."""

    def __init__(self, where: str):
        self.where, self.buf, self.pos, self.base = where, b"", 0, 0

    def take(self, n: int) -> bytes:
        while len(self.buf) - self.pos < n:
            if self.base + len(self.buf) > MAX_HEADER:
                raise ModelError(f"{self.where}: the header runs past {MAX_HEADER >> 20} MiB; not a GGUF header "
                                 "this reader can use")
            self.buf = self.buf[self.pos:]
            self.base += self.pos
            self.pos = 0
            more = self._more(n - len(self.buf))
            if not more:
                raise ModelError(f"{self.where}: the file ends inside its GGUF header (truncated or still "
                                 "downloading)")
            self.buf += more
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def offset(self) -> int:
        return self.base + self.pos

    def close(self) -> None:
        pass


class _File(_Stream):
    def __init__(self, path: str):
        super().__init__(path)
        try:
            from probes.inputs import open_regular

            self.f = open_regular(path)  # a FIFO or a device would block the read forever
        except FileNotFoundError:
            raise ModelError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise ModelError(f"{path}: is a directory, not a GGUF file") from None
        except OSError as e:
            if os.path.isdir(path):
                raise ModelError(f"{path}: is a directory, not a GGUF file") from None
            if os.path.exists(path) and not os.path.isfile(path):
                raise ModelError(f"{path}: not a regular file (a FIFO, socket or device); not read") from None
            raise ModelError(f"{path}: cannot be read ({e.strerror or e})") from None
        self.size = os.fstat(self.f.fileno()).st_size

    def _more(self, n: int) -> bytes:
        return self.f.read(max(n, FIRST_RANGE))

    def close(self) -> None:
        self.f.close()


class _Http(_Stream):
    """Range requests of growing size; a server that answers 200 to a Range is read as a stream."""

    def __init__(self, url: str, session, limits, headers: dict):
        super().__init__(url)
        self.url, self.session, self.limits, self.headers = url, session, limits, headers
        self.fetched, self.want, self.stream, self.size = 0, FIRST_RANGE, None, None

    def _get(self, extra: dict):
        import requests

        self.limits.check(self.url)
        try:
            return self.session.get(self.url, headers={**self.headers, **extra}, stream=True,
                                    timeout=self.limits.timeout)
        except (requests.ConnectionError, requests.Timeout) as e:
            from selector.install.download import unreachable

            # in the words a download uses for the same cause (the file list of a repo, a release)
            raise ModelError(f"cannot reach {self.url}: {unreachable(e) or e.__class__.__name__}") from None
        except requests.RequestException as e:
            raise ModelError(f"{self.url}: {e.__class__.__name__}: {e}") from None

    def _more(self, n: int) -> bytes:
        import requests

        if self.stream is None:
            size = max(n, self.want)
            r = self._get({"Range": f"bytes={self.fetched}-{self.fetched + size - 1}"})
            if r.status_code == 416:
                r.close()
                return b""  # asked past the end: the header is cut short
            if r.status_code in (401, 403):
                r.close()
                raise ModelError(f"{self.url}: HTTP {r.status_code}; a gated or private model needs HF_TOKEN "
                                 "(a Hugging Face token with access to it)")
            if r.status_code == 404:
                r.close()
                raise ModelError(f"{self.url}: not found (HTTP 404)")
            if r.status_code == 206:
                total = (r.headers.get("Content-Range") or "").rpartition("/")[2]
                self.size = int(total) if total.isdigit() else self.size
                self.want = min(self.want * 4, MAX_RANGE)
                data = self._read(r, size)
                self.fetched += len(data)
                return data
            if r.status_code != 200:
                r.close()
                raise ModelError(f"{self.url}: HTTP {r.status_code}")
            # no Range support: read the file from its start, as far as the header goes
            length = r.headers.get("Content-Length")
            self.size = int(length) if length and length.isdigit() else None
            self.stream = r
            skip = self.fetched
            while skip > 0:
                block = self._read(r, min(skip, MAX_RANGE))
                if not block:
                    return b""
                skip -= len(block)
        try:
            return self._read(self.stream, max(n, FIRST_RANGE))
        except requests.RequestException as e:
            raise ModelError(f"{self.url}: the answer was cut off ({e.__class__.__name__})") from None

    def _read(self, r, n: int) -> bytes:
        out = bytearray()
        try:
            read1 = getattr(r.raw, "read1", None)
            while len(out) < n:
                # read1 returns what has arrived, so the deadline is checked even when a server
                # drips a few bytes at a time (read(n) would wait for all n)
                want = min(n - len(out), 1 << 20)
                block = read1(want, decode_content=True) if read1 else r.raw.read(want, decode_content=True)
                if not block:
                    break
                out += block
                self.limits.check(self.url)
        except Exception as e:
            if isinstance(e, ModelError):
                raise
            raise ModelError(f"{self.url}: the answer was cut off ({e.__class__.__name__})") from None
        finally:
            if self.stream is not r:
                r.close()
        return bytes(out)

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()


def _parse(s: _Stream) -> dict:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

    if s.take(4) != MAGIC:
        raise ModelError(f"{s.where}: not a GGUF file (it does not start with 'GGUF')")
    version, = struct.unpack("<I", s.take(4))
    if version not in (2, 3):
        raise ModelError(f"{s.where}: GGUF version {version}; versions 2 and 3 are read")
    n_tensors, n_kv = struct.unpack("<QQ", s.take(16))
    if n_tensors > 1 << 20 or n_kv > 1 << 20:
        raise ModelError(f"{s.where}: the header claims {n_tensors} tensors and {n_kv} keys; not a real GGUF")
    scalar = {GGUFValueType.UINT8: "<B", GGUFValueType.INT8: "<b", GGUFValueType.UINT16: "<H",
              GGUFValueType.INT16: "<h", GGUFValueType.UINT32: "<I", GGUFValueType.INT32: "<i",
              GGUFValueType.FLOAT32: "<f", GGUFValueType.BOOL: "<?", GGUFValueType.UINT64: "<Q",
              GGUFValueType.INT64: "<q", GGUFValueType.FLOAT64: "<d"}

    def string() -> str:
        n, = struct.unpack("<Q", s.take(8))
        if n > 1 << 24:
            raise ModelError(f"{s.where}: a string of {n} bytes in the header; not a real GGUF")
        return s.take(n).decode("utf-8", "replace")

    def value(t: int):
        try:
            t = GGUFValueType(t)
        except ValueError:
            raise ModelError(f"{s.where}: unknown value type {t} in the header at byte {s.offset()}") from None
        if t == GGUFValueType.STRING:
            return string()
        if t == GGUFValueType.ARRAY:
            it, n = struct.unpack("<IQ", s.take(12))
            if n > 1 << 26:
                raise ModelError(f"{s.where}: an array of {n} items in the header; not a real GGUF")
            if n <= KEEP_ARRAY:
                return [value(it) for _ in range(n)]
            if it == GGUFValueType.STRING:  # a vocabulary: skip each string, keep the count
                for _ in range(n):
                    s.take(struct.unpack("<Q", s.take(8))[0])
            elif it in scalar:
                s.take(struct.calcsize(scalar[GGUFValueType(it)]) * n)
            else:
                raise ModelError(f"{s.where}: a long array of type {it} in the header; not read")
            return {"length": n}
        fmt = scalar[t]
        return struct.unpack(fmt, s.take(struct.calcsize(fmt)))[0]

    kv = {}
    for _ in range(n_kv):
        key = string()
        kv[key] = value(struct.unpack("<I", s.take(4))[0])
    tensors = {}
    data_end = 0
    for _ in range(n_tensors):
        name = string()
        n_dims, = struct.unpack("<I", s.take(4))
        if n_dims > 8:
            raise ModelError(f"{s.where}: tensor {name} has {n_dims} dimensions; not a real GGUF")
        dims = struct.unpack(f"<{n_dims}Q", s.take(8 * n_dims))
        ttype, offset = struct.unpack("<IQ", s.take(12))
        try:
            block, size = GGML_QUANT_SIZES[GGMLQuantizationType(ttype)]
        except (ValueError, KeyError):
            raise ModelError(f"{s.where}: tensor {name} has type {ttype}, which this gguf package does not "
                             "know (pip install -U gguf)") from None
        count = 1
        for d in dims:
            count *= d
        tensors[name] = {"elements": count, "bytes": count // block * size, "type": GGMLQuantizationType(ttype).name,
                         "dims": list(dims)}
        data_end = max(data_end, offset + count // block * size)
    # the tensor data starts at the header's end rounded up to general.alignment (32 unless set)
    align = kv.get("general.alignment") if isinstance(kv.get("general.alignment"), int) else 32
    start = -(-s.offset() // max(align, 1)) * max(align, 1)
    return {"version": version, "kv": kv, "tensors": tensors, "header_bytes": s.offset(),
            "data_end": start + data_end if tensors else s.offset()}


def read(where: str, session=None, limits=None, headers: dict | None = None) -> dict:
    """The header of one GGUF file: ``{"kv", "tensors", "size", "header_bytes"}``."""
    if where.startswith(("http://", "https://")):
        if session is None:
            import requests

            session = requests.Session()
        if limits is None:
            from selector.install.download import Limits

            limits = Limits.from_env(deadline=120.0)
        s = _Http(where, session, limits, headers or {})
    else:
        s = _File(where)
    try:
        out = _parse(s)
    finally:
        s.close()
    out["size"] = s.size
    # a local file shorter than its tensors is a download cut short, which the engine refuses to load; a
    # server's size is what it says it serves, and is not second-guessed
    if isinstance(s, _File) and out["data_end"] > s.size:
        raise ModelError(f"{where}: the file is {s.size} bytes but its tensors end at byte {out['data_end']} "
                         "(truncated, or still downloading)")
    return out


def split_names(where: str) -> list[str] | None:
    """All the parts of a split GGUF named by its first part (``-00001-of-00003.gguf``), or None."""
    head, sep, last = where.rpartition("/")
    m = SPLIT_RE.match(last)
    if not m:
        return None
    n = int(m["n"])
    return [f"{head}{sep}{m['stem']}-{i:05d}-of-{n:05d}.gguf" for i in range(1, n + 1)]
