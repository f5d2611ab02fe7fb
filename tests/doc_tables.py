"""
The tables README.md and RESULTS.md draw from committed results files, checked and refreshed from the
records. A block

    <!-- report FILE[,FILE] "WORDS" P-Q -->
    ...
    <!-- end -->

holds paragraphs P to Q (counted from 1, split on blank lines) of the section of
`python sweep.py --report --results=FILE[,FILE]` whose `###` heading contains WORDS (exactly one
does). tests/test_sweep.py checks every block against the report; after a change to the records or
to the report's wording, `python tests/doc_tables.py --write` rewrites the blocks (without --write it
says which differ); `python tests/doc_tables.py --show FILE[,FILE]` numbers a report's paragraphs.
"""
import contextlib
import functools
import io
import os
import re
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
sys.path.insert(0, HERE)
import report  # noqa: E402

DOCS = ('README.md', 'RESULTS.md')
BLOCK = re.compile(r'<!-- report (\S+) "([^"]+)" (\d+)-(\d+) -->\n(.*?)\n?<!-- end -->', re.S)


@functools.lru_cache(maxsize=None)
def report_sections(paths):
    """{heading: [paragraph, ...]} of the report of these results files (relative to the repository)."""
    out = io.StringIO()
    files = ','.join(os.path.join(HERE, p) for p in paths.split(','))
    sweep = types.SimpleNamespace(quick=False, json=False, png='')
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        report.sweep_report(sweep, files, os.path.join(tempfile.gettempdir(), 'doc_tables.png'))
    sections = {}
    for part in out.getvalue().split('\n### ')[1:]:
        heading, _, body = part.partition('\n')
        sections[heading] = [p.strip('\n') for p in re.split(r'\n\s*\n', body) if p.strip()]
    return sections


def expected(paths, words, first, last):
    """The text a block names, or an AssertionError saying why there is none."""
    found = [h for h in report_sections(paths) if words in h]
    assert len(found) == 1, (f"{len(found)} sections of the report of {paths} have {words!r} in "
                             f"their heading (want 1): {found}")
    paragraphs = report_sections(paths)[found[0]]
    assert 1 <= first <= last <= len(paragraphs), (
        f"paragraphs {first}-{last} of {found[0]!r}: it has {len(paragraphs)}")
    return '\n\n'.join(paragraphs[first - 1:last])


def blocks(doc):
    """(paths, words, first, last, text) of every block in a document of the repository."""
    text = open(os.path.join(HERE, doc), encoding='utf-8').read()
    return [(p, w, int(a), int(b), t) for p, w, a, b, t in BLOCK.findall(text)]


def refresh(doc, write=False):
    """The blocks of doc that differ from today's reports (their WORDS); rewritten when `write`."""
    path = os.path.join(HERE, doc)
    text = open(path, encoding='utf-8').read()
    changed = []

    def new(m):
        paths, words, first, last, old = m.groups()
        want = expected(paths, words, int(first), int(last))
        if want != old.strip('\n'):
            changed.append(words)
        return f'<!-- report {paths} "{words}" {first}-{last} -->\n{want}\n<!-- end -->'
    text = BLOCK.sub(new, text)
    if write and changed:
        with open(path, 'w', encoding='utf-8') as f:
            f.write(text)
    return changed


if __name__ == '__main__':
    if sys.argv[1:2] == ['--show']:
        for heading, paragraphs in report_sections(sys.argv[2]).items():
            print(f"### {heading}")
            for i, p in enumerate(paragraphs, 1):
                print(f"  {i}: {p.splitlines()[0][:100]}")
        sys.exit()
    for doc in DOCS:
        changed = refresh(doc, write='--write' in sys.argv)
        print(f"{doc}: {len(changed)} of {len(blocks(doc))} blocks "
              f"{'rewritten' if '--write' in sys.argv else 'differ from their report'}"
              + ''.join(f"\n  {w}" for w in changed))
