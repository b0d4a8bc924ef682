"""Every code block of README.md runs, top to bottom, as a reader would run it
(issue 11, point 9).

``python`` blocks run with this interpreter, ``sh`` blocks with bash (``-e -o
pipefail``: a failing command fails the block), one after the other in one working
directory and one fresh home, so the first block's ``strand dev up`` is the
cluster the later blocks use (through the launcher, as every dev cluster) and its
``. .venv/bin/activate`` is this virtualenv's (what a block exports stays, as in
one terminal). ``text`` blocks are not code. Any
other block fails the test unless the line above it says why it cannot run here::

    <!-- not run by tests/integration/test_readme.py: REASON -->
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.cluster import user_env

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
MARKER = re.compile(r"<!--\s*not run by tests/integration/test_readme\.py:(.*?)-->")
FENCE = re.compile(r"```(\S*)\s*")
RUNNERS = {"python": "python", "sh": "sh", "bash": "sh", "shell": "sh"}
BLOCK_TIMEOUT = 300.0  # s; the slowest block starts the cluster


class ReadmeError(AssertionError):
    """A block the test can neither run nor skip, or a misplaced marker."""


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, counted from 1
    language: str
    code: str
    not_run: str | None  # why not (the marker's reason), None: it runs

    @property
    def runner(self) -> str | None:
        if self.not_run is not None or self.language == "text":
            return None
        runner = RUNNERS.get(self.language)
        if runner is None:
            what = f"a ```{self.language} block" if self.language else "a block without a language"
            raise ReadmeError(
                f"README.md line {self.line}: {what} cannot be run by this test: make it "
                f"python, sh or text, or put above it "
                f"<!-- not run by tests/integration/test_readme.py: the reason -->")
        return runner


def blocks(text: str) -> list[Block]:
    """The fenced blocks of ``text``, with the marker above each (ReadmeError for a
    marker without a reason or not right above a block, an unclosed or indented fence)."""
    lines = text.splitlines()
    found: list[Block] = []
    marker: tuple[int, str] | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        if (mark := MARKER.fullmatch(line.strip())) is not None:
            if not mark.group(1).strip():
                raise ReadmeError(f"README.md line {index + 1}: say why the block is not run")
            marker = (index + 1, mark.group(1).strip())
        elif (fence := FENCE.fullmatch(line)) is not None:
            end = next((i for i in range(index + 1, len(lines)) if lines[i].strip() == "```"),
                       None)
            if end is None:
                raise ReadmeError(f"README.md line {index + 1}: the block is never closed")
            found.append(Block(index + 1, fence.group(1), "\n".join(lines[index + 1:end]) + "\n",
                               marker[1] if marker else None))
            marker, index = None, end
        elif line.lstrip().startswith("```"):
            raise ReadmeError(f"README.md line {index + 1}: an indented block is not run; "
                              "put its fence at the start of the line")
        elif marker is not None and line.strip():
            raise ReadmeError(f"README.md line {marker[0]}: the marker is not right above "
                              "a code block")
        index += 1
    if marker is not None:
        raise ReadmeError(f"README.md line {marker[0]}: the marker is not above a code block")
    return found


class Reader:
    """Runs blocks as one reader would: one working directory (where ``.venv`` is
    this interpreter's virtualenv), one home, none of the caller's STRAND_* settings."""

    def __init__(self, root: Path) -> None:
        self.work, self.home = root / "work", root / "home"
        self.work.mkdir(parents=True)
        self.home.mkdir(parents=True)
        venv = Path(sys.prefix)
        if not (venv / "bin" / "activate").exists():
            raise ReadmeError(f"run the tests from the project's virtualenv (make test): "
                              f"{venv} has no bin/activate for the README's first block")
        (self.work / ".venv").symlink_to(venv)
        self.env = user_env(self.home)

    def run(self, block: Block) -> subprocess.CompletedProcess[str]:
        if block.runner == "python":
            script = self.work / f"readme-line-{block.line}.py"
            script.write_text(block.code)
            command = [sys.executable, str(script)]
        else:  # and what it exported (the venv's activation) stays for the next blocks
            state = self.work / ".readme-env"
            command = ["bash", "-e", "-o", "pipefail", "-c", f"{block.code}\nenv -0 > {state}"]
        done = subprocess.run(command, cwd=self.work, env=self.env, capture_output=True,
                              text=True, errors="replace", timeout=BLOCK_TIMEOUT, check=False)
        if block.runner == "sh" and done.returncode == 0:
            pairs = (item.partition("=") for item in state.read_text().split("\0") if item)
            self.env = {k: v for k, _, v in pairs if k not in ("_", "PWD", "OLDPWD", "SHLVL")}
        return done

    def check(self, block: Block) -> None:
        done = self.run(block)
        if done.returncode != 0:
            raise AssertionError(
                f"README.md line {block.line} ({block.language} block) failed with status "
                f"{done.returncode}:\n{block.code}\n--- stdout\n{done.stdout[-3000:]}\n"
                f"--- stderr\n{done.stderr[-3000:]}")

    def stop_dev_cluster(self) -> None:
        """Whatever dev cluster the blocks left running (the README stops its own)."""
        subprocess.run([sys.executable, "-m", "strand.cli.main", "dev", "down"], cwd=REPO,
                       env=self.env, capture_output=True, timeout=120, check=False)


def test_every_block_runs_or_says_why_not() -> None:
    """Quick, without a cluster: each block is runnable, text, or marked."""
    found = blocks(README.read_text())
    assert [b.runner for b in found].count("python") >= 3
    assert all(b.runner is not None or b.language == "text" or b.not_run for b in found)


@pytest.mark.slow
def test_readme_blocks_run_in_order(tmp_path: Path) -> None:
    reader = Reader(tmp_path)
    try:
        for block in blocks(README.read_text()):
            if block.runner is not None:
                reader.check(block)
    finally:
        reader.stop_dev_cluster()


# -- the checker itself: what it refuses, and that a broken block fails -------------------

@pytest.mark.parametrize(("text", "error"), [
    ("```\nls\n```\n", "a block without a language"),
    ("```ruby\nputs 1\n```\n", "a ```ruby block"),
    ("<!-- not run by tests/integration/test_readme.py: -->\n```sh\nx\n```\n", "say why"),
    ("<!-- not run by tests/integration/test_readme.py: slow -->\n\nprose\n```sh\nx\n```\n",
     "not right above"),
    ("```sh\nx\n", "never closed"),
    ("- a list\n  ```sh\n  x\n  ```\n", "indented"),
])
def test_blocks_it_cannot_run_fail(text: str, error: str) -> None:
    with pytest.raises(ReadmeError, match=re.escape(error)):
        for block in blocks(text):
            _ = block.runner


def test_a_marked_or_text_block_is_not_run() -> None:
    text = ("<!-- not run by tests/integration/test_readme.py: installs packages -->\n\n"
            "```sh\nmake run\n```\n```text\n<data_dir>/\n```\n")
    assert [(b.runner, b.not_run) for b in blocks(text)] == [(None, "installs packages"),
                                                             (None, None)]


def test_a_broken_block_fails(tmp_path: Path) -> None:
    reader = Reader(tmp_path)
    text = ("```python\nfrom strand.records import BatchBuilder\nBatchBuilder(compression='lz4')\n"
            "raise ValueError('broken example')\n```\n"
            "```sh\nfalse | cat\necho unreachable\n```\n")
    python_block, sh_block = blocks(text)
    with pytest.raises(AssertionError, match=r"(?s)line 1 .*ValueError: broken example"):
        reader.check(python_block)
    with pytest.raises(AssertionError, match=r"line 6 \(sh block\) failed"):
        reader.check(sh_block)
