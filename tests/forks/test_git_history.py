"""git_history on a small local repository (no fork cache, no remote): raw diff parsing, per-commit paths,
commit facts and the trial index, which must ignore a git environment inherited from a hook."""

from __future__ import annotations

import os

import pytest
from gitfixtures import git

from nemo_rl import git as nemo_git_module
from nemo_rl.forks import git_history
from nemo_rl.forks.git_history import ZERO, Change
from nemo_rl.forks.trial_rebase import TrialIndex
from nemo_rl.git import git as nemo_git


def test_parse_raw_reads_status_blobs_and_paths_with_odd_characters():
    out = (":100644 100644 " + "1" * 40 + " " + "2" * 40 + " M\0dir/with space.py\0"
           ":000000 100644 " + ZERO + " " + "3" * 40 + " A\0new\nline\0"
           ":100644 000000 " + "4" * 40 + " " + ZERO + " D\0gone.py\0")
    assert git_history._parse_raw(out) == [
        Change("dir/with space.py", "1" * 40, "2" * 40, "M"), Change("new\nline", ZERO, "3" * 40, "A"),
        Change("gone.py", "4" * 40, ZERO, "D")]
    assert git_history._parse_raw("") == []


def test_changes_are_read_from_trees(history):
    repo, (first, second, third), _ = history
    assert sorted((c.path, c.status) for c in git_history.changes(repo, first)) == [("b.txt", "A"), ("pkg/a.py", "A")]
    [change] = git_history.changes(repo, second)
    blob = git(repo, "rev-parse", f"{second}:pkg/a.py")
    assert (change.path, change.status, change.new_blob) == ("pkg/a.py", "M", blob)
    assert [(c.path, c.status, c.new_blob) for c in git_history.changes(repo, third)] == [("b.txt", "D", ZERO)]
    assert git_history.changes_many(repo, [second, third]) == {
        second: git_history.changes(repo, second), third: git_history.changes(repo, third)}


def test_changes_ignore_the_user_s_log_settings(history, monkeypatch):
    repo, (first, second, third), _ = history
    want = {sha: git_history.changes(repo, sha) for sha in (first, second, third)}
    for key, value in (("log.showRoot", "false"), ("log.diffMerges", "combined")):
        monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
        monkeypatch.setenv("GIT_CONFIG_KEY_0", key)
        monkeypatch.setenv("GIT_CONFIG_VALUE_0", value)
        assert git_history.changes_many(repo, [first, second, third]) == want
        assert {sha: git_history.changes(repo, sha) for sha in want} == want


def test_paths_by_commit_and_commit_facts(history):
    repo, (first, second, third), _ = history
    assert git_history.paths_by_commit(repo, f"{first}..main") == {
        second: frozenset({"pkg/a.py"}), third: frozenset({"b.txt"})}
    facts = git_history.commits(repo, [third, first])
    assert list(facts) == [third, first]
    assert facts[first] == git_history.CommitFacts("Fixture Author <author@fixture.invalid>",
                                                   "2025-05-01T12:00:00+00:00", "add files")


def test_a_complete_repository_misses_no_blob(history):
    repo, shas, _ = history
    assert nemo_git_module.missing_objects(repo, shas) == set()
    assert nemo_git_module.fetch_objects(repo, "origin", set()) == set()  # nothing asked: no request, no remote


def test_the_trial_index_applies_in_order_and_names_conflicts(history, tmp_path, monkeypatch):
    repo, (_, _, third), (side, clean) = history
    # inherited from a git hook: each would point git at another repository, index or object store
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        monkeypatch.setenv(name, str(tmp_path / "elsewhere"))
    trial = TrialIndex(repo, third)
    try:
        assert trial.apply(side) == ["pkg/a.py"]  # main changed a.py too: a conflict, the tree left as it was
        assert trial.apply(clean) == []
        listed = nemo_git(["ls-tree", "-r", "--name-only", trial.tree], repo=repo).stdout.splitlines()
        assert listed == ["pkg/a.py", "pkg/c.py"]
        ours = nemo_git(["rev-parse", f"{trial.tree}:pkg/a.py"], repo=repo).stdout
        assert ours == nemo_git(["rev-parse", f"{third}:pkg/a.py"], repo=repo).stdout
        assert trial.apply(side, resolve=True) == ["pkg/a.py"]  # resolved to the commit's side, and on
        taken = nemo_git(["rev-parse", f"{trial.tree}:pkg/a.py"], repo=repo).stdout
        assert taken == nemo_git(["rev-parse", f"{side}:pkg/a.py"], repo=repo).stdout
        assert trial.index.is_file()  # its own index: the repository's is never touched
        assert nemo_git(["status", "--porcelain"], repo=repo).stdout == ""
    finally:
        trial.close()
    assert not trial.index.exists()


