"""Which file a model name means, and its facts (read once, then kept in the cache).

A model is named four ways:
- a Lemonade model name (``Qwen3-8B-GGUF``; catalogs/lemonade-models.json);
- a checkpoint as Lemonade writes it: ``org/repo:FILE.gguf``, ``org/repo:QUANT`` (the repo's GGUF
  whose name carries QUANT), or ``org/repo`` with one GGUF;
- an http(s) URL of a GGUF;
- a local path.
Hugging Face is ``HF_ENDPOINT`` (default https://huggingface.co, as huggingface_hub reads it); a
token in ``HF_TOKEN`` goes to that origin only.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from urllib.parse import quote, urlsplit

from selector.models.gguf_header import ModelError, split_names

HF = "https://huggingface.co"


@lru_cache(maxsize=None)
def catalog() -> dict:
    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "catalogs", "lemonade-models.json"),
              encoding="utf-8") as f:
        return json.load(f)


def lemonade_model(name: str) -> tuple[str, dict] | None:
    models = catalog()["models"]
    if name in models:
        return name, models[name]
    low = name.lower()
    return next(((n, m) for n, m in models.items() if n.lower() == low), None)


def endpoint(env=None) -> str:
    env = os.environ if env is None else env
    return (env.get("HF_ENDPOINT") or HF).rstrip("/")


def hf_headers(url: str, env=None) -> dict:
    env = os.environ if env is None else env
    token = env.get("HF_TOKEN")
    ep = urlsplit(endpoint(env))
    u = urlsplit(url)
    return {"Authorization": f"Bearer {token}"} if token and (u.scheme, u.netloc) == (ep.scheme, ep.netloc) else {}


class SpecError(ModelError):
    """A model named in a way that names nothing (a URL that does not parse): a usage error."""


def _url(spec: str):
    try:
        u = urlsplit(spec)
        u.port  # noqa: B018 - a port that is not a number raises here
    except ValueError as e:
        raise SpecError(f"--model {spec!r} is not a URL ({e})") from None
    if not u.hostname:
        raise SpecError(f"--model {spec!r} is not a URL (no host)")
    return u


class Model:
    """What a name resolved to: ``files`` (paths or URLs, split parts in order), where the name came
    from, and the Lemonade entry when there is one."""

    def __init__(self, spec: str, files: list[str], name: str | None = None, entry: dict | None = None,
                 checkpoint: str | None = None):
        self.spec, self.files, self.name, self.entry, self.checkpoint = spec, files, name, entry, checkpoint

    @property
    def key(self) -> str:
        return self.files[0]

    @property
    def label(self) -> str:
        return self.name or self.checkpoint or os.path.basename(self.files[0].rstrip("/"))


def resolve(spec: str, session=None, limits=None, env=None) -> Model:
    """A model name to its files.  Lists a Hugging Face repo (one API call) only for ``org/repo`` and
    ``org/repo:QUANT``."""
    if spec.startswith(("http://", "https://")):
        return Model(spec, (None if _url(spec).query else split_names(spec)) or [spec])
    if os.path.exists(spec) or spec.startswith((".", "/", "~")) or (spec.endswith(".gguf") and ":" not in spec):
        path = os.path.abspath(os.path.expanduser(spec))
        return Model(spec, split_names(path) or [path])
    found = lemonade_model(spec)
    if found is not None:
        name, entry = found
        m = resolve_checkpoint(entry["checkpoint"], session, limits, env)
        m.spec, m.name, m.entry = spec, name, entry
        return m
    if "/" in spec and not spec.startswith((".", "/")):
        return resolve_checkpoint(spec, session, limits, env)
    raise ModelError(f"'{spec}' is not a Lemonade model, a path, a URL or org/repo[:QUANT]; "
                     "`pick-backend models RECIPE` lists Lemonade's models")


def resolve_checkpoint(checkpoint: str, session=None, limits=None, env=None) -> Model:
    repo, _, variant = checkpoint.partition(":")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise ModelError(f"checkpoint '{checkpoint}': a Hugging Face repo is org/name")
    ep = endpoint(env)

    def url(file):
        return f"{ep}/{repo}/resolve/main/{quote(file)}"

    local = _local_ggufs(repo, env)
    if "." in variant:  # a file name (FILE.gguf, ggml-tiny.bin), not a quantization
        names = [n.rsplit("/", 1)[-1] for n in (split_names(variant) or [variant])]
        if local is not None:  # downloaded before: the file, and every part of a split one, from the cache
            snap, files = local
            by_name = {f.rsplit("/", 1)[-1]: f for f in files}
            if all(n in by_name for n in names):
                return Model(checkpoint, [os.path.join(snap, *by_name[n].split("/")) for n in names],
                             checkpoint=checkpoint)
        return Model(checkpoint, split_names(url(variant)) or [url(variant)], checkpoint=checkpoint)
    if local is not None:  # downloaded before (by Lemonade or huggingface_hub): no network needed
        snap, files = local
        try:
            picked = _pick_variant(files, variant, checkpoint)
        except ModelError:
            picked = None
        if picked:
            return Model(checkpoint, [os.path.join(snap, *f.split("/")) for f in picked], checkpoint=checkpoint)
    files = _repo_ggufs(repo, session, limits, env)
    picked = _pick_variant(files, variant, checkpoint)
    return Model(checkpoint, [url(f) for f in picked], checkpoint=checkpoint)


def _local_ggufs(repo: str, env=None) -> tuple[str, list[str]] | None:
    """(snapshot directory, GGUF paths in it) of the repo's newest snapshot in the hub cache."""
    org, name = repo.split("/")
    snaps = os.path.join(hf_cache_dir(env), f"models--{org}--{name}", "snapshots")
    try:
        dirs = sorted((os.path.join(snaps, d) for d in os.listdir(snaps)), key=os.path.getmtime, reverse=True)
    except OSError:
        return None
    for snap in dirs:
        found = []
        for dirpath, _dirs, files in os.walk(snap):
            found += [os.path.relpath(os.path.join(dirpath, f), snap).replace(os.sep, "/")
                      for f in files if f.lower().endswith(".gguf")]
        if found:
            return snap, sorted(found)
    return None


