"""Delete each check once and see a test fail: a hand-made mutation run over the checks of `deps patches --check`,
bump's validation, status's states, what is read from disk, and the worker environments.

    uv run python tests/check_mutations.py            # every mutation
    uv run python tests/check_mutations.py -k digest  # those whose name contains "digest"

Each mutation edits one line of a copy of nemo_rl/ in a temporary directory (the checkout is never changed),
runs the tests that cover it with PYTHONPATH pointing at the copy, and reports "caught" when a test failed.
Not collected by pytest (the file name does not start with test_).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATCHES = "tests/test_deps_patches.py"
STATUS = "tests/test_deps_status.py"
BUMP = "tests/test_deps_bump.py"
DEVELOP = "tests/test_deps_develop.py"
TRUST = "tests/test_trust.py"
GUARDS = "tests/test_guards.py"
RAY = "tests/test_ray_workers.py"
BUNDLES = "tests/test_bundles.py"
UPSTREAM = "tests/test_deps_upstream.py"
HOUSEKEEPING = "tests/test_housekeeping.py"
SIDE = "tests/test_side_by_side.py"
NEVER = "tests/test_never_trusts.py"

# (name, file, original text, mutated text, tests that must catch it)
MUTATIONS = [
    ("offline: index digest", "nemo_rl/forks/records.py", "if index.digest != index.expected_digest():",
     "if False:", PATCHES),
    ("offline: record digest", "nemo_rl/forks/records.py", '("patch-id", record.patch_id),\n                       ("digest", record.digest())',
     '("patch-id", record.patch_id)', PATCHES),
    ("offline: pins vs pyproject", "nemo_rl/forks/records.py", "for key, value in expected.items() if found[key] != value]",
     "for key, value in expected.items() if False]", PATCHES),
    ("offline: lock commit in full", "nemo_rl/forks/records.py", "if locked_commit != fork.rev:",
     "if str(locked_commit)[:7] != fork.rev[:7]:", PATCHES),
    ("offline: entry number (order)", "nemo_rl/forks/records.py", 'if entry.get("number") != position:', "if False:",
     PATCHES),
    ("offline: path inside patches/<dist>/", "nemo_rl/forks/records.py",
     "if not isinstance(record_name, str) or Path(record_name).name != record_name", "if not isinstance(record_name, str)",
     PATCHES),
    ("offline: record file exists", "nemo_rl/forks/records.py", "if not path.is_file():\n        return [*diffs,",
     "if False:\n        return [*diffs,", PATCHES),
    ("offline: stray files", "nemo_rl/forks/records.py", "if path.name not in listed:", "if False:", PATCHES),
    ("offline: why-note", "nemo_rl/forks/records.py", "if require_why and", "if False and", PATCHES),
    ("offline: orphaned records", "nemo_rl/forks/records.py", "for d in sorted(root.iterdir() if root.is_dir() else ()) if d.name not in known]",
     "for d in [] if d.name not in known]", f"{PATCHES} {STATUS}"),
    ("online: index facts", "nemo_rl/forks/records.py", "for key in INDEX_FACTS if expected.facts()[key] != index.facts()[key]]",
     "for key in INDEX_FACTS if False]", PATCHES),
    ("online: record facts", "nemo_rl/forks/records.py", "for key in RECORD_FACTS if found[key] != record.facts()[key]]",
     "for key in RECORD_FACTS if False]", PATCHES),
    ("bump: validation after writing", "nemo_rl/deps/bump.py", "    if problems:\n        raise NemoRLError(\"the bumped",
     "    if False:\n        raise NemoRLError(\"the bumped", BUMP),
    ("bump: read-only refusal", "nemo_rl/project/landing.py", "if path.exists() and (not os.access(path, os.W_OK) or not path.stat().st_mode & 0o200):",
     "if False:", BUMP),
    ("bump: renamed distribution", "nemo_rl/forks/fork_metadata.py", "if isinstance(name, str) and canonicalize_name(name) != canonicalize_name(distribution):",
     "if False:", f"{BUMP} {DEVELOP}"),
    ("bump: landing journal rolls forward", "nemo_rl/project/landing.py", "if (self.path / JOURNAL).exists():", "if False:",
     BUMP),
    ("status: bad pin", "nemo_rl/deps/status.py", "if fork.bad_rev:", "if False:", STATUS),
    ("status: records stale", "nemo_rl/deps/status.py", "    elif problems:\n", "    elif False:\n", STATUS),
    ("status: lock stale", "nemo_rl/deps/status.py", "    elif locked_commit != fork.rev:\n", "    elif False:\n", STATUS),
    ("status: interrupted bump", "nemo_rl/deps/status.py", "    elif interrupted:\n", "    elif False:\n", BUMP),
    ("status: developing (from the environment)", "nemo_rl/deps/status.py", "    elif active:\n", "    elif False:\n",
     f"{DEVELOP} {TRUST}"),
    ("status: develop not applied", "nemo_rl/deps/status.py", "    elif develop_entry:\n", "    elif False:\n", TRUST),
    ("workers: Ray version", "nemo_rl/workers/environments.py", "if ray_there != driver_ray:", "if False:", RAY),
    # issue 15: everything read from disk is data
    ("trust: fork key is a distribution name", "nemo_rl/project/lockfile.py", "    values.distribution_name(dist, where)\n",
     "", TRUST),
    ("trust: rev is a full SHA", "nemo_rl/project/lockfile.py", "        values.full_sha(rev, f\"[tool.uv.sources] {dist}.rev\")",
     "        pass", TRUST),
    ("trust: git URL", "nemo_rl/project/lockfile.py", "        url=values.git_url(_string(", "        url=(lambda u, w: u)(_string(", TRUST),
    ("trust: journal names landable paths only", "nemo_rl/project/landing.py",
     "if not isinstance(moves, list) or not all(_landable(name) for name in moves):", "if not isinstance(moves, list):", TRUST),
    ("trust: leftovers only while no command holds the lock", "nemo_rl/project/landing.py",
     "if not stagings or (not locked and locks.held(project)):", "if not stagings:", TRUST),
    ("trust: bump holds the project lock", "nemo_rl/deps/bump.py", "    with landing.project_lock(project, wait=not args.no_wait):\n        return bump(project, args)",
     "    return bump(project, args)", TRUST),
    ("trust: develop state entries typed", "nemo_rl/project/develop_state.py",
     "    if not isinstance(envs, list) or not all(isinstance(e, str) and os.path.isabs(e) for e in envs):", "    if False:", TRUST),
    ("trust: --remove only under .nemo-rl/develop", "nemo_rl/deps/develop.py",
     "if not entry.managed or checkout.resolve() != develop_state.managed_checkout(project, entry.distribution):",
     "if not entry.managed:", TRUST),
    ("trust: untracked files are work", "nemo_rl/git.py", '    if any(line.startswith("??") for line in status):', "    if False:", TRUST),
    ("trust: stashes are work", "nemo_rl/git.py", "    if stashes:", "    if False:", TRUST),
    ("trust: unpushed commits are work", "nemo_rl/git.py", "    if local.returncode == 0 and int(local.stdout.strip() or 0):",
     "    if False:", TRUST),
    ("trust: rev on the recorded branch", "nemo_rl/deps/bump.py", "    if not git.is_ancestor(repo, new_rev, head):", "    if False:",
     f"{TRUST} {DEVELOP}"),
    ("trust: upstream commit is not a fork commit", "nemo_rl/forks/fork_cache.py",
     "        if not git.is_ancestor(repo, sha, fetch_branch(repo, fork, fork.branch)):", "        if False:", TRUST),
    ("trust: subject keeps its leading spaces", "nemo_rl/forks/record_files.py",
     'fields[key] = value[1:] if value.startswith(" ") else value', "fields[key] = value.strip()", TRUST),
    ("trust: ~ in NEMO_RL_CACHE_DIR", "nemo_rl/settings.py", "    path = Path(os.path.expanduser(setting)) if setting else default",
     "    path = Path(setting) if setting else default", TRUST),
    # checks an earlier review found unguarded
    ("guard: PR_SET_PDEATHSIG", "nemo_rl/process.py", "        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)", "        pass", GUARDS),
    ("guard: inherited GIT_DIR dropped", "nemo_rl/git.py", "    env = {k: v for k, v in os.environ.items() if k not in _MISLEADING}",
     "    env = dict(os.environ)", GUARDS),
    ("guard: notes follow a rebased commit", "nemo_rl/forks/records.py", "else old_notes_by_patch_id.get(r.patch_id, \"\")", "else \"\"",
     GUARDS),
    ("guard: drift's changed", "nemo_rl/forks/fork_metadata.py", "               if old.requires[n] != new.requires[n]]", "               if False]",
     GUARDS),
    ("guard: drift leaves out extras", "nemo_rl/forks/fork_metadata.py", '        if req.marker and "extra" in str(req.marker):', "        if False:",
     GUARDS),
    ("guard: verify --locked", "nemo_rl/deps/verify.py", 'flags = ["--locked", "--extra", extra', 'flags = ["--extra", extra', GUARDS),
    ("guard: doctor's developing", "nemo_rl/doctor/report.py", '        if checkout and state in ("ok", "env stale"):', "        if False:",
     GUARDS),
    # issue 16: worker environments that never lie
    ("workers: fork commit checked", "nemo_rl/workers/environments.py", "            if mismatch:\n", "            if False:\n", RAY),
    ("workers: Python version checked", "nemo_rl/workers/environments.py", "    if result.python != platform.python_version():",
     "    if False:", RAY),
    ("workers: Python version in the key", "nemo_rl/workers/environments.py", '"python": platform.python_version(), "platform"',
     '"platform"', RAY),
    ("workers: project in the key", "nemo_rl/workers/environments.py", '    facts = {"project": str(project.resolve()), "lock"',
     '    facts = {"lock"', RAY),
    ("workers: prune's in-use check", "nemo_rl/workers/housekeeping.py",
     "            if not free or users(row.path):", "            if not free:", RAY),
    ("workers: in use through the command line", "nemo_rl/workers/housekeeping.py",
     '    if any(arg == prefix or arg.startswith(inside[1]) for arg in _read(f"/proc/{pid}/cmdline").split("\\0")):',
     "    if False:", HOUSEKEEPING),
    ("workers: in use through VIRTUAL_ENV", "nemo_rl/workers/housekeeping.py",
     '    if f"\\0VIRTUAL_ENV={prefix}\\0" in "\\0" + _read(f"/proc/{pid}/environ"):', "    if False:", HOUSEKEEPING),
    ("workers: in use through a mapped file", "nemo_rl/workers/housekeeping.py",
     '    return any(line.split(maxsplit=5)[-1].startswith(inside[1])', "    return False and any(line.split(maxsplit=5)[-1].startswith(inside[1])",
     HOUSEKEEPING),
    ("workers: import check", "nemo_rl/workers/environments.py", '    problems = [f"import {module} fails: {error}" for module, error in result.failed.items()]',
     "    problems = []", RAY),
    # issue 18: bundles
    ("bundles: inputs compared before installing", "nemo_rl/workers/bundles.py", "    different = differences(manifest, inputs_for(project, flags))\n    if different:",
     "    different = differences(manifest, inputs_for(project, flags))\n    if False:", BUNDLES),
    ("bundles: content against the digest", "nemo_rl/workers/bundles.py", "    if (files, total, digest) != (manifest.files, manifest.bytes, manifest.digest):",
     "    if False:", BUNDLES),
    ("bundles: links to directories in the digest", "nemo_rl/workers/bundles.py", "        links = [name for name in dirnames if (Path(dirpath) / name).is_symlink()]",
     "        links = []", BUNDLES),
    ("bundles: an unfinished pack is no bundle", "nemo_rl/workers/bundles.py", '    if ".packing-" in bundle.name:', "    if False:", BUNDLES),
    ("bundles: a live node build's cache is kept", "nemo_rl/workers/housekeeping.py", "            if not locks.held(row.path):  # its builder was killed", "            if True:", HOUSEKEEPING),
    ("bundles: dead packs removed", "nemo_rl/workers/bundles.py", "            shutil.rmtree(leftover, ignore_errors=True)", "            pass", BUNDLES),
    ("bundles: hidden directories are not bundles", "nemo_rl/workers/bundles.py", 'if not p.name.startswith(".") and (p / MANIFEST).is_file())',
     "if (p / MANIFEST).is_file())", BUNDLES),
    ("bundles: no pack while developing", "nemo_rl/workers/bundles.py", "    if develop_state.read(project):\n", "    if False:\n", BUNDLES),
    ("bundles: the bundle is never written", "nemo_rl/workers/bundles.py", "                _link_tree(bucket, work / bucket.name)",
     "                os.symlink(bucket.resolve(), work / bucket.name)", BUNDLES),
    ("bundles: transformer-engine pre-flight", "nemo_rl/workers/bundles.py", "        if unbuildable:\n", "        if False:\n", BUNDLES),
    # issue 19: deps upstream
    ("upstream: same patch-id", "nemo_rl/forks/upstream_report.py", '        if ours[sha] != "0" * 40 and ours[sha] in by_id:', "        if False:", UPSTREAM),
    ("upstream: subject and author", "nemo_rl/forks/upstream_report.py", "        elif subjects[sha] in upstream_subjects:", "        elif False:", UPSTREAM),
    ("upstream: a conflict is a conflict", "nemo_rl/forks/git_history.py", "        if result.returncode == 0 and not unmerged:", "        if True:", UPSTREAM),
    ("upstream: deleted upstream", "nemo_rl/forks/upstream_report.py", "    missing = {p: blob for p, blob in at_base.items() if p not in at_head}",
     "    missing = {}", UPSTREAM),
    ("upstream: shipped from the wheel", "nemo_rl/forks/upstream_report.py", '        if path in wheel or "/".join(parts[1:]) in wheel:', "        if True:", UPSTREAM),
    ("upstream: identical shipped trees", "nemo_rl/forks/upstream_report.py", "    return not _shipped([p for p in changed if p], wheel)", "    return False", UPSTREAM),
    ("upstream: a stop without a conflict is said", "nemo_rl/git.py", '    if rebasing(repo) and git(["diff", "--name-only", "--diff-filter=U"], repo=repo).stdout.strip():',
     "    if rebasing(repo):", UPSTREAM),
    ("upstream: placeholders for what a server lacks", "nemo_rl/forks/git_history.py", "            missing |= refused", "            break", UPSTREAM),
    ("develop: the overlay exposes what the pin ships", "nemo_rl/project/develop_state.py", 'sys.path.insert(0, {str(shadow)!r})', 'sys.path.insert(0, {str(checkout)!r})', TRUST),
    ("workers: a start failure names its cause", "nemo_rl/workers/ray_actors.py", "            if errors:\n                cause = errors[0]",
     "            if errors:\n                pass", RAY),
    ("workers: killed builds removed", "nemo_rl/workers/environments.py", "            shutil.rmtree(leftover, ignore_errors=True)", "            pass", RAY),
    ("bump: offline lock kept only when just the SHA moved", "nemo_rl/deps/bump.py",
     'if (staged / "uv.lock").read_text() == before.replace(fork.rev, new_rev):', "if True:", SIDE),
    ("bump: goes on when the old pin is gone", "nemo_rl/deps/bump.py",
     "    try:\n        fork_cache.fetched(fork, fork.rev)\n        return True\n    except NemoRLError:\n        return False",
     "    fork_cache.fetched(fork, fork.rev)\n    return True", BUMP),
    ("background: leaving by an exception cancels the work", "nemo_rl/process.py",
     "        if exc is not None:\n            self.cancel()\n        else:\n            self.result()",
     "        self.result()", SIDE),
    ("fork cache: threads of one command take turns quietly", "nemo_rl/forks/fork_cache.py", "    with in_process:\n",
     "    with contextlib.nullcontext():\n", SIDE),
    ("metadata: a moved checkout is cleaned", "nemo_rl/forks/fork_metadata.py",
     '            git.git(["clean", "-ffdxq"], repo=source)\n', "", SIDE),
    ("scratch: memory only with room", "nemo_rl/forks/scratch.py", "free.f_bavail * free.f_frsize >= size_hint + MARGIN",
     "True", SIDE),
    ("scratch: TMPDIR wins", "nemo_rl/forks/scratch.py", 'if size_hint is not None and not os.environ.get("TMPDIR"):',
     "if size_hint is not None:", SIDE),
    ("scratch: a live one is kept", "nemo_rl/forks/scratch.py", " and not locks.held(entry)", "", SIDE),
    ("scratch: a young one is kept", "nemo_rl/forks/scratch.py", "now - info.st_mtime > ABANDONED_AFTER_S and ", "", SIDE),
    ("workers: uv-run detection off", "nemo_rl/workers/ray_actors.py", "ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = False",
     "pass", "tests/test_ray_workers.py"),
    # issue 24: never trusts (paths, links, state files, caches)
    ("never: no control character in a .pth", "nemo_rl/project/develop_state.py",
     '    values.plain_path(checkout, "the develop checkout")\n', "", NEVER),
    ("never: no control character in a worker env path", "nemo_rl/workers/environments.py",
     '    values.plain_path(staging, "the worker environment directory")\n', "", NEVER),
    ("never: lock files opened without following links", "nemo_rl/locks.py",
     "os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC", "os.O_RDWR | os.O_CREAT | os.O_CLOEXEC", NEVER),
    ("never: lock files are plain, one link", "nemo_rl/locks.py",
     "if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:", "if not stat.S_ISREG(info.st_mode):", NEVER),
    ("never: --onto fetches into a user's clone by URL", "nemo_rl/deps/develop.py",
     "    if entry.managed and git.remote_url(entry.checkout, \"upstream\"):", "    if True:", NEVER),
    ("never: --onto refuses a tree or blob", "nemo_rl/deps/develop.py", '    if kind != "commit":', "    if False:", NEVER),
    ("never: recover checks what it moves", "nemo_rl/project/landing.py",
     "        if (staging / name).exists() or (staging / name).is_symlink():\n            _check_staged(staging, name)",
     "        if False:\n            _check_staged(staging, name)", NEVER),
    ("never: renames probed before staging", "nemo_rl/project/landing.py",
     "        if inside:\n            require_renames(project)\n", "", NEVER),
    ("never: recover lands across filesystems", "nemo_rl/project/landing.py",
     "        if exc.errno != errno.EXDEV:\n            raise\n        if target.is_dir()",
     "        raise\n        if target.is_dir()", NEVER),
    ("never: developing only while the overlay is live", "nemo_rl/project/develop_state.py",
     "                if live and not _puts_first(lines[1:]):", "                if False:", NEVER),
    ("never: --stop only in this checkout's worker envs", "nemo_rl/deps/develop.py",
     "        if env is not None and env.project == project.resolve():", "        if env is not None:", NEVER),
    ("never: ignored files are work", "nemo_rl/deps/develop.py", "        if ignored:\n            unsaved.append",
     "        if False:\n            unsaved.append", NEVER),
    ("never: ENOLCK is the user's to fix", "nemo_rl/locks.py",
     "        if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP):\n            raise", "        if True:\n            raise",
     NEVER),
    ("never: deeply nested state JSON", "nemo_rl/values.py", "    except RecursionError as exc:",
     "    except ZeroDivisionError as exc:", NEVER),
    ("never: no link out of a bundle", "nemo_rl/workers/bundles.py",
     '        if os.path.isabs(target) or landing == ".." or landing.startswith("../"):', "        if False:", NEVER),
    ("never: no foreign hard link in a bundle", "nemo_rl/workers/bundle_trust.py",
     "            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1 + _our_links(root, dirpath, name, info, work_caches):",
     "            if False:", NEVER),
    ("never: a node build's own links are the bundle's", "nemo_rl/workers/bundle_trust.py",
     "        count += (other.st_ino, other.st_dev) == (info.st_ino, info.st_dev)", "        pass", NEVER),
    ("never: the pinned digest", "nemo_rl/workers/bundles.py", "    if trusted and manifest.digest not in trusted:\n        where",
     "    if False:\n        where", NEVER),
    ("never: the pinned digests choose among configured bundles", "nemo_rl/workers/bundles.py",
     "        if trusted and manifest.digest not in trusted:\n            different.append",
     "        if False:\n            different.append", NEVER),
    ("never: the node's copy is checked", "nemo_rl/workers/bundles.py", "        check_copy(work, bundle, manifest)\n", "", NEVER),
    ("never: only files nobody else writes are linked", "nemo_rl/workers/bundles.py",
     "        if info.st_uid == euid and not info.st_mode & 0o022:", "        if True:", NEVER),
    ("never: the environment gets copies", "nemo_rl/workers/bundles.py", '"UV_LINK_MODE": "copy"})',
     '"UV_LINK_MODE": "hardlink"})', NEVER),
    ("never: a working cache of its own", "nemo_rl/workers/bundles.py",
     "    work = Path(tempfile.mkdtemp(prefix=WORK_CACHE_PREFIX, dir=root))",
     '    work = root / f"{WORK_CACHE_PREFIX}{os.getpid()}"\n    shutil.rmtree(work, ignore_errors=True)\n    work.mkdir()',
     NEVER),
    ("never: a broken bundle is skipped", "nemo_rl/workers/bundles.py",
     "        except NemoRLError as exc:  # one broken bundle never hides the good ones", "        except ZeroDivisionError as exc:",
     NEVER),
    ("never: an empty NEMO_RL_BUNDLE_DIR is no network", "nemo_rl/workers/bundles.py",
     '        if os.environ.get("NEMO_RL_BUNDLE_DIR"):  # a shared mount', "        if False:  # a shared mount", NEVER),
    ("never: killed packs of any name", "nemo_rl/workers/bundles.py", 'root.glob(".*.packing-*")', 'root.glob(".x.packing-*")',
     NEVER),
    ("never: prune removes killed packs", "nemo_rl/workers/housekeeping.py", "    return removed + _prune_packs()",
     "    return removed", NEVER),
    ("never: one pack per destination", "nemo_rl/workers/bundles.py", "        if not locks.acquire(claim, None):",
     "        if False:", NEVER),
    ("never: a cached proof of a new pin is asked again", "nemo_rl/forks/fork_cache.py",
     "        if git.served(fork.url, sha) is False and not (", "        if False and not (", NEVER),
    ("never: a timeout above zero", "nemo_rl/values.py", "not math.isfinite(value) or value <= 0:",
     "not math.isfinite(value):", NEVER),
    ("never: --onto a missing upstream branch", "nemo_rl/deps/develop.py",
     '        if git.ls_remote(fork.upstream_url, f"refs/heads/{branch}") is None:', "        if False:", NEVER),
    ("never: --onto during a rebase", "nemo_rl/deps/develop.py", "    if git.rebasing(checkout):  #", "    if False:  #", NEVER),
    ("never: --remove needs the checkout's own git", "nemo_rl/deps/develop.py",
     "        if git.toplevel(checkout) != checkout.resolve():", "        if False:", NEVER),
    ("never: pack into an unwritable place", "nemo_rl/workers/bundles.py",
     "    except OSError as exc:\n        raise NemoRLError(f\"cannot pack into", "    except ZeroDivisionError as exc:\n        raise NemoRLError(f\"cannot pack into", NEVER),
]


def run_one(name: str, file: str, original: str, mutated: str, tests: str) -> str:
    with tempfile.TemporaryDirectory(prefix="nemo-rl-mutation-") as tmp:
        copy = Path(tmp) / "repo"
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".git", "venvs", ".nemo-rl",
                                                                   "benchmark-results", "__pycache__"))
        target = copy / file
        text = target.read_text()
        if text.count(original) != 1:
            return f"NOT APPLIED (the original text occurs {text.count(original)} times)"
        target.write_text(text.replace(original, mutated))
        env = {**os.environ, "PYTHONPATH": str(copy)}
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests.split()],
                                cwd=copy, env=env, capture_output=True, text=True)
        return "caught" if result.returncode == 1 else f"SURVIVED (pytest exit {result.returncode})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", default="", help="only mutations whose name contains this")
    args = parser.parse_args()
    survived = 0
    print("| check removed | tests | result |\n|---|---|---|")
    for name, file, original, mutated, tests in MUTATIONS:
        if args.k not in name:
            continue
        outcome = run_one(name, file, original, mutated, tests)
        survived += outcome != "caught"
        print(f"| {name} | {tests} | {outcome} |", flush=True)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
