"""docs/hooks.md and the hook specs must agree: names, signatures, order and kind of every hook; and
docs/architecture.md has a section for each module of the package and for nothing else.

``doc_problems(doc_text)`` and ``architecture_problems(text)`` list every disagreement; the tests assert they find
none in the real pages, and that they do find the breakage planted in altered copies of the pages.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import stackrl
from stackrl import hookspecs
from stackrl.manager import EXCLUSIVE_HOOKS, HOOKS
from stackrl.policy import PolicyAccess

DOC = Path(__file__).resolve().parents[1] / "docs" / "hooks.md"
ARCHITECTURE = DOC.with_name("architecture.md")
KINDS = ("chained", "collected", "exclusive", "notified")

# "### `name(args)`": a hook's section. Dotted names (`ctx.score(...)`) and names without arguments are other
# sections; a section runs to the next heading of level 1 to 3.
HOOK_HEADING = re.compile(r"^### `([A-Za-z_]\w*)(\(.*\))`\s*$", re.MULTILINE)
ANY_HEADING = re.compile(r"^#{1,3} ", re.MULTILINE)
DOC_KIND = re.compile(r"^\*\*Kind:\*\*\s*(\w+)", re.MULTILINE | re.IGNORECASE)
SPEC_KIND = re.compile(r"\b(" + "|".join(KINDS) + r")\b", re.IGNORECASE)


def spec_signature(name: str) -> str:
    """``name(args)`` as ``inspect.signature`` prints the spec, without a return annotation."""
    sig = HOOKS[name].replace(return_annotation=inspect.Signature.empty)
    return f"{name}{sig}"


def capability_heading(method: str) -> str:
    """The heading of ``ctx.<method>``: ``PolicyAccess.<method>``'s signature without ``self`` and annotations."""
    sig = inspect.signature(getattr(PolicyAccess, method))
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values() if p.name != "self"]
    returns = sig.return_annotation
    returns = returns if isinstance(returns, str) else inspect.formatannotation(returns)
    return f"### `ctx.{method}{inspect.Signature(params)}` → `{returns}`"


def spec_kind(name: str) -> str | None:
    """The first kind word of the spec's docstring, lower-cased (``None`` if it names none)."""
    found = SPEC_KIND.search(inspect.getdoc(getattr(hookspecs, name)) or "")
    return found.group(1).lower() if found else None


def doc_sections(doc_text: str) -> list[tuple[str, str, str]]:
    """``(name, documented signature, section body)`` of every hook heading, in page order."""
    sections = []
    for match in HOOK_HEADING.finditer(doc_text):
        following = ANY_HEADING.search(doc_text, match.end())
        body = doc_text[match.end() : following.start() if following else len(doc_text)]
        sections.append((match.group(1), match.group(1) + match.group(2), body))
    return sections


def spec_problems() -> list[str]:
    """What the specs themselves must state: a docstring with its kind and an example, the kind matching pluggy."""
    problems = []
    for name in HOOKS:
        doc = inspect.getdoc(getattr(hookspecs, name)) or ""
        kind = spec_kind(name)
        if not doc:
            problems.append(f"spec {name}: no docstring")
        if kind is None:
            problems.append(f"spec {name}: the docstring states no kind ({'/'.join(KINDS)})")
        elif (kind == "exclusive") != (name in EXCLUSIVE_HOOKS):
            problems.append(
                f"spec {name}: the docstring says {kind} but the spec is "
                f"{'' if name in EXCLUSIVE_HOOKS else 'not '}firstresult"
            )
        if "Example" not in doc:
            problems.append(f"spec {name}: the docstring has no Example")
    return problems


def doc_problems(doc_text: str) -> list[str]:
    """Every disagreement between ``doc_text`` (the hook reference) and the specs in :mod:`stackrl.hookspecs`."""
    problems = spec_problems()
    sections = doc_sections(doc_text)
    documented = [name for name, _, _ in sections]
    for name in sorted({n for n in documented if documented.count(n) > 1}):
        problems.append(f"docs: hook {name} is documented {documented.count(name)} times")
    for name in HOOKS:
        if name not in documented:
            problems.append(f"docs: no section '### `{spec_signature(name)}`' for hook {name}")
    for name, signature, body in sections:
        if name not in HOOKS:
            problems.append(f"docs: section '### `{signature}`' documents no hook in the specs")
            continue
        if signature != spec_signature(name):
            problems.append(f"docs: hook {name} is documented as {signature}; the spec is {spec_signature(name)}")
        kind = DOC_KIND.search(body)
        if kind is None:
            problems.append(f"docs: the section of {name} states no '**Kind:**'")
        elif kind.group(1).lower() != spec_kind(name):
            problems.append(f"docs: {name} is documented as {kind.group(1).lower()}; its spec says {spec_kind(name)}")
        if "```python" not in body:
            problems.append(f"docs: the section of {name} has no python example")
    in_both = [name for name in documented if name in HOOKS]
    spec_order = [name for name in HOOKS if name in in_both]
    if list(dict.fromkeys(in_both)) != spec_order:
        problems.append(f"docs: hooks are not in spec order; expected {', '.join(spec_order)}")
    for method in ("generate", "score", "score_probes", "update_snapshot"):
        expected = capability_heading(method)
        if not re.search(rf"^{re.escape(expected)}\s*$", doc_text, re.MULTILINE):
            found = re.search(rf"^### `ctx\.{method}\(.*$", doc_text, re.MULTILINE)
            problems.append(
                f"docs: ctx.{method} is documented as {found.group(0)!r}; policy.py gives {expected!r}"
                if found
                else f"docs: no section {expected!r}"
            )
    return problems