def test_the_trial_index_follows_a_rename_on_either_side_as_a_rebase_does(tmp_path, monkeypatch):
    """A rename on one side and an edit of the file on the other: `git rebase` applies it (the edit lands in the
    renamed file), so the trial says it applies and its tree holds both."""
    from gitfixtures import commit, init

    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    for renamed_by in ("upstream", "the fork"):
        repo = init(tmp_path / renamed_by.replace(" ", "-"))
        base = commit(repo, "base", {"pkg/feature.py": "A = 1\nB = 2\nC = 3\n", "other.txt": "x\n"})
        rename = ["mv", "pkg/feature.py", "pkg/feat.py"]
        if renamed_by == "upstream":
            git(repo, *rename)
            head = commit(repo, "upstream: rename", {})
            git(repo, "checkout", "-q", "-b", "fork", base)
            picked = commit(repo, "fork: edit", {"pkg/feature.py": "A = 1\nB = 20\nC = 3\n"})
        else:
            head = commit(repo, "upstream: edit", {"pkg/feature.py": "A = 1\nB = 20\nC = 3\n"})
            git(repo, "checkout", "-q", "-b", "fork", base)
            git(repo, *rename)
            picked = commit(repo, "fork: rename", {})
        trial = TrialIndex(repo, head)
        try:
            assert trial.apply(picked) == [], renamed_by
            merged = nemo_git(["ls-tree", "-r", "--name-only", trial.tree], repo=repo).stdout.splitlines()
            assert merged == ["other.txt", "pkg/feat.py"], renamed_by
            text = nemo_git(["cat-file", "blob", f"{trial.tree}:pkg/feat.py"], repo=repo).stdout
            assert text == "A = 1\nB = 20\nC = 3\n", renamed_by
        finally:
            trial.close()


def test_a_merge_git_cannot_make_is_an_error_not_a_conflict(history):
    """A blob the merge must read and cannot (a cache that lost an object): said as git's failure with a fix, never
    reported as a conflict or a clean application."""
    import pytest

    from nemo_rl.errors import NemoRLError

    repo, (_, _, third), (side, _) = history
    # both sides changed a.py: the diff stops, and git's merge reads the head's a.py, which is gone
    blob = nemo_git(["rev-parse", f"{third}:pkg/a.py"], repo=repo).stdout.strip()
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    trial = TrialIndex(repo, third)
    try:
        with pytest.raises(NemoRLError) as raised:
            trial.apply(side)
    finally:
        trial.close()
    assert f"could not merge downstream commit {side[:12]}" in raised.value.what
    assert "remove the fork cache" in (raised.value.remedy or "")


def _served_without_a_blob(tmp_path, monkeypatch):
    """A blob-less clone (as the fork cache is) of a server that lacks one blob: upstream's head replaces a.py
    by new.py, whose blob is gone, and the fork edits a.py. (cache, upstream's head, the fork's commit)."""
    from gitfixtures import commit, init

    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    server = init(tmp_path / "server")
    git(server, "config", "uploadpack.allowFilter", "true")
    git(server, "config", "uploadpack.allowAnySHA1InWant", "true")
    base = commit(server, "base", {"pkg/a.py": "A = 1\nB = 2\nC = 3\n"})
    git(server, "rm", "-q", "pkg/a.py")
    head = commit(server, "upstream: a.py out, new.py in", {"pkg/new.py": "A = 1\nB = 2\nC = 3\nD = 4\n"})
    git(server, "checkout", "-q", "-b", "fork", base)
    picked = commit(server, "fork: edit a.py", {"pkg/a.py": "A = 1\nB = 20\nC = 3\n"})
    cache = tmp_path / "cache"
    nemo_git(["clone", "--quiet", "--bare", "--filter=blob:none", "--no-local", f"file://{server}", str(cache)],
             repo=tmp_path)
    lost = git(server, "rev-parse", f"{head}:pkg/new.py")
    (server / ".git" / "objects" / lost[:2] / lost[2:]).unlink()
    return cache, head, picked


