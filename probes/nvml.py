"""Ask NVML (through nvidia-ml-py's ``pynvml``) on the live machine, in the shape capture.json
records.  pynvml is imported only when an NVIDIA driver or device can be there."""

from __future__ import annotations

import os


def _nvidia_possible(host) -> bool:
    if host.system == "Darwin":
        return False  # no NVML on macOS (CUDA for macOS ended with 10.2): skip pynvml's import
    if host.system != "Linux":
        return True
    if os.path.exists("/proc/driver/nvidia") or os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/dxg"):
        return True
    from probes.linux import pci

    return any(d.vendor == "0x10de" for d in pci.scan(host))


def query_live(host, timeout: float = 5.0) -> dict:
    if not _nvidia_possible(host):
        # No device, no kernel module: say whether the user-space library is there without
        # paying for pynvml's import.
        if not host.load_library("libnvidia-ml.so.1"):
            return {"error": "LibraryNotFound"}
        return {"error": "DriverNotLoaded"}
    import threading

    box: dict = {}

    def run():
        try:
            box["value"] = _query()
        except Exception as e:  # anything NVML throws becomes data
            box["value"] = {"error": _error_name(e)}

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    return box.get("value", {"error": "Timeout"})


def _error_name(e: Exception) -> str:
    name = type(e).__name__
    if name.startswith("NVMLError_"):
        return name[len("NVMLError_"):]
    if name == "NVMLError":
        return "Unknown"
    return name


def _query() -> dict:
    import pynvml as N

    N.nvmlInit()
    try:
        out = {"driver_version": N.nvmlSystemGetDriverVersion()}
        try:
            out["cuda_driver_version"] = N.nvmlSystemGetCudaDriverVersion_v2()
        except N.NVMLError:
            pass
        gpus = []
        for i in range(N.nvmlDeviceGetCount()):
            h = N.nvmlDeviceGetHandleByIndex(i)
            g = {"name": N.nvmlDeviceGetName(h)}
            try:
                g["compute_capability"] = list(N.nvmlDeviceGetCudaComputeCapability(h))
            except N.NVMLError:
                g["compute_capability"] = None
            try:
                info = N.nvmlDeviceGetMemoryInfo(h)
                g["memory_total"], g["memory_free"] = int(info.total), int(info.free)
            except N.NVMLError:
                g["memory_total"] = None  # GB10: NotSupported
            try:
                g["pci_bus_id"] = N.nvmlDeviceGetPciInfo(h).busId
                if isinstance(g["pci_bus_id"], bytes):
                    g["pci_bus_id"] = g["pci_bus_id"].decode()
            except N.NVMLError:
                pass
            try:
                g["uuid"] = N.nvmlDeviceGetUUID(h)
            except N.NVMLError:
                pass
            gpus.append(g)
        out["gpus"] = gpus
        return out
    finally:
        try:
            N.nvmlShutdown()
        except Exception:
            pass


def process_memory(pid: int) -> dict:
    """{PCI bus id (0000:00:06.0): bytes} that NVIDIA's driver says process ``pid`` holds on each GPU;
    {} where NVML is not there or cannot say (a container's PID namespace, a driver that hides it)."""
    try:
        import pynvml as N

        N.nvmlInit()
    except Exception:  # no library, no driver: nothing to say
        return {}
    try:
        out = {}
        for i in range(N.nvmlDeviceGetCount()):
            h = N.nvmlDeviceGetHandleByIndex(i)
            bus = N.nvmlDeviceGetPciInfo(h).busId
            bus = bus.decode() if isinstance(bus, bytes) else bus
            for p in N.nvmlDeviceGetComputeRunningProcesses(h):
                if p.pid == pid and isinstance(p.usedGpuMemory, int):
                    out[bus.lower()[-12:]] = p.usedGpuMemory
        return out
    except Exception:  # anything NVML throws: the driver did not say
        return {}
    finally:
        try:
            N.nvmlShutdown()
        except Exception:
            pass
