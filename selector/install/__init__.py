"""Installing backends into the cache Lemonade shares (docs/DESIGN.md, "Install cache")."""


def env_number(env, name: str, default, cast=float):
    """A positive number from the environment variable ``name`` (``default`` when unset or empty);
    anything else is bad input (exit 5) naming the variable."""
    v = env.get(name)
    if v in (None, ""):
        return default
    try:
        n = cast(v)
        if not n > 0 or n == float("inf"):  # nan and inf too: a deadline of nan never passes
            raise ValueError
        return n
    except ValueError:
        from probes.inputs import InputError

        what = "a positive whole number" if cast is int else "a positive number"
        raise InputError(name, f"must be {what}, not {v!r}") from None
