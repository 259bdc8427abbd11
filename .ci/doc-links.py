#!/usr/bin/env python3
"""Checks the rendered docs of the published crates: no doc text shows a
link that did not resolve as literal brackets (`[Outcome]`,
``[`CallHandle::approve`]``). Code and signatures are not doc text.

usage: .ci/doc-links.py TARGET_DOC CRATE...   (exit 1 naming each one)
"""

import os
import re
import sys

DOCBLOCK = re.compile(r'<div class="docblock[^"]*">(.*?)</div>', re.S)
LITERAL = re.compile(r"\[`?[A-Za-z_][A-Za-z_0-9]*(?:::[A-Za-z_0-9]+)*(?:\(\))?`?\]")


def literals(html):
    """The bracketed names left in the doc text of one page."""
    found = []
    for block in DOCBLOCK.findall(html):
        text = re.sub(r"<pre.*?</pre>", "", block, flags=re.S)
        text = re.sub(r"<code>.*?</code>", "", text, flags=re.S)
        text = re.sub(r"<[^>]+>", "", text)
        found += LITERAL.findall(text)
    return found


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    root, crates = sys.argv[1], sys.argv[2:]
    assert literals('<div class="docblock"><p>see [Outcome] and <code>[u8]</code></p></div>') == ["[Outcome]"]
    pages = bad = 0
    for crate in crates:
        folder = os.path.join(root, crate)
        if not os.path.isdir(folder):
            sys.exit(f"{folder}: no rendered docs (run cargo doc first)")
        for path, _, files in os.walk(folder):
            for name in files:
                if not name.endswith(".html"):
                    continue
                pages += 1
                page = os.path.join(path, name)
                for literal in literals(open(page, errors="replace").read()):
                    bad += 1
                    print(f"{os.path.relpath(page, root)}: {literal} is not a link")
    print(f"doc links: {pages} pages of {', '.join(crates)}, {bad} literal")
    sys.exit(1 if bad else 0)


main()
