#!/usr/bin/env python3
"""Write the book's Python API reference from the installed package.

    python scripts/python_reference.py           # (re)write docs/src/reference/python.md
    python scripts/python_reference.py --check   # exit 1 with a diff if the file differs

Imports the installed ``nvmos`` package (build it first: ``maturin develop
--release`` or ``pip install .``) and renders, with ``inspect``, the
package's docstring and then every name of ``nvmos.__all__``: functions,
classes with their public methods and properties, exceptions and
constants, each with its signature and docstring. The order is fixed
(by kind, then by name), so the same package always gives the same page.

Docstrings are written in the package's one style (reST literals, Google
sections ``Args:``, ``Returns:``, ``Raises:``, ``Columns:``); this script
turns them into Markdown: sections into lists, ``Columns:`` into a table
of column, meaning and unit, doctest lines into Python code blocks.
Constants are documented by the ``#:`` comment above their assignment in
the package's source.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import inspect
import os
import pprint
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "src" / "reference" / "python.md"

SECTIONS = ("Args", "Returns", "Yields", "Raises", "Attributes", "Columns")
# Dunder methods worth a line in the reference (the others are Python's).
DUNDERS = ("__enter__", "__exit__", "__iter__", "__next__")
# A name the package defines in Rust, with no source comment to read.
FIXED_DOCS = {"__version__": "The package's version: the nvmos Rust workspace's version (str)."}


# ---------------------------------------------------------------------------
# Docstrings to Markdown


def _escape(text: str) -> str:
    """Markdown-safe text: ``*``, ``_`` runs, ``<`` and ``>`` escaped outside
    code spans (reST's ``x`` and Markdown's `x` alike)."""
    text = re.sub(r":(?:class|func|meth|mod|attr|exc):(`[^`]+`)", r"\1", text)  # reST roles: the name alone
    out = []
    for i, part in enumerate(re.split(r"(``.+?``|`[^`]+`)", text)):
        if i % 2:  # a code span: as Markdown's single-backtick span
            inner = part.strip("`")
            out.append(f"``{inner}``" if "`" in inner else f"`{inner}`")
        else:
            part = part.replace("\\", "\\\\").replace("*", "\\*").replace("<", "&lt;").replace(">", "&gt;")
            out.append(re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", part))
    return "".join(out)


def _entries(lines: list[str]) -> list[str]:
    """A section's entries: each first-level line with its deeper-indented
    continuation lines joined to it."""
    entries: list[str] = []
    base = None
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if base is None:
            base = indent
        if indent <= base or not entries:
            entries.append(line.strip())
        else:
            entries[-1] += " " + line.strip()
    return entries


ENTRY = re.compile(r"^(?P<name>[^\s:()]+(?:\s*\|\s*[^\s:()]+)*)(?:\s+\((?P<type>[^)]*)\))?:\s+(?P<text>.*)$")


def _section(name: str, lines: list[str]) -> list[str]:
    if name in ("Returns", "Yields"):
        # One value: every line is part of its one entry.
        entries = [" ".join(line.strip() for line in lines if line.strip())]
    else:
        entries = _entries(lines)
    if name == "Columns":
        out = ["**Columns:**", "", "| column | meaning | unit |", "|---|---|---|"]
        for e in entries:
            m = re.match(r"^(?P<name>\S+?):\s+(?P<text>.*?)(?:\s+\((?P<unit>[^()]*(?:\([^()]*\)[^()]*)*)\))?$", e)
            if not m:
                raise SystemExit(f"Columns entry not 'name: meaning (unit)': {e!r}")
            text = _escape(m["text"]).replace("|", "\\|")
            unit = _escape(m["unit"] or "").replace("|", "\\|")
            out.append(f"| `{m['name']}` | {text} | {unit} |")
        return out + [""]
    out = [f"**{name}:**", ""]
    for e in entries:
        m = ENTRY.match(e)
        if name in ("Returns", "Yields") or not m:
            # "type: text" (or prose): the type as code.
            m2 = re.match(r"^(?P<type>[\w.\[\], |]+?):\s+(?P<text>.*)$", e)
            if m2 and name in ("Returns", "Yields"):
                out.append(f"- `{m2['type']}`: {_escape(m2['text'])}")
            else:
                out.append(f"- {_escape(e)}")
            continue
        kind = f" ({_escape(m['type'])})" if m["type"] else ""
        out.append(f"- `{m['name']}`{kind}: {_escape(m['text'])}")
    return out + [""]


def markdown(doc: str | None) -> str:
    """A docstring as Markdown."""
    if not doc:
        return "*(undocumented)*\n"
    lines = inspect.cleandoc(doc).splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        header = stripped[:-1] if stripped.endswith(":") else None
        if header in SECTIONS and not line.startswith(" "):
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith(" ")):
                if not lines[j].strip() and (j + 1 >= len(lines) or not lines[j + 1].startswith(" ")):
                    break
                j += 1
            if out and out[-1] != "":
                out.append("")
            out.extend(_section(header, lines[i + 1 : j]))
            i = j
            continue
        if stripped.startswith(">>>"):
            block = []
            while i < len(lines) and lines[i].strip().startswith((">>>", "...")):
                code = re.sub(r"\s*#\s*doctest:.*$", "", lines[i].strip())
                block.append(code[4:] if len(code) > 3 else "")
                i += 1
            out.extend(["", "```python", *block, "```", ""])
            continue
        if stripped.endswith("::") and i + 1 < len(lines):
            out.append(_escape(stripped[:-1]))
            j = i + 1
            block = []
            while j < len(lines) and (not lines[j].strip() or lines[j].startswith(" ")):
                block.append(lines[j])
                j += 1
            while block and not block[-1].strip():
                block.pop()
            out.extend(["", "```text", *inspect.cleandoc("\n".join(block)).splitlines(), "```", ""])
            i = j
            continue
        if stripped.startswith("- "):
            out.append("- " + _escape(stripped[2:]))
        elif line.startswith(" ") and out and out[-1].startswith("- "):
            out[-1] += " " + _escape(stripped)
        else:
            out.append(_escape(stripped))
        i += 1
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


# ---------------------------------------------------------------------------
# Signatures and constants


def signature(obj, name: str, method: bool = False) -> str | None:
    """``name(params)`` without annotations or ``self``, or None."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]
    if method and params and params[0].name in ("self", "cls", "slf"):
        params = params[1:]
    sig = sig.replace(parameters=params, return_annotation=inspect.Signature.empty)
    return f"{name}{sig}"


