"""The only door to the machine.

Every probe asks a :class:`Host` for files, links, environment and platform facts; it never calls
``open``/``os``/``platform`` itself.  :class:`LiveHost` answers from this machine,
:class:`CaptureHost` from a capture directory (``DIR/capture.json`` + ``DIR/fs/<path>``), and
:class:`RecordingHost` wraps a live host to remember what the probes looked at, which is exactly
what ``pick-backend capture`` writes.
"""

from __future__ import annotations

import os
import stat

from probes.inputs import InputError, open_regular, read_json

# Environment variables that change what the probes report; a capture records these and no others.
RELEVANT_ENV = (
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HSA_OVERRIDE_GFX_VERSION",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "GGML_VK_VISIBLE_DEVICES",
    "VK_DRIVER_FILES",
    "VK_ICD_FILENAMES",
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_DATA_HOME",
    "XDG_DATA_DIRS",
    "PROCESSOR_ARCHITECTURE",
    "PROCESSOR_ARCHITEW6432",
    "LOCALAI_FORCE_META_BACKEND_CAPABILITY",  # probes/engines.py
    "LOCALAI_FORCE_META_BACKEND_CAPABILITY_RUN_FILE",
)

# ... and every variable with one of these prefixes (ROCr's per-node override, HSA_OVERRIDE_GFX_VERSION_<node>)
RELEVANT_ENV_PREFIXES = ("HSA_OVERRIDE_GFX_VERSION_",)

EXECUTABLES = ("llama-server", "docker", "podman")

CAPTURE_FORMAT = 1

# capture.json ``dev``: what this process may do with a device node that exists.
DEV_ACCESS = ("rw", "r", "none")


class Host:
    """Interface.  Paths are absolute POSIX paths as on the probed machine."""

    system = "Linux"  # platform.system()
    machine = "x86_64"  # platform.machine()
    release = ""  # platform.release()
    env: dict = {}
    is_capture = False
    description = "this machine"

    def read(self, path: str) -> str | None:
        """Text of a file; None when it does not exist.  Raises PermissionError when it exists
        but may not be read (a device hidden by a container's cgroup)."""
        raise NotImplementedError

    def listdir(self, path: str) -> list[str]:
        """Names in a directory, sorted; [] when it does not exist or cannot be listed."""
        raise NotImplementedError

    def link_name(self, path: str) -> str | None:
        """Last component of a symlink's target (``.../driver -> ../amdgpu`` gives ``amdgpu``);
        None when ``path`` is not a link.  The target need not exist."""
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        raise NotImplementedError

    def nvml(self) -> dict:
        """NVML's answers as in capture.json ``nvml``."""
        raise NotImplementedError

    def vulkan_loader(self) -> bool:
        raise NotImplementedError

    def which(self, name: str) -> str | None:
        raise NotImplementedError

    def windows(self) -> dict:
        return {}

    def macos(self) -> dict:
        return {}

    def libc(self) -> dict:
        """The C library as in capture.json ``libc``: ``{"name": "glibc", "version": "2.39"}``;
        {} when unknown (musl, not Linux)."""
        return {}

    def dev_access(self, path: str) -> str | None:
        """Access of this process to a device node (capture.json ``dev``): ``"rw"``, ``"r"`` or
        ``"none"`` (exists, no access); None when it does not exist.  A host that cannot tell
        answers ``"rw"``: the node is usable when its sysfs device exists."""
        return "rw"

    def amdgpuinfo(self, nodes: list[str]) -> dict:
        """pyamdgpuinfo's answers for AMD render nodes, as in capture.json ``amdgpuinfo``:
        ``{"gpus": {"/dev/dri/renderD128": {"name": ..., "pci_slot": ..., "vram_size": ...,
        "gtt_size": ...} or {"error": "PermissionError"}}}``, or ``{"error": "<class>"}`` when
        the library cannot be used at all."""
        return {"error": "LibraryNotFound"}


# --------------------------------------------------------------------------------------------
# Live


