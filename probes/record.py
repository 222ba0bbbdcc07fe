"""A lean stand-in for ``@dataclass`` on the start-up path.

``dataclasses`` generates and ``exec``s source for every class (about half a millisecond each, and
``import dataclasses`` pulls in ``inspect``); the Profile, catalog and engine types are defined on
every run, so that cost lands on every ``pick-backend`` call.  ``Record`` reads the annotations
once, in ``__init_subclass__``, and shares one generic ``__init__``: same keyword/positional
construction, defaults, ``field(default_factory=..., compare=False)``, ``__eq__`` and ``__repr__``.
"""

from __future__ import annotations

_MISSING = object()


class _Factory:
    __slots__ = ("factory",)

    def __init__(self, factory):
        self.factory = factory


class _Field:
    """A ``field()`` with options beyond its default: read once by ``Record.__init_subclass__``."""

    __slots__ = ("default", "compare", "hash")

    def __init__(self, default, compare, hash):
        self.default, self.compare, self.hash = default, compare, hash


def field(*, default=_MISSING, default_factory=None, compare=True, hash=None, **unknown):
    """``dataclasses.field`` subset: a default or a factory for mutable defaults, and ``compare``
    / ``hash`` (a field with ``compare=False`` is left out of ``__eq__`` and, unless ``hash=True``,
    out of FrozenRecord's ``__hash__``, as in dataclasses).  Any other option is refused: silently
    dropping one would make a Record behave unlike the dataclass it reads as."""
    if unknown:
        raise TypeError(f"field() does not implement {', '.join(sorted(unknown))} (Record: default, "
                        "default_factory, compare, hash)")
    if default is not _MISSING and default_factory is not None:
        raise ValueError("field() cannot take both default and default_factory")
    value = _Factory(default_factory) if default_factory is not None else default
    if compare and hash is None:
        return value
    return _Field(value, bool(compare), compare if hash is None else bool(hash))


class Record:
    _fields: tuple = ()
    _defaults: dict = {}
    _types: dict = {}
    _compared: tuple = ()  # the fields __eq__ compares, in order
    _hashed: tuple = ()  # the fields FrozenRecord's __hash__ hashes

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__annotations__", {})
        fields = [f for f in getattr(cls, "_fields", ()) if f not in own] + list(own)
        defaults = dict(getattr(cls, "_defaults", {}))
        types = dict(getattr(cls, "_types", {}))
        compared, hashed = set(getattr(cls, "_compared", ())), set(getattr(cls, "_hashed", ()))
        for name in own:
            types[name] = own[name]
            value = cls.__dict__.get(name, _MISSING)
            compare = hash_ = True
            if isinstance(value, _Field):
                compare, hash_, value = value.compare, value.hash, value.default
                if value is _MISSING:
                    delattr(cls, name)  # a required field: no class attribute, as in dataclasses
                else:
                    setattr(cls, name, value)
            (compared.add if compare else compared.discard)(name)
            (hashed.add if hash_ else hashed.discard)(name)
            if value is not _MISSING:
                defaults[name] = value
                if isinstance(value, _Factory):
                    delattr(cls, name)  # never share a mutable default through the class
        cls._fields = tuple(fields)
        cls._defaults = defaults
        cls._types = types
        cls._compared = tuple(f for f in fields if f in compared)
        cls._hashed = tuple(f for f in fields if f in hashed)

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
        return all(getattr(self, f) == getattr(other, f) for f in self._compared)

    __hash__ = None

    def __repr__(self):
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({inner})"


class FrozenRecord(Record):
    """Hashable by value; fields are not meant to change after construction."""

    def __hash__(self):
        return hash(tuple(_hashable(getattr(self, f)) for f in self._hashed))


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