def _repo_ggufs(repo: str, session, limits, env) -> list[str]:
    from selector.install.download import DownloadError, Limits, get_json

    if session is None:
        import requests

        session = requests.Session()
    api = f"{endpoint(env)}/api/models/{repo}/tree/main?recursive=true"
    try:
        listing = get_json(session, api, f"the file list of {repo}", limits=limits or Limits.from_env(deadline=120.0),
                           headers_for=lambda u: hf_headers(u, env), mirror_env="HF_ENDPOINT")
    except DownloadError as e:
        raise ModelError(str(e)) from None
    if not isinstance(listing, list):
        raise ModelError(f"{api}: not a file list")
    return [e["path"] for e in listing if isinstance(e, dict) and isinstance(e.get("path"), str)
            and e["path"].lower().endswith(".gguf")]


def _pick_variant(files: list[str], variant: str, checkpoint: str) -> list[str]:
    """The GGUF (all its split parts) of a repo that ``variant`` names, as Lemonade picks it: the file
    (or folder) whose name holds the quantization, mmproj files aside."""
    weights = [f for f in files if "mmproj" not in f.lower()]
    if variant and variant != "*":
        low = variant.lower()
        weights = [f for f in weights if low in f.lower()]
    if not weights:
        raise ModelError(f"checkpoint '{checkpoint}': the repo has no GGUF "
                         + (f"matching '{variant}'" if variant else "of weights"))
    firsts = sorted({f for f in weights if split_names(f) is None or f.endswith(f"-00001-of-{f[-10:-5]}.gguf")})
    if len(firsts) > 1:
        exact = [f for f in firsts if os.path.basename(f).lower().rsplit(".", 1)[0].endswith(variant.lower())] \
            if variant else []
        if len(exact) != 1:
            shown = ", ".join(os.path.basename(f) for f in firsts[:6])
            raise ModelError(f"checkpoint '{checkpoint}' matches {len(firsts)} files ({shown}); name one as "
                             f"{checkpoint.split(':')[0]}:FILE.gguf")
        firsts = exact
    return split_names(firsts[0]) or firsts


def facts(model: Model, cache: str | None, session=None, limits=None, env=None, refresh: bool = False,
          read_allowed: bool = True) -> dict | None:
    """The model's facts: from the cache when read before (same files), else from its header(s)."""
    from selector import store
    from selector.models import facts as F
    from selector.models import gguf_header

    rec = store.path(cache, "models", model.key) if cache else None
    ident = _identity(model.files)
    if rec and not refresh:
        old = store.read(rec)
        if old and old.get("files") == model.files and old.get("identity") == ident and isinstance(old.get("facts"), dict) \
                and old["facts"].get("version") == F.VERSION:
            return old["facts"]
    if not read_allowed:
        return None
    headers = [gguf_header.read(f, session, limits, hf_headers(f, env)) for f in model.files]
    try:
        out = F.from_headers(model.label, headers)
    except F.FactsError as e:
        raise ModelError(str(e)) from None
    if rec:
        try:
            store.write(rec, {"files": model.files, "identity": ident, "facts": out})
        except OSError:
            pass  # a read-only cache: the facts are still good for this run
    return out