class LiveHost(Host):
    description = "this machine"

    def __init__(self):
        if hasattr(os, "uname"):  # POSIX: no need to import platform (milliseconds at start-up)
            uname = os.uname()
            self.system = {"linux": "Linux", "darwin": "Darwin"}.get(uname.sysname.lower(), uname.sysname)
            self.machine, self.release = uname.machine, uname.release
        else:
            import platform

            uname = platform.uname()
            self.system, self.machine, self.release = uname.system, uname.machine, uname.release
        self.env = dict(os.environ)
        self._nvml = None

    def read(self, path):
        try:
            with open(path, "rb") as f:
                data = f.read(1 << 20)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except IsADirectoryError:
            return None
        except PermissionError:
            raise
        except OSError:
            # sysfs attributes can fail with EIO/ENODEV/EINVAL: treat as absent.
            return None
        return data.decode("utf-8", "replace")

    def listdir(self, path):
        try:
            return sorted(os.listdir(path))
        except OSError:
            return []

    def link_name(self, path):
        try:
            return os.path.basename(os.readlink(path).rstrip("/"))
        except OSError:
            return None

    def exists(self, path):
        return os.path.lexists(path)

    def which(self, name):
        if os.name == "nt":
            import shutil

            return shutil.which(name)
        for d in self.env.get("PATH", os.defpath).split(os.pathsep):
            path = os.path.join(d or ".", name)
            if os.access(path, os.X_OK) and not os.path.isdir(path):
                return path
        return None

    def library_known(self, soname: str) -> bool:
        """Could the dynamic loader find ``soname``?  Answers from the ld.so cache and
        LD_LIBRARY_PATH without loading anything (Linux); True elsewhere (then ask ctypes)."""
        if self.system != "Linux":
            return True
        for d in self.env.get("LD_LIBRARY_PATH", "").split(":"):
            if d and os.path.exists(os.path.join(d, soname)):
                return True
        try:
            with open("/etc/ld.so.cache", "rb") as f:
                return soname.encode() + b"\0" in f.read()
        except OSError:
            return True  # no cache to ask: let ctypes decide

    def load_library(self, *names: str) -> bool:
        candidates = [n for n in names if self.library_known(n)]
        if not candidates:
            return False
        import ctypes

        for lib in candidates:
            try:
                ctypes.CDLL(lib)
                return True
            except OSError:
                continue
        return False

    def vulkan_loader(self):
        names = {"Windows": ["vulkan-1.dll"], "Darwin": ["libvulkan.1.dylib", "libMoltenVK.dylib"]}
        return self.load_library(*names.get(self.system, ["libvulkan.so.1"]))

    def nvml(self):
        if self._nvml is None:
            from probes.nvml import query_live

            self._nvml = query_live(self)
        return self._nvml

    def libc(self):
        if self.system != "Linux":
            return {}
        try:
            text = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.39"; unset on musl
        except (AttributeError, ValueError, OSError):
            return {}
        parts = (text or "").split()
        if len(parts) == 2 and parts[0] == "glibc":
            return {"name": "glibc", "version": parts[1]}
        return {}

    def dev_access(self, path):
        if not os.path.exists(path):
            return None
        if os.access(path, os.R_OK | os.W_OK):
            return "rw"
        return "r" if os.access(path, os.R_OK) else "none"

    def amdgpuinfo(self, nodes):
        cache = self.__dict__.setdefault("_amdgpuinfo", {})
        todo = [n for n in nodes if n not in cache]
        if todo:
            try:  # imported only here: an AMD GPU is present (start-up of every other run pays nothing)
                import pyamdgpuinfo
            except Exception as e:  # ImportError, or its bundled libdrm failing to load
                return {"error": "LibraryNotFound" if isinstance(e, ImportError) else type(e).__name__}
            for i, node in enumerate(todo):
                try:
                    gpu = pyamdgpuinfo.GPUInfo(node, i)
                    mem = gpu.memory_info or {}
                    cache[node] = {"name": gpu.name, "pci_slot": gpu.pci_slot,
                                   "vram_size": mem.get("vram_size"), "gtt_size": mem.get("gtt_size")}
                except Exception as e:  # cannot open the node (permission), not amdgpu, ...
                    cache[node] = {"error": type(e).__name__}
        return {"gpus": {n: cache[n] for n in nodes}}

    def windows(self):
        if self.system != "Windows":
            return {}
        if getattr(self, "_windows", None) is None:  # read once: the probes and the capture see one answer
            from probes.windows import read_live

            self._windows = read_live()
        return self._windows

    def macos(self):
        if self.system != "Darwin":
            return {}
        if getattr(self, "_macos", None) is None:
            from probes.macos import read_live

            self._macos = read_live()
        return self._macos


# --------------------------------------------------------------------------------------------
# Capture


class EscapeError(Exception):
    """A capture path that would leave the capture."""


