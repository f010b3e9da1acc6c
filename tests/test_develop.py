"""`deps develop`'s pure parts (deps/develop.py): what `--stop --remove` would lose."""

from __future__ import annotations

from nemo_rl.deps import develop


def test_remove_is_blocked_by_unsaved_work_submodules_and_ignored_files_but_not_bytecode():
    assert develop.removal_blockers([], False, ["pkg/__pycache__/m.cpython-312.pyc", "x.pyc"]) == []
    assert develop.removal_blockers(["1 stash"], True, []) == [
        "1 stash", "submodules (their commits and stashes are not looked at)"]
    ignored = ["data/a", "data/b", ".env", "notes.txt", "pkg/__pycache__/m.pyc"]
    assert develop.removal_blockers([], False, ignored) == ["4 ignored file(s) (data/a, data/b, .env, ...)"]
    assert develop.removal_blockers([], False, ["data/a"]) == ["1 ignored file(s) (data/a)"]