@pytest.fixture(scope="module")
def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def test_specs_state_kind_and_example():
    assert spec_problems() == []


def test_docs_agree_with_specs(doc_text):
    assert doc_problems(doc_text) == []


def test_every_hook_has_a_section(doc_text):
    assert [name for name, _, _ in doc_sections(doc_text)] == list(HOOKS)


# -- the checker catches breakage ------------------------------------------------------------------------------------


def _section_span(doc_text: str, name: str) -> tuple[int, int]:
    match = re.search(rf"^### `{name}\(.*\)`\s*$", doc_text, re.MULTILINE)
    assert match, f"no section for {name} to break"
    following = ANY_HEADING.search(doc_text, match.end())
    return match.start(), following.start() if following else len(doc_text)


def _only_new(broken: str, doc_text: str) -> list[str]:
    before = set(doc_problems(doc_text))
    return [p for p in doc_problems(broken) if p not in before]


def test_catches_a_removed_section(doc_text):
    start, end = _section_span(doc_text, "reward")
    problems = _only_new(doc_text[:start] + doc_text[end:], doc_text)
    assert any("no section" in p and "reward(ctx)" in p for p in problems), problems


def test_catches_a_changed_signature(doc_text):
    broken = doc_text.replace("### `reshape_advantages(advantages, ctx)`", "### `reshape_advantages(adv, ctx)`")
    assert broken != doc_text
    problems = _only_new(broken, doc_text)
    assert any("reshape_advantages(adv, ctx)" in p and "reshape_advantages(advantages, ctx)" in p for p in problems)


def test_catches_a_hook_missing_from_the_specs(doc_text):
    start, _ = _section_span(doc_text, "post_step")
    extra = "### `pre_step(ctx)`\n\n**Kind:** notified.\n\n```python\npass\n```\n\n"
    problems = _only_new(doc_text[:start] + extra + doc_text[start:], doc_text)
    assert any("pre_step(ctx)" in p and "no hook" in p for p in problems), problems


def test_catches_a_wrong_kind(doc_text):
    start, end = _section_span(doc_text, "transform_prompts")
    section = doc_text[start:end]
    broken = doc_text[:start] + section.replace("**Kind:** chained", "**Kind:** collected") + doc_text[end:]
    assert broken != doc_text
    problems = _only_new(broken, doc_text)
    assert any("transform_prompts is documented as collected" in p for p in problems), problems


def test_catches_a_spec_docstring_without_kind_or_example(monkeypatch, doc_text):
    monkeypatch.setattr(hookspecs.reward, "__doc__", "Score every completion of the batch.")
    problems = doc_problems(doc_text)
    assert "spec reward: the docstring states no kind (chained/collected/exclusive/notified)" in problems
    assert "spec reward: the docstring has no Example" in problems


def test_python_examples_parse(doc_text):
    blocks = re.findall(r"^```python\n(.*?)^```", doc_text, re.MULTILINE | re.DOTALL)
    assert len(blocks) >= len(HOOKS)
    for block in blocks:
        compile(block, "docs/hooks.md example", "exec")


def test_catches_a_stale_capability_signature(doc_text):
    broken = doc_text.replace("full_vocab=False, grad=False", "grad=False", 1)
    assert broken != doc_text
    problems = _only_new(broken, doc_text)
    assert any(p.startswith("docs: ctx.score is documented as") for p in problems), problems


# -- docs/architecture.md ----------------------------------------------------------------------------------------------

# "### `stackrl.blocks.teacher`": a module's section.
MODULE_HEADING = re.compile(r"^#{2,4} `(stackrl(?:\.\w+)*)`\s*$", re.MULTILINE)


def package_modules() -> set[str]:
    """The dotted name of every module of the package, a package named as its ``__init__``'s module."""
    root = Path(stackrl.__file__).resolve().parent
    parts = (("stackrl", *path.relative_to(root).with_suffix("").parts) for path in root.rglob("*.py"))
    return {".".join(p[:-1] if p[-1] == "__init__" else p) for p in parts}


def architecture_problems(text: str) -> list[str]:
    named, modules = set(MODULE_HEADING.findall(text)), package_modules()
    return [f"docs/architecture.md: no section for the module {m}" for m in sorted(modules - named)] + [
        f"docs/architecture.md: the section {m} names no module of the package" for m in sorted(named - modules)
    ]


@pytest.fixture(scope="module")
def architecture_text() -> str:
    return ARCHITECTURE.read_text(encoding="utf-8")


def test_architecture_names_every_module(architecture_text):
    assert architecture_problems(architecture_text) == []


def test_architecture_catches_a_missing_and_a_stale_module(architecture_text):
    broken = architecture_text.replace("### `stackrl.blocks.kl`", "### `stackrl.kl`", 1)
    assert broken != architecture_text
    assert architecture_problems(broken) == [
        "docs/architecture.md: no section for the module stackrl.blocks.kl",
        "docs/architecture.md: the section stackrl.kl names no module of the package",
    ]
