"""The rule engine: pure functions over plain data, no I/O.

``decide(profile, catalog, recipe, installed, settings, pins)`` gives a Decision: a verdict for every
backend of the recipe in preference order (supported or not, why, on which device, tier, format,
state), and the pick.  The parts, each importing only those before it:

- ``records``  the answers (Settings, Device, Verdict, Decision) and a judged device (Judgement)
- ``words``    how kinds, OSes and families are said
- ``devices``  the Machine: every device of the Profile as one record (Unit), whatever its vendor
- ``state``    where a backend stands in the cache
- ``match``    the one judge, and every backend's verdict
- ``choose``   the policy that chooses among verdicts
- ``run_env``  the variables that pin the chosen device
- ``decide``   all of it for one recipe
"""

from __future__ import annotations

from selector.engine.choose import choose, device_key, system_preferred
from selector.engine.decide import decide
from selector.engine.devices import Machine, Unit, family_token, matches_family
from selector.engine.match import SYSTEM_NOTE, row_access, verdicts
from selector.engine.records import (CHANNELS, INSTALLED_STATES, METRICS, POLICIES, Decision, Device, Judgement,
                                     Settings, Verdict)
from selector.engine.run_env import run_env_for
from selector.engine.state import install_dir_name, recipe_channel, state_for
from selector.engine.words import describe_families
from selector.kinds import TYPE_WORDS

__all__ = ["CHANNELS", "INSTALLED_STATES", "METRICS", "POLICIES", "SYSTEM_NOTE", "TYPE_WORDS", "Decision", "Device",
           "Judgement", "Machine", "Settings", "Unit", "Verdict", "choose", "decide", "describe_families",
           "device_key", "family_token", "install_dir_name", "matches_family", "recipe_channel", "row_access",
           "run_env_for", "state_for", "system_preferred", "verdicts"]