class LinkLoop(EscapeError):
    """A capture path whose lookup follows more links than the kernel would (ELOOP): a loop."""

    def __init__(self, path: str, link: str, limit: int):
        self.path, self.link = path, link
        super().__init__(f"{path}: more than {limit} symbolic links followed (a loop of links at {link})")


class CaptureHost(Host):
    """Answers from ``DIR/capture.json`` and ``DIR/fs``.  Links inside ``fs`` are followed only
    while they stay inside it; absolute links and ``..`` past the root are refused."""

    is_capture = True
    _MAX_LINKS = 40

    def __init__(self, root):
        self.root = os.path.abspath(str(root))
        self.fs = os.path.join(self.root, "fs")
        self.description = f"capture {root}"
        path = os.path.join(self.root, "capture.json")
        data = read_json(path, "no capture.json (is this a capture directory?)")
        if not isinstance(data, dict):
            raise InputError(path, "top level must be a JSON object")
        fmt = data.get("format")
        if fmt != CAPTURE_FORMAT:
            raise InputError(path, f"field 'format' must be {CAPTURE_FORMAT}, found {fmt!r}")
        plat = data.get("platform")
        if not isinstance(plat, dict) or not isinstance(plat.get("system"), str):
            raise InputError(path, "field 'platform' must be an object with a string 'system'")
        for key in ("machine", "release"):
            if key in plat and not isinstance(plat[key], str):
                raise InputError(path, f"field 'platform.{key}' must be a string")
        for key, kind in (("env", dict), ("nvml", dict), ("executables", dict), ("windows", dict), ("macos", dict),
                          ("libc", dict)):
            if key in data and not isinstance(data[key], kind):
                raise InputError(path, f"field '{key}' must be a JSON object")
        if "vulkan_loader" in data and not isinstance(data["vulkan_loader"], bool):
            raise InputError(path, "field 'vulkan_loader' must be true or false")
        dev = data.get("dev")
        if dev is not None:
            if not isinstance(dev, dict):
                raise InputError(path, "field 'dev' must be a JSON object")
            for node, access in dev.items():
                if access not in DEV_ACCESS:
                    raise InputError(path, f"field 'dev.{node}' must be one of \"rw\", \"r\", \"none\", found {access!r}")
        if "amdgpuinfo" in data and not isinstance(data["amdgpuinfo"], dict):
            raise InputError(path, "field 'amdgpuinfo' must be a JSON object")
        self.path = path
        self.data = data
        self.system = plat["system"]
        self.machine = plat.get("machine", "")
        self.release = plat.get("release", "")
        self.env = {str(k): str(v) for k, v in data.get("env", {}).items()}
        self._resolved: dict[tuple, tuple] = {}  # path components -> (what they resolve to, links followed)

    # -- path resolution -------------------------------------------------------------------

    def _resolve(self, path: str, follow_last: bool = True) -> str:
        """Map an absolute path of the captured machine to a path under ``fs``, following links
        inside the capture.  Raises EscapeError for anything that would leave it, and LinkLoop
        (an EscapeError) when one lookup would follow more than ``_MAX_LINKS`` links, as the
        kernel's ELOOP does: a loop of links ends there, whatever its length.

        One walk, no recursion: a link's target is pushed onto the components still to walk,
        below it a marker that, once the target is walked, caches what the link resolved to and
        how many links that took (a cached link costs its hops again, so the limit does not depend
        on what an earlier lookup left in the cache)."""
        parts = [p for p in path.split("/") if p not in ("", ".")]
        cur: list[str] = []
        todo: list = list(reversed(parts))  # components still to walk, next last; a tuple marks a link's end
        hops = 0
        while todo:
            comp = todo.pop()
            if comp.__class__ is tuple:  # (link, hops before it): its target is walked
                self._resolved[comp[0]] = (tuple(cur), hops - comp[1])
                continue
            if comp == "..":
                if not cur:
                    raise EscapeError(path)
                cur.pop()
                continue
            nxt = cur + [comp]
            if not todo and not follow_last:
                cur = nxt
                break
            key = tuple(nxt)
            hit = self._resolved.get(key)
            if hit is not None:
                if hit[1]:
                    hops += hit[1]
                    if hops > self._MAX_LINKS:
                        raise LinkLoop(path, "/" + "/".join(nxt), self._MAX_LINKS)
                cur = list(hit[0])
                continue
            real = os.path.join(self.fs, *nxt)
            try:
                st = os.lstat(real)
            except OSError:
                cur = nxt  # does not exist: later components cannot exist either
                self._resolved[key] = (key, 0)
                continue
            if stat.S_ISLNK(st.st_mode):
                if hops >= self._MAX_LINKS:
                    raise LinkLoop(path, "/" + "/".join(nxt), self._MAX_LINKS)
                target = os.readlink(real)
                if target.startswith("/") or (len(target) > 1 and target[1] == ":"):
                    raise EscapeError(path)
                # walk the target from the link's directory (cur), then record where the link led
                todo.append((key, hops))
                hops += 1
                todo.extend(reversed([p for p in target.split("/") if p not in ("", ".")]))
            else:
                self._resolved[key] = (key, 0)
                cur = nxt
        return os.path.join(self.fs, *cur)

    def _real(self, path: str, follow_last: bool = True) -> str | None:
        try:
            return self._resolve(path, follow_last)
        except EscapeError:  # out of the capture, or a loop of links: not a file of the machine
            return None

    # -- Host API ----------------------------------------------------------------------------

    def read(self, path):
        real = self._real(path)
        if real is None:
            return None
        try:
            with open_regular(real) as f:  # a FIFO or device in a capture is no file of the machine
                data = f.read(1 << 20)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except PermissionError:
            raise
        except OSError:
            return None
        return data.decode("utf-8", "replace")

    def listdir(self, path):
        real = self._real(path)
        if real is None:
            return []
        try:
            return sorted(os.listdir(real))
        except OSError:
            return []

    def link_name(self, path):
        real = self._real(path, follow_last=False)
        if real is None:
            return None
        try:
            return os.path.basename(os.readlink(real).rstrip("/"))
        except OSError:
            return None

    def exists(self, path):
        real = self._real(path, follow_last=False)
        return real is not None and os.path.lexists(real)

    def nvml(self):
        nv = self.data.get("nvml")
        if nv is None:
            return {"error": "LibraryNotFound"}
        return nv

    def vulkan_loader(self):
        return bool(self.data.get("vulkan_loader", False))

    def which(self, name):
        exe = self.data.get("executables", {}).get(name)
        return exe if isinstance(exe, str) and exe else None

    def windows(self):
        return self.data.get("windows", {})

    def macos(self):
        return self.data.get("macos", {})

    def libc(self):
        return self.data.get("libc", {})

    def dev_access(self, path):
        dev = self.data.get("dev")
        if dev is None:  # a capture from before 'dev': nodes are usable where their device is
            return "rw"
        return dev.get(path)

    def amdgpuinfo(self, nodes):
        return self.data.get("amdgpuinfo", {"error": "LibraryNotFound"})