def test_a_blob_no_server_has_sends_the_commit_to_its_diff(tmp_path, monkeypatch):
    """A mirror without some large file: git's merge wants that blob (a rename candidate) and no remote serves it,
    so the commit is tried by its own diff, which reads only the files it touches, and is listed as such."""

    cache, head, picked = _served_without_a_blob(tmp_path, monkeypatch)
    trial = TrialIndex(cache, head)
    try:
        assert trial.apply(picked, resolve=True) == ["pkg/a.py"]  # upstream deleted a.py: the diff cannot apply
        assert trial.by_diff == [picked]
        resolved = nemo_git(["ls-tree", "-r", "--name-only", trial.tree], repo=cache).stdout.splitlines()
        assert resolved == ["pkg/a.py", "pkg/new.py"]  # the commit's side taken, by its diff
    finally:
        trial.close()


def _two_sides(repo, base_files, upstream, fork):
    """`base_files` committed, then upstream's and the fork's steps (each a callable on the repository) on their
    own branches: (upstream's head, the fork's commits)."""
    from gitfixtures import commit

    base = commit(repo, "base", base_files)
    upstream(repo)
    head = commit(repo, "upstream", {})  # commits what `upstream` changed
    git(repo, "checkout", "-q", "-b", "fork", base)
    return head, [step(repo) for step in fork]


def test_a_directory_renamed_into_two_is_a_conflict_on_no_one_path(tmp_path, monkeypatch):
    """Upstream splits d/ into e/ and f/, the fork adds d/c: git's rebase stops ("directory rename split") with
    no conflicting file, so the trial says so in git's words."""
    from gitfixtures import commit, init

    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    repo = init(tmp_path / "repo")

    def split(r):
        (r / "e").mkdir()
        (r / "f").mkdir()
        git(r, "mv", "d/a", "e/a")
        git(r, "mv", "d/b", "f/b")

    head, (added,) = _two_sides(repo, {"d/a": "A\n" * 20, "d/b": "B\n" * 20}, split,
                                [lambda r: commit(r, "fork: add d/c", {"d/c": "c\n"})])
    trial = TrialIndex(repo, head)
    try:
        [said] = trial.apply(added)
        assert said.startswith("CONFLICT (directory rename split)")
    finally:
        trial.close()


def test_a_file_and_directory_conflict_names_the_path_not_a_throwaway_commit(tmp_path, monkeypatch):
    """Upstream adds p/q, the fork adds a file p: git moves the file aside as p~<commit>, a commit of the trial's
    own that exists nowhere else; the conflict is named p."""
    from gitfixtures import commit, init, write

    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    repo = init(tmp_path / "repo")
    head, (added,) = _two_sides(repo, {"x": "x\n"}, lambda r: write(r, {"p/q": "q\n"}),
                                [lambda r: commit(r, "fork: file p", {"p": "p\n"})])
    trial = TrialIndex(repo, head)
    try:
        assert trial.apply(added) == ["p"]
    finally:
        trial.close()


def test_conflicts_on_odd_paths_are_resolved_at_those_exact_paths(tmp_path, monkeypatch):
    """A newline, a tab and a byte that is not UTF-8 in conflicting paths: the commit's side lands at the very
    path (output decoded as text would turn the byte into U+FFFD and resolve a file that does not exist)."""
    from gitfixtures import commit, init

    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    repo = init(tmp_path / "repo")
    names = ["new\nline.py", "tab\there.py", os.fsdecode(b"caf\xe9.py")]
    head, (picked,) = _two_sides(repo, {n: "A\nB\nC\n" for n in names},
                                 lambda r: [(r / n).write_text("A\nUP\nC\n") for n in names],
                                 [lambda r: commit(r, "fork", {n: "A\nDOWN\nC\n" for n in names})])
    trial = TrialIndex(repo, head)
    try:
        # named as the report names every path: as the file system does (a byte that is not UTF-8 as U+FFFD)
        assert trial.apply(picked, resolve=True) == sorted(["new\nline.py", "tab\there.py", "caf\ufffd.py"])
        listed = nemo_git(["-c", "core.quotePath=true", "ls-tree", "-r", trial.tree], repo=repo).stdout
        ours = nemo_git(["-c", "core.quotePath=true", "ls-tree", "-r", picked], repo=repo).stdout
        assert listed == ours  # every path the commit's own blob, none added beside it
    finally:
        trial.close()


