"""mkdocs-gen-files: the reference pages, generated from the sources (pipelines/reference/) at every build."""

import sys
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pipelines.reference import pages

for path, text in pages().items():
    with mkdocs_gen_files.open(path, "w") as out:
        out.write(text)
