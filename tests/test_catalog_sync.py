"""tools/sync_catalog.py: the bundled catalogs are what their committed upstream sources plus the
hand-kept overlays say, and an upstream change is reported row by row."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import sync_catalog  # noqa: E402

LEMONADE_SRC = os.path.join(ROOT, "catalogs-src", "lemonade", "backends-reference.md")
CATALOG = os.path.join(ROOT, "selector", "catalogs", "lemonade.json")


def run(*args):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "sync_catalog.py"), *args],
                       capture_output=True, text=True, cwd=ROOT)
    return r.returncode, r.stdout, r.stderr


def test_the_committed_catalog_is_its_source_plus_its_overlay():
    with open(CATALOG, encoding="utf-8") as f:
        text = f.read()
    rebuilt, left = sync_catalog.regenerate("lemonade", LEMONADE_SRC)
    assert left == []
    assert rebuilt == json.loads(text)
    assert sync_catalog.dump(rebuilt) == text  # byte for byte: --write makes no diff


def test_sync_on_the_committed_source_reports_no_change():
    code, out, err = run("lemonade", LEMONADE_SRC)
    assert code == 0, err
    assert out.strip() == "lemonade: no change"


def _edited(tmp_path, edit, source=LEMONADE_SRC):
    """A copy of a committed source, changed by ``edit`` (text -> text)."""
    with open(source, encoding="utf-8") as f:
        text = f.read()
    path = tmp_path / os.path.basename(source)
    path.write_text(edit(text), encoding="utf-8")
    return str(path)


def test_one_row_removed_one_added_one_gfx_list_widened_are_exactly_the_change(tmp_path):
    def edit(text):
        # remove sd-cpp's cpu row, add a kokoro vulkan row, widen whispercpp rocm by gfx1152
        # (lemonade-sdk/lemonade#2461 did that upstream)
        row = "| `sd-cpp` | cpu | core | native | linux, windows | cpu (x86_64) |\n"
        assert row in text
        text = text.replace(row, "")
        text = text.replace("| `kokoro` | metal | core | native | macos | metal |\n",
                            "| `kokoro` | metal | core | native | macos | metal |\n"
                            "| `kokoro` | vulkan | experimental | native | linux | amd_gpu |\n")
        old = "| `whispercpp` | rocm | core | native | linux, windows | amd_gpu (gfx110X, gfx1150, gfx1151, gfx120X) |"
        assert old in text
        return text.replace(old, old.replace("gfx1151, gfx120X", "gfx1151, gfx1152, gfx120X"))
    code, out, err = run("lemonade", _edited(tmp_path, edit))
    assert code == 1, err
    assert out.splitlines() == [
        "+ kokoro/vulkan/linux: experimental native, amd_gpu",
        "- sd-cpp/cpu/linux,windows: core native, cpu (x86_64)",
        '~ whispercpp/rocm/linux,windows: devices {"amd_gpu":["gfx110X","gfx1150","gfx1151","gfx120X"]} -> '
        '{"amd_gpu":["gfx110X","gfx1150","gfx1151","gfx1152","gfx120X"]}',
    ]


def test_a_removed_row_whose_overlay_facts_remain_is_named(tmp_path):
    # openmoss cuda carries an arch fact in the overlay: removing the row upstream leaves that fact
    # without a row; the report says so, and --write refuses rather than dropping it silently
    src = _edited(tmp_path, lambda t: t.replace("| `openmoss` | cuda | experimental | native | linux, windows | "
                                                "nvidia_gpu |\n", ""))
    code, out, err = run("lemonade", src)
    assert code == 1
    assert "! catalogs-src/lemonade/overlay.json: row_facts openmoss/cuda/linux,windows have no row in the source any more" in out
    before = open(CATALOG, encoding="utf-8").read()
    code, out, err = run("lemonade", src, "--write")
    assert open(CATALOG, encoding="utf-8").read() == before
    assert code == 5
    assert "catalogs-src/lemonade/overlay.json: row_facts for rows the source does not have: openmoss/cuda/linux,windows" in err


@pytest.mark.parametrize("edit,where", [
    (lambda t: t.replace("## Support matrix", "## Support"), "no '## Support matrix' section"),
    (lambda t: t.replace("| `ds4` | rocm | guest | container | linux | amd_gpu (gfx1151) |",
                         "| `ds4` | rocm | guest | container | linux |"), "cells, the table has 6 columns"),
    (lambda t: t.replace("amd_gpu (gfx1151) |", "amd_gpu [gfx1151] |", 1), "are not 'type' or 'type (a, b)'"),
    (lambda t: t.replace("| `ds4` | DwarfStar4 | no |", "| `ds4` | DwarfStar4 | maybe |"), "expected yes or no"),
])
def test_a_malformed_source_names_the_file_and_line(tmp_path, edit, where):
    code, out, err = run("lemonade", _edited(tmp_path, edit))
    assert code == 5 and where in err and "backends-reference.md" in err
    assert "Traceback" not in err


def test_a_changed_preference_order_is_reported(tmp_path):
    def edit(text):
        a = "| `whispercpp` | vulkan | core | native | linux, windows | amd_gpu; cpu (x86_64) |\n"
        b = "| `whispercpp` | rocm | core | native | linux, windows | amd_gpu (gfx110X, gfx1150, gfx1151, gfx120X) |\n"
        assert a + b in text
        return text.replace(a + b, b + a)
    code, out, err = run("lemonade", _edited(tmp_path, edit))
    assert code == 1
    assert out.splitlines() == ["~ recipe whispercpp: row order changed: whispercpp/npu/windows, whispercpp/metal/macos, "
                                "whispercpp/rocm/linux,windows, whispercpp/vulkan/linux,windows, "
                                "whispercpp/cpu/linux,windows"]


LOCALAI_SRC = os.path.join(ROOT, "catalogs-src", "localai", "index.yaml")
LOCALAI = os.path.join(ROOT, "selector", "catalogs", "localai.json")


def test_the_committed_localai_catalog_is_its_index_plus_its_overlay():
    with open(LOCALAI, encoding="utf-8") as f:
        text = f.read()
    rebuilt, left = sync_catalog.regenerate("localai", LOCALAI_SRC)
    assert left == [] and sync_catalog.dump(rebuilt) == text
    code, out, err = run("localai", LOCALAI_SRC)
    assert code == 0 and out.strip() == "localai: no change", err


def _index(tmp_path, edit):
    return _edited(tmp_path, edit, LOCALAI_SRC)


def test_a_renamed_image_and_a_new_capability_are_reported_row_by_row(tmp_path):
    def edit(text):
        # llama-cpp's amd image renamed upstream (meta map and image entry), and a new capability
        assert text.count('amd: "rocm-llama-cpp"') == 1 and text.count('name: "rocm-llama-cpp"') == 1
        text = text.replace('amd: "rocm-llama-cpp"', 'amd: "rocm7-llama-cpp"\n    nvidia-cuda-14: "cuda14-llama-cpp"')
        return text.replace('name: "rocm-llama-cpp"', 'name: "rocm7-llama-cpp"')
    code, out, err = run("localai", _index(tmp_path, edit))
    assert code == 1, err
    assert out.splitlines() == [
        "+ llama-cpp capability nvidia-cuda-14: cuda14-llama-cpp",
        "~ llama-cpp capability amd: rocm-llama-cpp -> rocm7-llama-cpp",
        "~ llama-cpp/rocm/linux: install local-ai backends install rocm-llama-cpp -> "
        "local-ai backends install rocm7-llama-cpp",
    ]


def test_an_image_the_index_dropped_or_a_capability_it_dropped_is_named_and_not_written(tmp_path):
    def edit(text):
        text = text.replace('name: "vulkan-whisper"\n', 'name: "vulkan-whisper-gone"\n')
        return text.replace('    metal: "metal-audio-cpp"\n', "")
    src = _index(tmp_path, edit)
    code, out, err = run("localai", src)
    assert code == 1
    assert "! whisper/vulkan/linux: the index has no image vulkan-whisper" in out
    assert "! audio-cpp/metal/macos: the capability metal is gone from audio-cpp's map" in out
    before = open(LOCALAI, encoding="utf-8").read()
    code, out, err = run("localai", src, "--write")
    assert code == 5 and "the index has no image vulkan-whisper" in err
    assert open(LOCALAI, encoding="utf-8").read() == before


def test_an_index_that_is_not_yaml_is_named(tmp_path):
    code, out, err = run("localai", _index(tmp_path, lambda t: t + "\n- [unclosed\n"))
    assert code == 5 and "index.yaml: cannot read" in err and "Traceback" not in err
