#!/usr/bin/env python3
"""links.py - every relative link in the project's Markdown resolves.

Usage: links.py [SRC]     (SRC: the repository root; default: $SRC, else
                           two folders above this file)

Checks README.md, docs/*.md and bench/RESULTS.md: each inline link or image
`[text](target)` and each reference definition `[label]: target` whose target
is not a URL (http:, https:, mailto:, ...) must name a file or folder that
exists inside the repository, and a `#anchor` (alone, or after a .md file)
must be the slug of a heading of that file, as GitHub makes them: lowercase,
punctuation dropped (letters, digits, spaces, '-' and '_' kept), spaces to
'-', a repeated heading's slug followed by -1, -2, ... Links and headings
inside fenced code blocks and inline code do not count. Exit 0 when all
resolve, 1 listing every one that does not (file:line, the target, why)."""
import os
import re
import sys

FENCE = re.compile(r"^\s{0,3}(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ID = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def lines_outside_code(text):
    """(line number, line) for each line outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
                continue
            if line.strip().startswith(fence):
                fence = None
                continue
        if fence is None:
            yield n, line


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)   # code spans keep their text
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text)                    # HTML tags go
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen = {}
        found = set()
        text = open(path, encoding="utf-8").read()
        for _, line in lines_outside_code(text):
            for a in HTML_ID.findall(line):
                found.add(a)
            m = HEADING.match(line)
            if not m:
                continue
            s = slug(m.group(2))
            k = seen.get(s, 0)
            seen[s] = k + 1
            found.add(s if k == 0 else f"{s}-{k}")
        cache[path] = found
    return cache[path]


def targets(text):
    """(line number, target) of every link outside code."""
    for n, line in lines_outside_code(text):
        m = REFDEF.match(line)
        if m and not line.lstrip().startswith("[!"):
            yield n, m.group(1)
            continue
        bare = CODE_SPAN.sub(lambda m: "code", line)
        for m in INLINE.finditer(bare):
            yield n, m.group(1)


def check(root, md):
    bad = []
    text = open(md, encoding="utf-8").read()
    rel = os.path.relpath(md, root)
    for n, target in targets(text):
        if not target or SCHEME.match(target) or target.startswith("//"):
            continue
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
        if os.path.relpath(dest, root).startswith(".."):
            bad.append(f"{rel}:{n}: {target}: outside the repository")
            continue
        if not os.path.exists(dest):
            bad.append(f"{rel}:{n}: {target}: no such file")
            continue
        if anchor:
            if not dest.endswith(".md") or os.path.isdir(dest):
                bad.append(f"{rel}:{n}: {target}: an anchor into a file that is not Markdown")
            elif anchor not in anchors(dest):
                bad.append(f"{rel}:{n}: {target}: no heading of {os.path.relpath(dest, root)} has the anchor '#{anchor}'")
    return bad


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.environ.get("SRC") or os.path.join(os.path.dirname(__file__), "..", ".."))
    files = [os.path.join(root, "README.md"), os.path.join(root, "bench", "RESULTS.md")]
    docs = os.path.join(root, "docs")
    files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    bad, count = [], 0
    for md in files:
        if not os.path.exists(md):
            bad.append(f"{os.path.relpath(md, root)}: missing")
            continue
        count += sum(1 for _ in targets(open(md, encoding="utf-8").read()))
        bad += check(root, md)
    if bad:
        print(f"{len(bad)} broken links:")
        print("\n".join("  " + b for b in bad))
        return 1
    print(f"ok: {count} links in {len(files)} files resolve (relative ones checked, with their anchors)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