def _identity(files: list[str]) -> list:
    """What makes cached facts stale: a local file's size and modification time (a file replaced,
    changed or gone is read again); a URL is its own identity."""
    out = []
    for f in files:
        if f.startswith(("http://", "https://")):
            out.append(f)
            continue
        try:
            st = os.stat(f)
        except OSError:
            raise ModelError(f"{f}: no such file") from None
        out.append([st.st_size, st.st_mtime_ns])
    return out


def hf_cache_dir(env=None) -> str:
    """Where huggingface_hub (and so Lemonade) keeps downloads: HF_HUB_CACHE, else HF_HOME/hub,
    else ~/.cache/huggingface/hub."""
    env = os.environ if env is None else env
    if env.get("HF_HUB_CACHE"):
        return env["HF_HUB_CACHE"]
    home = env.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return os.path.join(home, "hub")


def hf_cached(url: str, env=None) -> str | None:
    """The local copy of a Hugging Face ``resolve`` URL in the hub cache, or None."""
    path = urlsplit(url).path.lstrip("/")
    parts = path.split("/")
    if len(parts) < 5 or parts[2] != "resolve":
        return None
    from urllib.parse import unquote

    org, repo, file = parts[0], parts[1], unquote("/".join(parts[4:]))
    snaps = os.path.join(hf_cache_dir(env), f"models--{org}--{repo}", "snapshots")
    try:
        names = sorted(os.listdir(snaps))
    except OSError:
        return None
    for snap in names:
        p = os.path.join(snaps, snap, *file.split("/"))
        if os.path.isfile(p):
            return p
    return None


def cached_model(cache: str, entry: dict):
    """The model as an earlier read resolved it (its files are in the cached record), or None."""
    from selector import store

    idx = store.read(store.path(cache, "models", "checkpoint:" + entry["checkpoint"]))
    files = idx.get("files") if idx else None
    if isinstance(files, list) and files and all(isinstance(f, str) for f in files):
        return Model(entry["checkpoint"], files, None, entry, entry["checkpoint"])
    return None


def remember_checkpoint(cache: str, model) -> None:
    from selector import store

    if model.checkpoint:
        try:
            store.write(store.path(cache, "models", "checkpoint:" + model.checkpoint), {"files": model.files})
        except OSError:
            pass


GGML_MAGIC = b"lmgg"  # whisper.cpp's model files: the uint32 0x67676d6c ("ggml") little-endian (whisper.cpp models/README)


def _head(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(4)
    except OSError as e:
        raise ModelError(f"{path}: cannot be read ({e.strerror})") from None


def is_gguf(model: Model) -> bool:
    first = model.files[0]
    if first.startswith(("http://", "https://")):
        return urlsplit(first).path.lower().endswith(".gguf")
    return _head(first) == b"GGUF"


def check_kind(recipe: str, model: Model, cache: str | None) -> None:
    """Refuse (SpecError: a usage error) a file that is not a model of ``recipe``'s kind, naming what
    it is: whisper.cpp reads a ggml .bin (ggml-base.bin, as Lemonade lists them); an engine none of
    whose Lemonade models is a chat model (whisper.cpp, sd.cpp, Kokoro) takes no GGUF language model.
    A model of Lemonade's list was checked by its recipe."""
    if model.entry is not None:
        return
    first = model.files[0]
    name = first.rsplit("/", 1)[-1]
    lists = [e["labels"] for e in catalog()["models"].values() if e["recipe"] == recipe]
    chat = not lists or any("chat" in labels for labels in lists)  # an engine Lemonade lists chat models for
    if not chat and is_gguf(model):
        try:
            f = facts(model, cache)
        except ModelError:
            f = None  # a GGUF that is not a language model: a diffusion model's, for one
        if f is not None:
            raise SpecError(f"{name} is a GGUF language model ({f['arch']}, {f['n_layer']} layers) for llama.cpp, "
                            f"not a {recipe} model; `pick-backend plan llamacpp --model {model.spec}` plans it")
    if recipe == "whispercpp":
        local = not first.startswith(("http://", "https://"))
        if not name.lower().endswith(".bin") or (local and _head(first) != GGML_MAGIC):
            raise SpecError(f"{name} is not a ggml .bin, the model file whisper.cpp reads (as Lemonade lists them: "
                            "ggml-base.bin; `pick-backend models whispercpp`)")