def test_an_unreachable_server_is_an_error_not_a_blob_it_lacks(tmp_path, monkeypatch):
    """The fork's server answers "not our ref" and upstream's cannot be reached: nothing says the blob is missing
    upstream too, so the trial stops with the reachability fix instead of falling back to a diff."""
    import pytest

    from nemo_rl.errors import NemoRLError

    cache, head, picked = _served_without_a_blob(tmp_path, monkeypatch)
    # a second promisor remote that cannot be reached, as upstream's server offline
    nemo_git(["config", "remote.upstream.url", "https://upstream.nemo-rl.invalid/x.git"], repo=cache)
    nemo_git(["config", "remote.upstream.promisor", "true"], repo=cache)
    trial = TrialIndex(cache, head)
    try:
        with pytest.raises(NemoRLError, match="could not merge downstream commit") as raised:
            trial.apply(picked)
    finally:
        trial.close()
    assert "reachable" in (raised.value.remedy or "") and trial.by_diff == []


def test_a_merge_commit_is_dropped_as_git_rebase_drops_it(tmp_path, monkeypatch):
    """The fork merged upstream's branch once; upstream then changed the same line again. git rebase drops the
    merge (the upstream commits it brought are upstream's already): no conflict, upstream's latest line kept."""
    from gitfixtures import commit, init

    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    repo = init(tmp_path / "repo")
    base = commit(repo, "base", {"x": "a\nb\nc\n", "y": "1\n2\n3\n"})
    middle = commit(repo, "upstream: b -> B1", {"x": "a\nB1\nc\n"})
    head = commit(repo, "upstream: B1 -> B2", {"x": "a\nB2\nc\n"})
    git(repo, "checkout", "-q", "-b", "fork", base)
    edit = commit(repo, "fork: edit y", {"y": "1\nTWO\n3\n"})
    git(repo, "merge", "-q", "--no-edit", middle)
    merge = git(repo, "rev-parse", "HEAD")
    trial = TrialIndex(repo, head)
    try:
        assert [trial.apply(sha, resolve=True) for sha in (edit, merge)] == [[], []]
        assert nemo_git(["cat-file", "blob", f"{trial.tree}:x"], repo=repo).stdout == "a\nB2\nc\n"
        assert nemo_git(["cat-file", "blob", f"{trial.tree}:y"], repo=repo).stdout == "1\nTWO\n3\n"
    finally:
        trial.close()


def test_a_blob_a_server_lacks_is_named_asked_of_the_next_remote_or_written_empty(tmp_path, monkeypatch):
    """fetched_tree and check_out on a mirror without one blob: without another remote it is a placeholder (empty,
    named); a second remote that has it serves it; git.fetch_objects names the refusal only when asked to."""
    import pytest
    from gitfixtures import commit, init

    from nemo_rl.errors import NemoRLError

    cache, head, _ = _served_without_a_blob(tmp_path, monkeypatch)
    lost = nemo_git(["rev-parse", f"{head}:pkg/new.py"], repo=cache).stdout.strip()
    with pytest.raises(NemoRLError, match="does not serve 1 or more of the 1 object"):
        nemo_git_module.fetch_objects(cache, "origin", {lost})
    assert nemo_git_module.fetch_objects(cache, "origin", {lost}, refusals=1) == {lost}
    tree = git_history.fetched_tree(cache, head, ["origin"])
    assert (tree.lacking, tree.placeholders) == (frozenset({lost}), ["pkg/new.py"])
    git_history.check_out(cache, tree, tmp_path / "alone")
    assert (tmp_path / "alone" / "pkg/new.py").read_bytes() == b""
    # clean to git status, as uv's checkout is: a version read from git gets no "dirty" mark for a placeholder
    assert nemo_git(["status", "--porcelain"], repo=tmp_path / "alone").stdout == ""
    # a second server with that file (the same blob) and nothing else: asked for only what the first refused
    other = init(tmp_path / "other")
    commit(other, "the same file", {"pkg/new.py": "A = 1\nB = 2\nC = 3\nD = 4\n"})
    for key, value in (("url", f"file://{other}"), ("promisor", "true"), ("partialclonefilter", "blob:none")):
        nemo_git(["config", f"remote.upstream.{key}", value], repo=cache)
    # on the first server, head's tree plus a file the second lacks, made without reading new.py's lost blob
    server, index = tmp_path / "server", tmp_path / "later.index"
    more = nemo_git(["hash-object", "-w", "--stdin"], repo=server, input_text="M = 1\n").stdout.strip()
    nemo_git(["read-tree", head], repo=server, index_file=index)
    nemo_git(["update-index", "--add", "--cacheinfo", f"100644,{more},pkg/more.py"], repo=server, index_file=index)
    tree_id = nemo_git(["write-tree", "--missing-ok"], repo=server, index_file=index).stdout.strip()
    later = nemo_git(["-c", "user.name=F", "-c", "user.email=f@fixture.invalid", "commit-tree", "-p", head, "-m",
                      "more", tree_id], repo=server).stdout.strip()
    nemo_git(["update-ref", "refs/heads/later", later], repo=server)
    nemo_git(["fetch", "--quiet", "--filter=blob:none", "origin", "+refs/heads/later:refs/later"], repo=cache)
    tree = git_history.fetched_tree(cache, later, ["origin", "upstream"])
    assert (tree.lacking, tree.placeholders) == (frozenset(), [])
    git_history.check_out(cache, tree, tmp_path / "both")
    assert (tmp_path / "both" / "pkg/new.py").read_text() == "A = 1\nB = 2\nC = 3\nD = 4\n"
    assert (tmp_path / "both" / "pkg/more.py").read_text() == "M = 1\n"
    # a git work tree at the commit, as uv builds from: a version read from git (setuptools-scm) is the commit's
    assert nemo_git(["rev-parse", "HEAD"], repo=tmp_path / "both").stdout.strip() == later
    assert nemo_git(["status", "--porcelain"], repo=tmp_path / "both").stdout == ""


