"""A lean stand-in for ``@dataclass`` on the start-up path.

``dataclasses`` generates and ``exec``s source for every class (about half a millisecond each, and
``import dataclasses`` pulls in ``inspect``); the Profile, catalog and engine types are defined on
every run, so that cost lands on every ``pick-backend`` call.  ``Record`` reads the annotations
once, in ``__init_subclass__``, and shares one generic ``__init__``: same keyword/positional
construction, defaults, ``field(default_factory=...)``, ``__eq__`` and ``__repr__``.
"""

from __future__ import annotations

_MISSING = object()


class _Factory:
    __slots__ = ("factory",)

    def __init__(self, factory):
        self.factory = factory


def field(*, default=_MISSING, default_factory=None, **_ignored):
    """``dataclasses.field`` subset: a default or a factory for mutable defaults."""
    if default_factory is not None:
        return _Factory(default_factory)
    return default


class Record:
    _fields: tuple = ()
    _defaults: dict = {}
    _types: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__annotations__", {})
        fields = [f for f in getattr(cls, "_fields", ()) if f not in own] + list(own)
        defaults = dict(getattr(cls, "_defaults", {}))
        types = dict(getattr(cls, "_types", {}))
        for name in own:
            types[name] = own[name]
            value = cls.__dict__.get(name, _MISSING)
            if value is not _MISSING:
                defaults[name] = value
                if isinstance(value, _Factory):
                    delattr(cls, name)  # never share a mutable default through the class
        cls._fields = tuple(fields)
        cls._defaults = defaults
        cls._types = types

    def __init__(self, *args, **kwargs):
        fields = self._fields
        d = self.__dict__
        if args:
            if len(args) > len(fields):
                raise TypeError(f"{type(self).__name__}() takes {len(fields)} arguments, got {len(args)}")
            d.update(zip(fields, args))
            if kwargs and not kwargs.keys().isdisjoint(d):
                raise TypeError(f"{type(self).__name__}() got multiple values for an argument")
        if kwargs:
            d.update(kwargs)
        if len(d) != len(fields):
            for name, value in self._defaults.items():
                if name not in d:
                    d[name] = value.factory() if isinstance(value, _Factory) else value
            if len(d) != len(fields):
                missing = [f for f in fields if f not in d]
                if missing:
                    raise TypeError(f"{type(self).__name__}() missing required argument: '{missing[0]}'")
                extra = [k for k in d if k not in self._types]
                raise TypeError(f"{type(self).__name__}() got unexpected arguments: {', '.join(extra)}")

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._fields)

    __hash__ = None

    def __repr__(self):
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({inner})"


class FrozenRecord(Record):
    """Hashable by value; fields are not meant to change after construction."""

    def __hash__(self):
        return hash(tuple(_hashable(getattr(self, f)) for f in self._fields))


def _hashable(v):
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    return v


def as_dict(obj):
    """``dataclasses.asdict`` for Records: nested Records, lists and dicts become plain data."""
    if isinstance(obj, Record):
        return {f: as_dict(getattr(obj, f)) for f in obj._fields}
    if isinstance(obj, list):
        return [as_dict(x) for x in obj]
    if isinstance(obj, tuple):
        return [as_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {k: as_dict(v) for k, v in obj.items()}
    return obj