# --------------------------------------------------------------------------------------------
# Recording (for `capture`)


class RecordingHost(Host):
    """Wraps a live host and remembers every path the probes touched."""

    def __init__(self, inner: LiveHost):
        self.inner = inner
        self.system, self.machine, self.release = inner.system, inner.machine, inner.release
        self.env = inner.env
        self.files: list[str] = []
        self.dirs: list[str] = []
        self.links: list[str] = []
        self.execs: dict[str, str] = {}
        self.dev: dict[str, str] = {}
        self.amdgpu: dict = {}

    def read(self, path):
        self.files.append(path)
        return self.inner.read(path)

    def listdir(self, path):
        self.dirs.append(path)
        return self.inner.listdir(path)

    def link_name(self, path):
        self.links.append(path)
        return self.inner.link_name(path)

    def exists(self, path):
        self.files.append(path)
        return self.inner.exists(path)

    def nvml(self):
        return self.inner.nvml()

    def vulkan_loader(self):
        return self.inner.vulkan_loader()

    def which(self, name):
        found = self.inner.which(name)
        if found:
            self.execs[name] = found
        return found

    def windows(self):
        return self.inner.windows()

    def macos(self):
        return self.inner.macos()

    def libc(self):
        return self.inner.libc()

    def dev_access(self, path):
        access = self.inner.dev_access(path)
        if access is not None:
            self.dev[path] = access
        return access

    def amdgpuinfo(self, nodes):
        answer = self.inner.amdgpuinfo(nodes)
        if "gpus" in answer:
            self.amdgpu.setdefault("gpus", {}).update(answer["gpus"])
        elif "gpus" not in self.amdgpu:
            self.amdgpu = dict(answer)
        return answer


def open_host(root=None) -> Host:
    """The host for ``--root DIR`` (a capture) or this machine."""
    if root:
        return CaptureHost(root)
    return LiveHost()