def test_a_diff_blob_no_server_has_stops_the_records(tmp_path, monkeypatch):
    """A record needs every diff whole: a blob of a listed commit's diff that the server refuses is an error naming
    the mirror, not a patch-id computed without it."""
    import pytest

    from nemo_rl.errors import NemoRLError

    cache, head, _ = _served_without_a_blob(tmp_path, monkeypatch)
    with pytest.raises(NemoRLError, match="does not serve 1 blob") as refused:
        git_history.fetch_for_diffs(cache, "origin", [head])
    assert "re-sync the mirror" in (refused.value.remedy or "")


def _literal(repo, kind: str, data: bytes) -> str:
    """An object as given, unchecked (a hostile fork's tree: git fsck would refuse it, a server may still hold it)."""
    import subprocess

    return subprocess.run(["git", "-C", str(repo), "hash-object", "--literally", "-w", "-t", kind, "--stdin"],
                          input=data, capture_output=True, check=True).stdout.decode().strip()


def _server_and_cache(tmp_path, monkeypatch, files: dict[str, str]):
    """A server (filters allowed, as GitHub) with one commit of `files`, and a blob-less clone of it: (server,
    cache, the commit)."""
    from gitfixtures import commit, init

    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    server = init(tmp_path / "server")
    git(server, "config", "uploadpack.allowFilter", "true")
    git(server, "config", "uploadpack.allowAnySHA1InWant", "true")
    rev = commit(server, "files", files)
    cache = tmp_path / "cache"
    nemo_git(["clone", "--quiet", "--bare", "--filter=blob:none", "--no-local", f"file://{server}", str(cache)],
             repo=tmp_path)
    return server, cache, rev


def _lose(server, rev: str, path: str) -> str:
    lost = git(server, "rev-parse", f"{rev}:{path}")
    (server / ".git" / "objects" / lost[:2] / lost[2:]).unlink()
    return lost


def test_a_second_remote_that_cannot_be_reached_is_an_error_never_a_kept_placeholder(tmp_path, monkeypatch):
    """The fork's mirror lacks a blob and upstream cannot be asked: a build with that file empty would be kept as
    the commit's answer (its metadata cached) after upstream is back, so the build stops, saying what to do."""
    from nemo_rl.errors import NemoRLError

    server, cache, rev = _server_and_cache(tmp_path, monkeypatch, {"a.txt": "a\n", "big.bin": "B" * 1000})
    _lose(server, rev, "big.bin")
    nemo_git(["remote", "add", "upstream", str(tmp_path / "gone")], repo=cache)
    with pytest.raises(NemoRLError, match="origin's server lacks 1 blob.* and upstream could not be asked") as caught:
        git_history.fetched_tree(cache, rev, ["origin", "upstream"])
    assert "check the network" in (caught.value.remedy or "")


