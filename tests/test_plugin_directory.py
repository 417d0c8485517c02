"""docs/plugins.md lists every plugin in plugins/ with the stages it really uses.

``directory_problems(doc_text)`` lists every disagreement between the page and the plugins folder; the tests assert
it finds none in the real page and does find the breakage planted in altered copies.
"""

from __future__ import annotations

import re
from pathlib import Path

from stackrl.manager import PluginManager, installed_plugins
from stackrl.testing.repository import plugin_folders

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "plugins.md"
ROW = re.compile(r"^\|\s*\[`?(\w+)`?\]\((?:\.\./)?plugins/\1/README\.md\)\s*\|([^|]*)\|([^|]*)\|([^|]*)\|\s*$", re.MULTILINE)


def real_stages(name: str) -> str:
    plugin = installed_plugins()[name].load()()
    plugin.name = name
    return ", ".join(PluginManager([plugin]).stages(name))


def directory_problems(doc_text: str) -> list[str]:
    rows = {m.group(1): [cell.strip() for cell in m.groups()[1:]] for m in ROW.finditer(doc_text)}
    folders = plugin_folders(ROOT)
    problems = [f"plugin '{n}' in plugins/ has no row" for n in folders if n not in rows]
    problems += [f"row '{n}' names no plugin in plugins/" for n in rows if n not in folders]
    for name, (paper, stages, shows) in rows.items():
        if name in folders and stages != real_stages(name):
            problems.append(f"row '{name}': stages '{stages}', but the plugin uses '{real_stages(name)}'")
        if not paper or not shows:
            problems.append(f"row '{name}': the paper and what its tests show must be filled in")
    return problems


def test_every_plugin_is_listed_with_its_stages():
    assert directory_problems(DOC.read_text()) == []


def test_the_check_catches_a_missing_row_and_wrong_stages():
    text = DOC.read_text()
    first = next(ROW.finditer(text))
    name, stages = first.group(1), first.group(3)
    without = text.replace(first.group(0), "")
    assert f"plugin '{name}' in plugins/ has no row" in directory_problems(without)
    wrong = text.replace(first.group(0), first.group(0).replace(stages, " sample, reward, distill "))
    assert any(p.startswith(f"row '{name}': stages") for p in directory_problems(wrong))
