"""Typed, forgiving reads of the ``windows`` / ``macos`` answers (capture.json or the live readers).

Those answers are data from outside: a value of the wrong type is reported once as a warning that
names its place (``windows.display_adapters.0000.DriverDesc``) and is then treated as absent, so a
garbage capture never becomes a traceback.
"""

from __future__ import annotations

_KINDS = {"str": str, "int": int, "dict": dict, "list": list}


def section(host, name: str, profile, probe: str) -> "Section":
    """The host's ``name`` answer (``windows`` or ``macos``) as a Section for one probe.  The live
    host reads the registry / sysctl once and keeps the answer (LiveHost.windows), so every probe
    shares one answer."""
    return Section(getattr(host, name)(), name, profile, probe)


class Section:
    def __init__(self, data, name: str, profile, probe: str):
        self.data = data if isinstance(data, dict) else {}
        self.name = name
        self.profile = profile
        self.probe = probe

    def at(self, *path):
        """The value at ``path`` (keys of nested objects); None when any step is missing or not an
        object."""
        cur = self.data
        for i, key in enumerate(path):
            if not isinstance(cur, dict):
                self._bad(path[:i], cur, "an object")
                return None
            cur = cur.get(key)
            if cur is None:
                return None
        return cur

    def get(self, kind: str, *path):
        """Like ``at`` but the value must be of ``kind`` (str, int, dict, list); else a warning and
        None.  Booleans are not ints; ints are never negative here."""
        value = self.at(*path)
        if value is None:
            return None
        if kind == "int":
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        else:
            ok = isinstance(value, _KINDS[kind])
        if not ok:
            self._bad(path, value, {"int": "a non-negative integer", "str": "a string", "dict": "an object",
                                    "list": "a list"}[kind])
            return None
        return value

    def _bad(self, path, value, want: str) -> None:
        where = ".".join([self.name, *map(str, path)])
        if isinstance(value, (dict, list)):
            found = type(value).__name__
        else:
            text = repr(value)
            found = f"{text if len(text) <= 40 else text[:37] + '...'} ({type(value).__name__})"
        message = f"{where} is {found}, expected {want}; ignored"
        if any(w.message == message for w in self.profile.warnings):
            return  # several probes read the same field: say it once
        self.profile.warn(self.probe, message)
