"""A terminal 60 columns wide: nothing cut, nothing wrapped mid-word, no line of a lone separator,
and command lines that stay one line (to be copied whole)."""

from __future__ import annotations

import os
import sys


from conftest import machine, run_tty

STRIX = machine("linux-ubuntu24.04-strix-halo")


def on_terminal(*args, columns=60):
    """The lines a person at a ``columns``-wide terminal sees (conftest.run_tty)."""
    return run_tty(*args, columns=columns).out.splitlines()


def test_the_header_breaks_between_parts_not_before_a_lone_separator():
    lines = on_terminal("--root", STRIX, "llamacpp")
    assert all(x.strip() != "·" for x in lines)
    head = [x for x in lines[:3] if "·" in x]
    assert head and all(len(x) <= 60 for x in head)


def test_probe_on_a_narrow_terminal_cuts_no_value():
    lines = on_terminal("--root", STRIX, "probe")
    text = "\n".join(lines)
    assert "…" not in text
    for whole in ("AMD Radeon 8060S/8050S/8040S", "0.5 GiB VRAM + 63.2 GiB GTT", "/dev/accel/accel0", "integrated"):
        assert whole in text


def test_probe_on_a_wide_terminal_is_a_table():
    lines = on_terminal("--root", STRIX, "probe", columns=160)
    assert any(x.startswith("#") and "memory" in x for x in lines)


def test_plans_run_line_is_one_line_at_60_columns(tmp_path):
    sys.path.insert(0, os.path.dirname(__file__))
    import gguf_models as gm

    m = gm.write(str(tmp_path / "m.gguf"), "qwen3-4b")
    lines = on_terminal("plan", "llamacpp", "--model", m, "--root", STRIX, "--cache-dir", str(tmp_path / "c"))
    run = [x for x in lines if "llama-server" in x]
    assert run and "--flash-attn on" in run[0] and run[0].strip().startswith("llama-server -m ")


def test_a_progress_bar_at_60_columns_cuts_no_figure(monkeypatch):
    from rich.console import Console

    from selector import term

    con = Console(width=60, force_terminal=True, record=True, color_system=None)
    monkeypatch.setattr(term, "console", lambda stderr=False: con)
    with term.Progress(enabled=True) as p:
        p.new("llama-b10375-bin-ubuntu-vulkan-x64.tar.gz")
        p.start(300 << 20, 0)
        p.advance(100 << 20)
    text = con.export_text()
    assert "…" not in text
    assert "llama-b10375-bin-ubuntu-vulkan-x64.tar.gz" in text and "/314.6 MB" in text