def constant_docs(modules) -> dict[str, str]:
    """The ``#:`` comments right above each module-level assignment."""
    docs: dict[str, str] = {}
    for module in modules:
        source = inspect.getsource(module)
        lines = source.splitlines()
        for node in ast.parse(source).body:
            targets = []
            if isinstance(node, ast.Assign):
                targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                targets = [node.target.id]
            comment = []
            k = node.lineno - 2
            while k >= 0 and lines[k].lstrip().startswith("#:"):
                comment.insert(0, lines[k].lstrip()[2:].strip())
                k -= 1
            for t in targets:
                if comment:
                    docs.setdefault(t, " ".join(comment))
    return docs


# ---------------------------------------------------------------------------
# The page


def members(cls) -> list[tuple[str, object]]:
    """A class's own documented members: public names and a few dunders,
    sorted by name."""
    out = []
    for name, value in cls.__dict__.items():
        if name.startswith("_") and name not in DUNDERS:
            continue
        out.append((name, value))
    return sorted(out, key=lambda kv: kv[0])


def render_class(export: str, cls) -> list[str]:
    out = [f"### nvmos.{export}", ""]
    if cls.__name__ != export:
        out += [f"*(the extension class `{cls.__module__}.{cls.__name__}`)*", ""]
    sig = None
    if cls.__init__ is not object.__init__ or "__text_signature__" in cls.__dict__:
        sig = signature(cls, f"nvmos.{export}")
    if sig and not sig.endswith("(*args, **kwargs)"):
        out += ["```python", sig, "```", ""]
    out += [markdown(cls.__doc__), ""]
    for name, value in members(cls):
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, (property,)) or type(raw).__name__ == "getset_descriptor":
            out += [f"#### {export}.{name}", "", "*property*", "", markdown(raw.__doc__), ""]
            continue
        func = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
        if not callable(func):
            continue
        static = isinstance(raw, staticmethod) or type(raw).__name__ == "builtin_function_or_method"
        sig = signature(func, f"{export}.{name}", method=not static)
        out += [f"#### {export}.{name}", ""]
        if static:
            out += ["*static method*", ""]
        if sig:
            out += ["```python", sig, "```", ""]
        out += [markdown(getattr(func, "__doc__", None)), ""]
    return out