def test_a_submodule_is_an_empty_directory_and_the_checkout_clean(tmp_path, monkeypatch):
    """As git clone leaves a submodule it does not fill: git status calls the tree clean (no version marked
    dirty by a backend that reads it from git)."""
    server, cache, rev = _server_and_cache(tmp_path, monkeypatch, {"a.txt": "a\n"})
    index = tmp_path / "sub.index"
    nemo_git(["read-tree", rev], repo=server, index_file=index)
    nemo_git(["update-index", "--add", "--cacheinfo", f"160000,{rev},mod"], repo=server, index_file=index)
    tree_id = nemo_git(["write-tree"], repo=server, index_file=index).stdout.strip()
    with_sub = nemo_git(["-c", "user.name=F", "-c", "user.email=f@fixture.invalid", "commit-tree", "-p", rev, "-m",
                         "a submodule", tree_id], repo=server).stdout.strip()
    nemo_git(["update-ref", "refs/heads/sub", with_sub], repo=server)
    nemo_git(["fetch", "--quiet", "--filter=blob:none", "origin", "+refs/heads/sub:refs/sub"], repo=cache)
    tree = git_history.fetched_tree(cache, with_sub, ["origin"])
    assert tree.gitlinks == ("mod",)
    git_history.check_out(cache, tree, tmp_path / "src")
    assert (tmp_path / "src" / "mod").is_dir() and not any((tmp_path / "src" / "mod").iterdir())
    assert nemo_git(["status", "--porcelain"], repo=tmp_path / "src").stdout == ""


def test_a_server_lacking_too_many_blobs_is_an_error_naming_the_mirror(tmp_path, monkeypatch):
    """Each refusal costs a request: past REFUSALS_MAX the tree is refused, with what to do."""
    import pytest

    from nemo_rl.errors import NemoRLError

    monkeypatch.setattr(git_history, "REFUSALS_MAX", 2)
    server, cache, rev = _server_and_cache(tmp_path, monkeypatch, {f"f{n}.txt": f"{n}\n" for n in range(4)})
    for n in range(3):
        _lose(server, rev, f"f{n}.txt")
    said = r"remote 'origin' \(file://.*\) does not serve 3 or more of the 4 object"  # the 4 the cache lacks
    with pytest.raises(NemoRLError, match=said) as refused:
        git_history.fetched_tree(cache, rev, ["origin"])
    assert "re-sync that mirror" in (refused.value.remedy or "")
    monkeypatch.setattr(git_history, "REFUSALS_MAX", 3)
    assert git_history.fetched_tree(cache, rev, ["origin"]).placeholders == ["f0.txt", "f1.txt", "f2.txt"]


def test_a_trees_size_counts_every_path_that_shares_a_blob(tmp_path, monkeypatch):
    """The size chooses memory or disk for the checkout: 20 copies of one blob are written 20 times."""
    _, cache, rev = _server_and_cache(tmp_path, monkeypatch, {f"d/copy{n:02}.bin": "x" * 1000 for n in range(20)})
    assert git_history.fetched_tree(cache, rev, ["origin"]).size == 20 * 1000


@pytest.mark.parametrize("link_first", [True, False])
def test_a_placeholder_is_never_written_through_a_link_the_tree_holds(tmp_path, monkeypatch, link_first):
    """A hostile tree: `a` as a link to a directory outside, and `a/b` (a blob nobody has) beside it. The checkout
    is refused and the empty placeholder for a/b never lands in the directory the link names."""
    from nemo_rl.errors import NemoRLError

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "b").write_text("precious\n")
    server, cache, rev = _server_and_cache(tmp_path, monkeypatch, {"pyproject.toml": "[project]\nname = 'x'\n"})

    def entry(mode: str, name: str, oid: str) -> bytes:
        return mode.encode() + b" " + name.encode() + b"\0" + bytes.fromhex(oid)

    link = entry("120000", "a", _literal(server, "blob", str(victim).encode()))
    inner = entry("40000", "a", _literal(server, "tree", entry("100644", "b", "ab" * 20)))  # a blob nobody has
    tree = _literal(server, "tree", (link + inner if link_first else inner + link)
                    + entry("100644", "pyproject.toml", git(server, "rev-parse", f"{rev}:pyproject.toml")))
    evil = git(server, "commit-tree", tree, "-p", rev, "-m", "evil")
    nemo_git(["fetch", "--quiet", "--filter=blob:none", "origin", evil], repo=cache)
    found = git_history.fetched_tree(cache, evil, ["origin"])
    assert found.placeholders == ["a/b"]
    with pytest.raises(NemoRLError):
        git_history.check_out(cache, found, tmp_path / "scratch" / "src")
    assert (victim / "b").read_text() == "precious\n"
    # the write itself, where git left such a link in place: refused, never followed
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "a").symlink_to(victim)
    with pytest.raises(NemoRLError, match="holds a link or a file where a directory belongs"):
        git_history._make(dest, "a/b", directory=False)
    assert (victim / "b").read_text() == "precious\n"
