"""hack/check_links.py: the links of README.md, CONTRIBUTING.md and bench/README.md resolve."""

from __future__ import annotations

from pathlib import Path

import pytest

from hack import check_links


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(check_links, "REPO", tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text(
        "# Guide\n\n## A cluster where Pods really run: `NODE=real`\n\n## Steps\n\n## Steps\n"
        "\n```sh\n# not a heading\n```\n## What we learned, **in short**\n"
    )
    return tmp_path


def check(repo: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    (repo / "README.md").write_text(text)
    rc = check_links.main(["README.md"])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize(
    "link",
    [
        "docs/guide.md",
        "docs/",
        "docs/guide.md#a-cluster-where-pods-really-run-nodereal",
        "docs/guide.md#steps-1",  # a repeated heading gets -1
        "docs/guide.md#what-we-learned-in-short",
        "#readme",  # a heading of the file itself
        "https://example.com/x#y",
    ],
)
def test_links_that_resolve(repo: Path, link: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert check(repo, f"# Readme\n\nSee [it]({link}).\n", capsys) == (0, "")


@pytest.mark.parametrize(
    ("link", "error"),
    [
        ("docs/missing.md", "no such file or folder docs/missing.md"),
        ("docs/guide.md#not-a-heading", "no heading with the anchor #not-a-heading"),
        ("docs/guide.md#steps-2", "no heading with the anchor #steps-2"),
        ("../outside.md", "outside the repository"),
        ("/docs/guide.md", "an absolute path"),
    ],
)
def test_a_broken_link_is_one_line_naming_file_line_and_target(
    repo: Path, link: str, error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, err = check(repo, f"# Readme\n\ntext\n[it]({link})\n", capsys)
    assert rc == 1
    assert err == f"README.md:4: {link}: {error}{err.split(error, 1)[1]}"
    assert err.count("\n") == 1


def test_links_in_code_are_not_links(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "```sh\necho [x](nope.md)\n```\nIn a code span: `[y](nope.md)`.\n"
    assert check(repo, text, capsys) == (0, "")


def test_reference_definitions_are_checked(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, err = check(repo, "[guide][g]\n\n[g]: docs/nope.md\n", capsys)
    assert rc == 1 and "README.md:3: docs/nope.md: no such file" in err


def test_the_repository_files_resolve() -> None:
    names = ("README.md", "CONTRIBUTING.md", "bench/README.md")
    assert check_links.main([str(check_links.REPO / name) for name in names]) == 0