def render() -> str:
    import nvmos
    from nvmos import _api, _sweep

    consts = constant_docs([_api, _sweep])
    functions, classes, errors, constants = [], [], [], []
    for name in sorted(set(nvmos.__all__)):
        obj = getattr(nvmos, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            errors.append(name)
        elif inspect.isclass(obj):
            classes.append(name)
        elif callable(obj):
            functions.append(name)
        else:
            constants.append(name)

    out = [
        "# Python API reference",
        "",
        "<!-- Generated by scripts/python_reference.py from the nvmos package's",
        "     docstrings; do not edit: change the docstrings and run the script. -->",
        "",
        "The `nvmos` package (`pip install .`; see [Python and sweeps](../sweeps.md)).",
        "Every name below is importable from `nvmos`. Functions that return a",
        "DataFrame list every column with its meaning and unit.",
        "",
        markdown(nvmos.__doc__),
        "",
        "## Functions",
        "",
    ]
    for name in functions:
        f = getattr(nvmos, name)
        out += [f"### nvmos.{name}", ""]
        sig = signature(f, f"nvmos.{name}")
        if sig:
            out += ["```python", sig, "```", ""]
        out += [markdown(f.__doc__), ""]
    out += ["## Classes", ""]
    for name in classes:
        out += render_class(name, getattr(nvmos, name))
    out += ["## Exceptions", ""]
    for name in errors:
        cls = getattr(nvmos, name)
        base = cls.__bases__[0].__name__
        out += [f"### nvmos.{name}", "", f"*subclass of `{base}`*", "", markdown(cls.__doc__), ""]
    out += ["## Constants", ""]
    for name in constants:
        value = getattr(nvmos, name)
        doc = FIXED_DOCS.get(name) or consts.get(name)
        if doc is None:
            raise SystemExit(f"nvmos.{name}: no `#:` comment above its assignment")
        out += [f"### nvmos.{name}", "", markdown(doc), ""]
        if name not in FIXED_DOCS:
            lead = f"{name} = "
            text = pprint.pformat(value, width=76 - len(lead), compact=True)
            text = text.replace("\n", "\n" + " " * len(lead))
            out += ["```python", lead + text, "```", ""]
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="compare with the committed page; exit 1 with a diff")
    p.add_argument("--out", type=Path, default=OUT, help=f"the page (default {OUT.relative_to(ROOT)})")
    args = p.parse_args()
    text = render()
    if args.check:
        old = args.out.read_text() if args.out.exists() else ""
        if old == text:
            return 0
        sys.stdout.writelines(
            difflib.unified_diff(
                old.splitlines(True), text.splitlines(True), str(args.out), "generated from the installed nvmos"
            )
        )
        print(f"\n{args.out} is out of date: run python scripts/python_reference.py", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{args.out.name}.", dir=args.out.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, args.out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
