"""Delete each check once and see a test fail: a hand-made mutation run over the checks of `deps patches --check`,
bump's validation, status's states, what is read from disk, and the worker environments.

    uv run python tests/check_mutations.py                     # every mutation
    uv run python tests/check_mutations.py -k digest           # those whose name contains "digest"
    uv run python tests/check_mutations.py -k digest -k lock   # ... "digest" or "lock"
    uv run python tests/check_mutations.py --jobs 2            # two at a time (the Ray and signal ones alone)

Each mutation edits one place in a copy of the checkout in a temporary directory (the checkout is never changed)
and runs the tests that cover it with PYTHONPATH pointing at the copy. A mutation is

- caught: a test failed in its own body (an assertion, or an error the test raised), failed again when run
  alone with the mutation, and passes alone once the mutation is undone;
- flaky: that test fails without the mutation too, or passes alone with it (it is named; nothing is counted);
- inconclusive: the run proved nothing: setup or teardown errors, a collection error, a timeout (the run's, or a
  test failing on one), a crash without a report, or no test that ran. Such a run is made once more, then listed;
- survived: every test ran and passed.

The verdict comes from pytest's junit-xml report, which tells failures (the test body) from errors (fixtures,
collection). Each run stops at the first failing test body but goes on past errors (tests/mutation_verdicts.py
holds the verdicts and that pytest plugin). Not collected by pytest (the file name does not start with test_).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from mutation_verdicts import Run, classify, judge, twice

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
INTERRUPTS = "tests/test_interrupts.py"
CUDA = "tests/test_cudakit.py"
ARCHS = "tests/test_cuda_archs.py"  # its nvcc tests run with CUDA_HOME naming a CUDA 12 toolkit
SEED = "tests/test_pack_seed.py"
LIBS = "tests/test_cuda_libs.py"
DECLARED = "tests/test_declared.py"
DERIVED = "tests/test_deps_declared.py"
SEQUENCE = "tests/test_lock_sequence.py"
INSTALLED_FORK = "nemo_rl/forks/installed_fork.py"
SCRATCH = "tests/test_scratch.py"
NEVER = "tests/test_never_trusts.py"
REVIEW = "tests/test_never_trusts_review.py"
PLAIN = "tests/test_plain_files.py"

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
    ("status: bad pin", "nemo_rl/deps/status.py", "bad_pin=bool(fork.bad_rev)", "bad_pin=False", STATUS),
    ("status: records stale", "nemo_rl/deps/status.py", "records_stale=bool(problems)", "records_stale=False", STATUS),
    ("status: lock stale", "nemo_rl/deps/status.py", "lock_stale=locked_commit != fork.rev", "lock_stale=False",
     STATUS),
    ("status: interrupted landing", "nemo_rl/deps/status.py", "interrupted=cut is not None,", "interrupted=False,", BUMP),
    ("status: developing (from the environment)", "nemo_rl/deps/status.py", "developing=bool(active)", "developing=False",
     f"{DEVELOP} {TRUST}"),
    ("status: develop not applied", "nemo_rl/deps/status.py", "develop_recorded=bool(develop_entry)",
     "develop_recorded=False", TRUST),
    ("workers: Ray version", "nemo_rl/workers/environments.py", "if ray_there != driver_ray:", "if False:", RAY),
    # issue 15: everything read from disk is data
    ("trust: fork key is a distribution name", "nemo_rl/project/lockfile.py", "    values.distribution_name(dist, where)\n",
     "", TRUST),
    ("trust: rev is a full SHA", "nemo_rl/project/lockfile.py", "        values.full_sha(rev, f\"[tool.uv.sources] {dist}.rev\")",
     "        pass", TRUST),
    ("trust: git URL", "nemo_rl/project/lockfile.py", "        url=values.git_url(_string(", "        url=(lambda u, w: u)(_string(", TRUST),
    ("trust: journal names landable paths only", "nemo_rl/project/landing.py",
     "            or not all(_landable(name) for name in moves)):", "            or False):", TRUST),
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
    ("guard: the watchdog ends a killed command's groups", "nemo_rl/process.py", "            os.killpg(group, signum)\n        except OSError:\n            pass\n\"\"\"",
     "            pass\n        except OSError:\n            pass\n\"\"\"", GUARDS),
    ("guard: inherited GIT_DIR dropped", "nemo_rl/git.py", "    env = {k: v for k, v in os.environ.items() if k not in _MISLEADING}",
     "    env = dict(os.environ)", GUARDS),
    ("guard: notes follow a rebased commit", "nemo_rl/forks/records.py", "else old_notes_by_patch_id.get(r.patch_id, \"\")", "else \"\"",
     GUARDS),
    ("guard: drift's changed", "nemo_rl/forks/fork_metadata.py", "               if old.requires[n] != new.requires[n]]", "               if False]",
     GUARDS),
    ("guard: drift leaves out extras", "nemo_rl/forks/fork_metadata.py", '        if req.marker and "extra" in str(req.marker):', "        if False:",
     GUARDS),
    ("guard: verify --locked", "nemo_rl/deps/verify.py", 'flags = ["--locked", "--extra", extra', 'flags = ["--extra", extra', GUARDS),
    ("guard: doctor's developing", "nemo_rl/doctor/report.py", '        if checkout and state in ("ok", "env stale", "installed differs"):', "        if False:",
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
    ("bundles: inputs compared before installing", "nemo_rl/workers/bundles.py", "    different = differences(manifest, inputs_for(project, flags), project)\n    if different:",
     "    different = differences(manifest, inputs_for(project, flags), project)\n    if False:", BUNDLES),
    ("bundles: content against the digest", "nemo_rl/workers/bundles.py", "    if (files, total, digest) != (manifest.files, manifest.bytes, manifest.digest):",
     "    if False:", BUNDLES),
    ("bundles: links to directories in the digest", "nemo_rl/workers/bundles.py", "        links = [name for name in dirnames if (Path(dirpath) / name).is_symlink()]",
     "        links = []", BUNDLES),
    ("bundles: an unfinished pack is no bundle", "nemo_rl/workers/manifests.py", '    if ".packing-" in bundle.name:', "    if False:", BUNDLES),
    ("bundles: a live node build's cache is kept", "nemo_rl/workers/housekeeping.py", "            if not locks.held(row.path):  # its builder was killed", "            if True:", HOUSEKEEPING),
    ("bundles: dead packs removed", "nemo_rl/workers/bundles.py", "            shutil.rmtree(leftover, ignore_errors=True)", "            pass", BUNDLES),
    ("bundles: hidden directories are not bundles", "nemo_rl/workers/bundles.py", 'if not p.name.startswith(".") and (p / MANIFEST).is_file())',
     "if (p / MANIFEST).is_file())", BUNDLES),
    ("bundles: no pack while developing", "nemo_rl/workers/bundles.py", "    if develop_state.read(project):\n", "    if False:\n", BUNDLES),
    ("bundles: the bundle is never written", "nemo_rl/workers/bundles.py", "                linked += _link_tree(bucket, cache / bucket.name)",
     "                os.symlink(bucket.resolve(), cache / bucket.name)", BUNDLES),
    ("bundles: transformer-engine pre-flight", "nemo_rl/workers/bundles.py", "        if unbuildable:\n", "        if False:\n", BUNDLES),
    # issue 28: nodes with only the checkout, verification recorded
    ("node: the node path imports on the standard library alone", "nemo_rl/workers/environments.py",
     "from nemo_rl.errors import NemoRLError\n", "from nemo_rl.errors import NemoRLError\nfrom nemo_rl.forks import installed_fork\n",
     "tests/test_node_path.py"),
    ("verified: the record is used", "nemo_rl/workers/environments.py", "        if not verified.still_verified(env.path, project):",
     "        if True:", f"{RAY} -k checked_again_only"),
    ("verified: directories in the state", "nemo_rl/workers/environments.py", "    verified.write(env.path, project, result.python, ray_there, modules, watched,",
     "    verified.write(env.path, project, result.python, ray_there, modules, [],", f"{RAY} -k checked_again_only"),
    ("verified: loaded files in the state", "nemo_rl/workers/environments.py", "verified.inside(env.path, [*result.files, *metadata]), before)",
     "verified.inside(env.path, []), before)", f"{RAY} -k checked_again_only"),
    ("verified: nothing recorded when the state moved during the check", "nemo_rl/workers/environments.py",
     "    before = verified.snapshot(env.path, watched)", "    before = None", f"{RAY} -k checked_again_only"),
    ("verified: state compared", "nemo_rl/workers/verified.py", "    if held is None or held != record.state:",
     "    if False:", f"{RAY} -k checked_again_only"),
    ("verified: uv.lock compared", "nemo_rl/workers/verified.py", "    if record.lock_hash != lockfile.lock_hash(project):",
     "    if False:", f"{RAY} -k checked_again_only"),
    ("verified: driver's Python and Ray compared", "nemo_rl/workers/verified.py",
     "    if record.python != platform.python_version() or record.ray != driver_ray(sys.prefix):", "    if False:",
     f"{RAY} -k checked_again_only"),
    ("verified: record's shape", "nemo_rl/workers/verified.py", "            return None\n        return Record(",
     "            pass\n        return Record(", f"{RAY} -k checked_again_only"),
    ("bundles: a changed uv.lock names what moved", "nemo_rl/workers/manifests.py",
     '        moved = moved_packages(manifest, project) if field == "lock_hash" and project is not None else None',
     "        moved = None", f"{BUNDLES} -k moved"),
    ("manifest: distributions checked", "nemo_rl/workers/manifests.py", '_distributions_field(data["distributions"])',
     'dict(data["distributions"])', f"{BUNDLES} -k own_fields"),
    ("manifest: created checked", "nemo_rl/workers/manifests.py", '_created_field(data["created"])', 'float(data["created"])',
     f"{BUNDLES} -k own_fields"),
    ("manifest: counts checked", "nemo_rl/workers/manifests.py", '_count_field(data["files"], "files")', 'int(data["files"])',
     f"{BUNDLES} -k own_fields"),
    ("manifest: proven checked", "nemo_rl/workers/manifests.py", '        raise ValueError("proven is not',
     '        return Proven((), ()) or ValueError("proven is not', f"{BUNDLES} -k own_fields"),
    ("bundles: the node makes the checkout's .venv", "nemo_rl/envs/command.py",
     "        if args.bundle is not None and _without_driver(project):", "        if False:", f"{BUNDLES} -k node_with_only"),
    # issue 19: deps upstream
    ("upstream: same patch-id", "nemo_rl/forks/upstream_report.py", '        if ours[sha] != "0" * 40 and ours[sha] in by_id:', "        if False:", UPSTREAM),
    ("upstream: subject and author", "nemo_rl/forks/upstream_report.py", "        elif subjects[sha] in upstream_subjects:", "        elif False:", UPSTREAM),
    ("upstream: a conflict is a conflict", "nemo_rl/forks/git_history.py", "        return result.returncode == 0 and not self._unmerged()", "        return True", UPSTREAM),
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
     "    if offline == expected:\n        return None", "    return None", SIDE),
    ("bump: goes on when the old pin is gone", "nemo_rl/deps/bump.py",
     "    try:\n        fork_cache.fetched(fork, fork.rev)\n        return True\n    except NemoRLError:\n        return False",
     "    fork_cache.fetched(fork, fork.rev)\n    return True", BUMP),
    ("interrupt: the handler records the signal", "nemo_rl/interrupt.py", "    if not _received:\n        _received.append(signum)",
     "    pass", INTERRUPTS),
    ("interrupt: a wait for a child looks at the flag", "nemo_rl/process.py", "        interrupt.check()\n        if self._deadline is None:",
     "        if self._deadline is None:", INTERRUPTS),
    ("interrupt: a wait for a lock looks at the flag", "nemo_rl/locks.py", "    while True:\n        interrupt.check()\n",
     "    while True:\n", INTERRUPTS),
    ("interrupt: a signal before the verb stops it", "nemo_rl/cli.py", "        interrupt.check()  # a signal while the verbs were imported\n",
     "", INTERRUPTS),
    ("interrupt: a signal after the last checkpoint is an interruption", "nemo_rl/cli.py",
     "        interrupt.check()  # a signal that came after the last checkpoint", "        pass  #", INTERRUPTS),
    ("interrupt: a landing is recorded as complete", "nemo_rl/project/landing.py", "    interrupt.completed(", "    (lambda step: None)(",
     INTERRUPTS),
    ("pipe: a reader that left does not abandon the work", "nemo_rl/__main__.py", "            if exc.errno not in (errno.EPIPE, errno.EIO):",
     "            if True:", INTERRUPTS),
    ("interrupt: a child dead of the same signal is an interruption", "nemo_rl/process.py",
     "            interrupt.check()  # a child that died of the very signal", "            pass  #", INTERRUPTS),
    ("interrupt: an error after a signal exits as interrupted", "nemo_rl/cli.py",
     "        if (signum := interrupt.received()) is not None:  # a child died",
     "        if False and (signum := interrupt.received()) is not None:  # a child died", INTERRUPTS),
    ("interrupt: no landing starts after a signal", "nemo_rl/project/landing.py",
     "        interrupt.check()  # the last point at which nothing has changed\n", "", INTERRUPTS),
    ("interrupt: the forced exit is armed", "nemo_rl/interrupt.py", "    signal.alarm(FORCE_AFTER_S)", "    pass", INTERRUPTS),
    ("interrupt: a second signal ends at once", "nemo_rl/interrupt.py",
     "    if _received:  # a second signal: the user insists\n        _force(signum, frame)\n", "", INTERRUPTS),
    ("interrupt: nohup's ignored SIGHUP stays ignored", "nemo_rl/interrupt.py",
     "        if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:\n            continue\n", "", INTERRUPTS),
    ("process: children in a session of their own", "nemo_rl/process.py", "            start_new_session=True,\n",
     "            process_group=0,\n", INTERRUPTS),
    ("process: a collected child is never signalled", "nemo_rl/process.py",
     "        if self._result is None:\n            _end_groups", "        if True:\n            _end_groups", INTERRUPTS),
    ("process: a boolean timeout is refused", "nemo_rl/values.py", "    if not isinstance(value, bool) and isinstance(", "    if isinstance(", INTERRUPTS),
    ("process: a streaming child's stderr passes through", "nemo_rl/process.py", "                        _to_stderr(chunk)",
     "                        pass", INTERRUPTS),
    ("pipe: a closed stderr at start-up gets /dev/null", "nemo_rl/__main__.py",
     "            os.dup2(os.open(os.devnull, os.O_RDWR), fd)", "            pass", INTERRUPTS),
    ("fork cache: a killed git's lock files are removed", "nemo_rl/forks/fork_cache.py",
     "        _remove_stale_git_locks(repo)\n", "", INTERRUPTS),
    ("interrupt: signals blocked once the command returned", "nemo_rl/__main__.py",
     "    late = sorted(set(signal.sigpending()) & set(interrupt.SIGNALS))", "    late = []", INTERRUPTS),
    ("interrupt: a late signal is answered", "nemo_rl/cli.py",
     "    return code if signum is None or code == 128 + signum else _interrupted(signum)", "    return code", INTERRUPTS),
    ("archs: a crafted extension is an error, not a crash", "nemo_rl/workers/cuda_archs.py",
     "    except (ValueError, struct.error, OverflowError, MemoryError) as exc:", "    except NotImplementedError as exc:",
     ARCHS),
    ("libs: CUDA_HOME is not walked", "nemo_rl/cuda_libs.py", '    places = ("lib64", "lib", ',
     '    places = ("*/*", "lib64", "lib", ', LIBS),
    ("values: a SHA ends at the end, not before a newline", "nemo_rl/values.py", '{40}\\Z")', '{40}$")',
     "tests/test_values.py -k final_newline"),
    ("values: a name ends at the end", "nemo_rl/values.py", '[A-Za-z0-9])?\\Z")', '[A-Za-z0-9])?$")',
     "tests/test_values.py -k final_newline"),
    ("values: a URL ends at the end", "nemo_rl/values.py", 'file)://[^\\s]+\\Z|', 'file)://[^\\s]+$|',
     "tests/test_values.py -k final_newline"),
    ("values: an scp-style URL ends at the end", "nemo_rl/values.py", '[^\\s]*\\Z")', '[^\\s]*$")',
     "tests/test_values.py -k final_newline"),
    ("extras: --no-install-package leaves a fork out", "nemo_rl/project/lockfile.py",
     "    if canonicalize_name(distribution) in left_out:\n        return False\n", "", "tests/test_values.py -k leave_out"),
    ("bundles: uv copies what is linked to the bundle", "nemo_rl/workers/bundles.py",
     '        mode = "copy" if linked else "hardlink"', '        mode = "hardlink"', f"{BUNDLES} -k only_the_checkout"),
    ("node: -v goes on after the bootstrap", "nemo_rl/envs/command.py",
     '            *(["-v"] if getattr(args, "verbose", False) else [])]', "            ]", f"{BUNDLES} -k verbose"),
    ("node: a checkout .venv without Ray is made again", "nemo_rl/envs/command.py",
     '    if installed.installed(here, "ray")[0] and not unfinished:', "    if True:", f"{BUNDLES} -k half_made"),
    ("node: the bootstrap runs once, never in a loop", "nemo_rl/envs/command.py",
     "    if os.environ.get(REEXEC) == str(here):", "    if False:", f"{BUNDLES} -k half_made"),
    ("workers: a driver without Ray is named", "nemo_rl/workers/environments.py",
     "    if driver_ray is None:  # rebuilding", "    if False:  # rebuilding", f"{BUNDLES} -k driver_without"),
    ("verified: a file's link count is not its state", "nemo_rl/workers/verified.py",
     '        line = f"{relative} {st.st_ino} {st.st_mode} {st.st_size} {st.st_mtime_ns}"',
     '        line = f"{relative} {st.st_ino} {st.st_mode} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}"',
     "tests/test_verified.py -k linking"),
    # review of the node change: modes, edits during the check, listings, the driver build
    ("review: copies into the working cache lose group/other write", "nemo_rl/workers/bundles.py",
     "        os.chmod(target, os.stat(target).st_mode & 0o7777 & ~0o022)", "        pass",
     "tests/test_bundles.py -k never_writable"),
    ("review: copied buckets' directories lose group/other write", "nemo_rl/workers/bundles.py",
     "        os.chmod(dirpath, os.stat(dirpath).st_mode & 0o7777 & ~0o022)", "        pass",
     "tests/test_bundles.py -k never_writable"),
    ("review: a file kept in the working cache is copied without group/other write", "nemo_rl/workers/bundles.py",
     "        _copy(path, here)\n", "        shutil.copy2(path, here)\n", "tests/test_bundles.py -k never_writable"),
    ("review: a build's environment loses group/other write", "nemo_rl/workers/bundles.py",
     "                os.chmod(path, st.st_mode & 0o7777 & ~0o022)", "                pass",
     "tests/test_bundles.py -k umask"),
    ("review: verification refuses what others may write", "nemo_rl/workers/environments.py",
     "    if loose := verified.loose(env.path):", "    if loose := []:", "tests/test_verified.py -k others_may_write"),
    ("review: group/other-writable paths are found", "nemo_rl/workers/verified.py",
     "                    if st.st_mode & 0o022 and not stat.S_ISLNK(st.st_mode):",
     "                    if False:", "tests/test_verified.py -k writable_files_are_found"),
    ("review: an edit during the check leaves no record", "nemo_rl/workers/verified.py",
     "    if any(before.get(path) != line for path, line in", "    if False and any(before.get(path) != line for path, line in",
     "tests/test_verified.py -k during"),
    ("review: verify compares with what it saw before the check", "nemo_rl/workers/environments.py",
     "                   verified.inside(env.path, [*result.files, *metadata]), before)",
     "                   verified.inside(env.path, [*result.files, *metadata]), verified.snapshot(env.path, watched))",
     "tests/test_verified.py -k during"),
    ("review: a directory's mode in its listing", "nemo_rl/workers/verified.py",
     '        return f"{relative}/ {os.fstat(dfd).st_mode} {digest}"', '        return f"{relative}/ {digest}"',
     "tests/test_verified.py -k writable_by_others"),
    ("review: a link's target in its directory's listing", "nemo_rl/workers/verified.py",
     '                    names.append(f"{entry.name} -> {os.readlink(entry.name, dir_fd=dfd)}" if entry.is_symlink()',
     "                    names.append(entry.name if entry.is_symlink()", "tests/test_verified.py -k pointed_elsewhere"),
    ("review: a listing that does not read does not hold", "nemo_rl/workers/verified.py",
     "                if listing is None:  # a listing that does not read proves nothing: the record does not hold\n"
     "                    return None\n", "                if listing is None:\n                    continue\n",
     "tests/test_verified.py -k does_not_read"),
    ("review: a killed record write's temporary file is removed", "nemo_rl/workers/verified.py",
     "                left.unlink(missing_ok=True)", "                pass", "tests/test_verified.py -k killed_write"),
    ("review: a killed driver build is made again", "nemo_rl/envs/command.py",
     "    if installed.installed(here, \"ray\")[0] and not unfinished:", "    if installed.installed(here, \"ray\")[0]:",
     "tests/test_bundles.py -k killed_is_made"),
    ("review: the bootstrap marks the driver build unfinished", "nemo_rl/workers/bundles.py", "    mark.touch()\n",
     "    pass\n", "tests/test_bundles.py::test_a_checkout_environment_a_killed_build_left_with_ray_in_is_made_again_offline"),
    ("review: build_driver removes its mark last", "nemo_rl/workers/bundles.py", "    mark.unlink()\n", "    pass\n",
     "tests/test_bundles.py::test_a_checkout_environment_a_killed_build_left_with_ray_in_is_made_again_offline"),
    ("review: a killed driver build is made again by the documented command", "nemo_rl/envs/command.py",
     "    if installed.installed(here, \"ray\")[0] and not unfinished:", "    if installed.installed(here, \"ray\")[0]:",
     "tests/test_bundles.py::test_a_checkout_environment_a_killed_build_left_with_ray_in_is_made_again_offline"),
    ("review: the metadata recorded by the paths the snapshot took (lib64 is lib)", "nemo_rl/workers/environments.py",
     "    metadata = [str(p) for site in verified.sites(env.path)",
     "    metadata = [str(p) for site in installed.site_packages_dirs(env.path)",
     "tests/test_bundles.py::test_a_node_with_only_the_checkout_builds_offline_from_a_read_only_bundle"),
    ("verified: lib64 walked once", "nemo_rl/workers/verified.py", "        seen.setdefault(site.resolve(), site)",
     "        seen.setdefault(site, site)", "tests/test_verified.py -k lib64"),
    ("workers: prestart starts workers in the environment", "nemo_rl/workers/ray_actors.py",
     "    return ray.get([ready.options(**options).remote() for _ in range(count)])", "    return []",
     f"{RAY} -k prestart"),
    ("verified: bytecode a worker writes keeps the record", "nemo_rl/workers/verified.py",
     '                if entry.name != "__pycache__":', "                if True:",
     "tests/test_verified.py"),
    ("verified: the times decide when they hold", "nemo_rl/workers/verified.py",
     "    if quick is not None and quick == record.stats:\n        return True", "    pass", "tests/test_verified.py"),
    ("verified: the times compared", "nemo_rl/workers/verified.py",
     "    if quick is not None and quick == record.stats:", "    if quick is not None:", "tests/test_verified.py"),
    ("verified: times refreshed after bytecode", "nemo_rl/workers/verified.py",
     "        _save(env, dataclasses.replace(record, stats=quick))", "        pass", "tests/test_verified.py"),
    ("verified: racy times not kept", "nemo_rl/workers/verified.py", "    if newest > taken - RACY_NS:", "    if False:",
     "tests/test_verified.py"),
    ("verified: a link's target in the state", "nemo_rl/workers/verified.py", "        if not stat.S_ISLNK(st.st_mode):",
     "        if True:", "tests/test_verified.py -k link_names"),
    ("verified: start-up files recorded", "nemo_rl/workers/verified.py", "    files = sorted({*files, *startup_files(env)})",
     "    files = sorted(files)", "tests/test_verified.py -k start_up"),
    ("verified: a record covers the top directories", "nemo_rl/workers/verified.py",
     "    return (tops <= set(record.dirs) and ", "    return (", "tests/test_verified.py -k covers_less"),
    ("verified: a record covers the start-up files", "nemo_rl/workers/verified.py",
     " and set(startup_files(env)) <= set(record.files)\n", "\n", "tests/test_verified.py -k covers_less"),
    ("verified: a record covers the modules", "nemo_rl/workers/verified.py",
     "            and set(needed) <= set(record.modules))", "            )", "tests/test_verified.py -k covers_less"),
    ("verified: a record's coverage checked", "nemo_rl/workers/verified.py",
     "    if record is None or not covers(record, env, project):", "    if record is None:",
     "tests/test_verified.py -k covers_less"),
    ("verified: a nested record is no record", "nemo_rl/workers/verified.py",
     "    except (OSError, ValueError, RecursionError):  # not a record we wrote", "    except (OSError, ValueError):  # not a record we wrote",
     "tests/test_verified.py"),
    ("never: direct-reference build requirements refused", "nemo_rl/forks/pep517.py",
     "        if direct := [str(r) for r in parsed if r.url]:", "        if direct := []:", "tests/test_pep517.py"),
    ("derived: a direct-reference add refused", "nemo_rl/forks/declared.py",
     "            if requirement.url:  # `pkg @ file:///...`", "            if False:  # `pkg @ file:///...`", DECLARED),
    ("derived: declares parsed where read", "nemo_rl/forks/declared.py",
     "            if Requirement(line).url:\n                raise InvalidRequirement", "            if False:\n                raise InvalidRequirement",
     DECLARED),
    ("derived: one entry per fork", "nemo_rl/project/lockfile.py", "    if len(same) > 1:  # uv then ignores ours", "    if False:  # uv then ignores ours",
     DECLARED),
    ("runner: a skip beside a pass is no survival", "tests/mutation_verdicts.py", '    if skipped:  # "survived" means',
     '    if False:  # "survived" means', "tests/test_check_mutations.py"),
    ("develop: --onto over its own branch says how to go on", "nemo_rl/deps/develop.py",
     '    if git.ref_exists(checkout, f"refs/heads/{work}"):  # an earlier --onto', "    if False:  # an earlier --onto",
     f"{DEVELOP} -k onto_again"),
    ("derived: the locked package follows the entry", "nemo_rl/forks/metadata_check.py",
     "    if missing:\n        overridden =", "    if False:\n        overridden =", DECLARED),
    ("never: a link out through another link", "nemo_rl/workers/bundles.py",
     "                or not (real == inside or real.startswith(inside + os.sep))):", "                or False):", NEVER),
    ("never: the linked inode is checked again", "nemo_rl/workers/bundles.py",
     "                if linked.st_uid == euid and not linked.st_mode & 0o022:", "                if True:", NEVER),
    ("never: --remove refuses submodules", "nemo_rl/deps/develop.py",
     '        submodules = (checkout / ".gitmodules").exists() or (checkout / ".git" / "modules").exists()',
     "        submodules = False", NEVER),
    ("never: line separators Python may split on", "nemo_rl/values.py",
     " or len(str(path).splitlines()) > 1 or not str(path).isprintable():", ":", NEVER),
    ("never: a journal names each path once", "nemo_rl/project/landing.py",
     " or len(moves) != len(set(map(str, moves))) or len(moves) > 8", "", NEVER),
    ("never: a direct_url of any shape is no commit", "nemo_rl/extras.py",
     "    except (ValueError, AttributeError, RecursionError):\n        return None\n    return commit",
     "    except ValueError:\n        return None\n    return commit", NEVER),
    ("metadata: a moved checkout is cleaned", "nemo_rl/forks/fork_metadata.py",
     '            git.git(["clean", "-ffdxq"], repo=source)\n', "", SIDE),
    ("scratch: memory only with room", "nemo_rl/forks/scratch.py", "free.f_bavail * free.f_frsize >= size_hint + MARGIN",
     "True", SCRATCH),
    ("scratch: TMPDIR wins", "nemo_rl/forks/scratch.py", 'if size_hint is not None and not os.environ.get("TMPDIR"):',
     "if size_hint is not None:", SCRATCH),
    ("scratch: a live one is kept", "nemo_rl/forks/scratch.py", " and not locks.held(entry)", "", SCRATCH),
    ("scratch: a young one is kept", "nemo_rl/forks/scratch.py", "now - info.st_mtime > ABANDONED_AFTER_S and ", "", SCRATCH),
    ("workers: uv-run detection off", "nemo_rl/workers/ray_actors.py", "ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = False",
     "pass", "tests/test_ray_workers.py"),
    # issue 23: the CUDA toolkit, the compiled archs, transformer-engine's libraries
    ("toolkit: apt never reads the machine's status", "nemo_rl/cudakit/apt.py", '"Dir::State::Status": os.devnull,',
     "", CUDA),
    ("toolkit: the archive entry, not security's", "nemo_rl/cudakit/sources.py",
     'any("-" not in suite and "/" not in suite for suite in s.suites)', "True", CUDA),
    ("toolkit: the real nvcc, not Debian's wrapper", "nemo_rl/cudakit/layout.py", '(toolkit / "bin/nvcc", "bin/nvcc")',
     '(root / "usr/bin/nvcc", "bin/nvcc")', CUDA),
    ("toolkit: dangling links removed", "nemo_rl/cudakit/layout.py",
     "        if path.is_symlink() and not path.exists():\n            path.unlink()",
     "        if path.is_symlink() and not path.exists():\n            pass", CUDA),
    ("toolkit: a foreign directory is refused", "nemo_rl/cudakit/assemble.py",
     "if stamp is None and home.exists() and any(home.iterdir()) and not (home / WORK).is_dir():", "if False:", CUDA),
    ("pre-flight: wheel-only cuDNN headers fail", "nemo_rl/doctor/preflight.py",
     'dirs += [Path(p) for p in os.environ.get("CPATH", "").split(os.pathsep) if p]',
     'dirs += [Path(p) / "nvidia" / "cudnn" / "include" for p in sys.path if p]', CUDA),
    ("archs: same major only for cubins", "nemo_rl/workers/cuda_archs.py", "sm // 10 == gpu // 10 and sm <= gpu",
     "sm <= gpu", ARCHS),
    ("archs: a declared arch without cubins fails the pack", "nemo_rl/workers/cuda_archs.py",
     "        if absent:\n            raise NemoRLError(", "        if False:\n            raise NemoRLError(", ARCHS),
    ("archs: a GPU outside the archs refuses", "nemo_rl/workers/cuda_archs.py", "    if unfit:\n", "    if False:\n", ARCHS),
    ("archs: the node checks before installing", "nemo_rl/workers/bundles.py",
     "    fits = cuda_archs.check_node(record, bundle)  # refuses before anything is installed", "    fits = None",
     ARCHS),
    ("archs: pack records the archs", "nemo_rl/workers/bundles.py",
     '        cuda_archs.record(env, lock, work)  # read from the built binaries', "        pass", ARCHS),
    # issue 23, review: the compiled build in a bundle (seeded cache, sealed record), the toolkit's leftovers
    ("pack: the fresh cache is seeded with the builder's built wheels", "nemo_rl/workers/bundles.py",
     "        pack_seed.from_user_cache(cache, lock, seed)  # no second compile of what the builder built already",
     "        pass", f"{ARCHS}::test_pack_records_the_extensions_archs"),
    ("seed: the build's sources stay behind", "nemo_rl/workers/pack_seed.py",
     "                                                if d.name != SCRATCH and real_dir(d)]",
     "                                                if real_dir(d)]", "tests/test_pack_seed.py"),
    ("seed: a wheel built with default settings (in the revision itself)", "nemo_rl/workers/pack_seed.py",
     "    units = [(version_dir / revision, True)] + [", "    units = [] + [", SEED),
    ("seed: the revision's own wheel without the builds below it", "nemo_rl/workers/seed_files.py",
     "        if flat:  # a revision's own wheel", "        if False:  # a revision's own wheel", SEED),
    ("seed: a link out of the user's cache is dropped", "nemo_rl/workers/seed_files.py",
     "    except ValueError:\n        return None\n    if len(parts) != 2", "    except ValueError:\n        "
     "return lexical\n    if len(parts) != 2", f"{SEED}::test_the_built_wheel_and_its_unpacked_copy_are_seeded"),
    # issue 23, hostile review of seeding: whose cache, whose files, which links, which archs, which revision
    ("seed: never the cache a checkout's config names", "nemo_rl/uv.py",
     '"--no-config", "cache", "dir"], cwd="/"', '"cache", "dir"]', SEED),
    ("seed: a relative UV_CACHE_DIR is refused", "nemo_rl/workers/pack_seed.py", "    if not named.is_absolute():",
     "    if False:", SEED),
    ("seed: nothing others may write", "nemo_rl/workers/seed_files.py",
     "    return info.st_uid == os.geteuid() and not info.st_mode & 0o022", "    return info.st_uid == os.geteuid()",
     SEED),
    ("seed: a linked bucket is not followed", "nemo_rl/workers/pack_seed.py", "        if not real_dir(bucket):",
     "        if False:", SEED),
    ("seed: a linked index is not followed", "nemo_rl/workers/pack_seed.py",
     "            if all(map(real_dir, (index, index / name, entry))):",
     "            if all(map(real_dir, (index / name, entry))):", SEED),
    ("seed: a link only to exactly one archive entry", "nemo_rl/workers/seed_files.py",
     "    if len(parts) != 2 or not ARCHIVE.fullmatch(parts[0])", "    if not parts or not ARCHIVE.fullmatch(parts[0])",
     SEED),
    ("seed: a wheel lacking a declared arch is not seeded", "nemo_rl/workers/pack_seed.py",
     "        if absent:\n            raise Refused(", "        if False:\n            raise Refused(", SEED),
    ("seed: only the revision of the lock's sdist", "nemo_rl/workers/pack_seed.py",
     'return revision if b"\\xa6Sha256\\xd9\\x40" + sha256.encode() in data[start + size:] else None', "return revision",
     SEED),
    ("seed: a FIFO is never copied", "nemo_rl/workers/seed_files.py",
     "            elif stat.S_ISREG(info.st_mode):\n                plan.files.append(path)",
     "            elif True:\n                plan.files.append(path)", SEED),
    ("seed: a file vanishing meanwhile leaves the wheel unseeded", "nemo_rl/workers/pack_seed.py",
     "        except (Refused, OSError, shutil.Error, NemoRLError) as exc:\n            for path",
     "        except Refused as exc:\n            for path", SEED),
    ("seed: a lock's name or version is never `..`", "nemo_rl/workers/pack_seed.py",
     "SAFE_NAME.fullmatch(name) and SAFE_NAME.fullmatch(version)", '"/" not in name + version', SEED),
    ("seed: --no-seed reads nothing", "nemo_rl/workers/pack_seed.py", "    if not enabled:\n", "    if False:\n", SEED),
    ("archs: every visible GPU is checked", "nemo_rl/workers/cuda_archs.py", "    for one in sorted(set(gpus)):",
     "    for one in sorted(set(gpus))[-1:]:", ARCHS),
    ("archs: CUDA_VISIBLE_DEVICES is honoured", "nemo_rl/workers/cuda_archs.py",
     "            visible = _visible(rows, environ)", "            visible = rows", ARCHS),
    ("archs: a hung nvidia-smi is could-not-check", "nemo_rl/workers/cuda_archs.py",
     "        except (OSError, NemoRLError) as exc:\n            return (), f\"nvidia-smi did not answer",
     "        except OSError as exc:\n            return (), f\"nvidia-smi did not answer", ARCHS),
    ("toolkit: a verified toolkit loses a killed run's work", "nemo_rl/cudakit/assemble.py",
     "        shutil.rmtree(home / WORK, ignore_errors=True)  # a killed re-assembly's", "        pass  #", CUDA),
    ("toolkit: the stamp goes before a re-assembly", "nemo_rl/cudakit/assemble.py",
     "    (home / STAMP).unlink(missing_ok=True)", "    pass", CUDA),
    ("toolkit: the layout is checked whatever the stamp lists", "nemo_rl/cudakit/assemble.py",
     "    gone = sorted({*(p for p in recorded if p not in now), *layout.missing(home)})",
     "    gone = [p for p in recorded if p not in now]", CUDA),
    ("toolkit: one lock however DIR is spelled", "nemo_rl/cudakit/assemble.py",
     "    home = home.resolve()  # one lock per directory", "    home = home.absolute()  # one lock per directory", CUDA),
    ("toolkit: the lock file is named when it cannot be made", "nemo_rl/cudakit/assemble.py",
     'f"cannot create the lock file {lock} beside {home}', 'f"cannot create {home}', CUDA),
    ("seal: the CUDA record inside the digest", "nemo_rl/workers/bundle_seal.py",
     "    for part in (cache_digest.encode(), hashlib.sha256(record).hexdigest().encode(), fields(manifest)):",
     "    for part in (cache_digest.encode(), fields(manifest)):", "tests/test_bundle_seal.py"),
    ("seal: the manifest's fields inside the digest", "nemo_rl/workers/bundle_seal.py",
     "    for part in (cache_digest.encode(), hashlib.sha256(record).hexdigest().encode(), fields(manifest)):",
     "    for part in (cache_digest.encode(), hashlib.sha256(record).hexdigest().encode()):",
     "tests/test_bundle_seal.py"),
    ("seal: the node checks the record bytes it read", "nemo_rl/workers/bundles.py",
     "        check_copy(cache, bundle, manifest, record)", "        check_copy(cache, bundle, manifest, "
     "cuda_archs.read_record(bundle) and b'{}')", "tests/test_bundle_seal.py"),
    ("archs: a bundle without its record is refused", "nemo_rl/workers/cuda_archs.py",
     "    except FileNotFoundError as exc:\n        raise NemoRLError(f\"bundle {bundle} has no",
     "    except FileNotFoundError as exc:\n        return b'{\"extensions\": {}}'\n        raise NemoRLError(f\"bundle "
     "{bundle} has no", "tests/test_bundle_seal.py"),
    ("archs: the host compilers are read from the binary", "nemo_rl/workers/cuda_archs.py",
     '"host_compilers": list(host_compilers(path))}', '"host_compilers": []}', ARCHS),
    ("archs: CXX parsed as a command line", "nemo_rl/workers/cuda_archs.py",
     "        words = shlex.split(setting) if setting else []", "        words = [setting] if setting else []", ARCHS),
    ("archs: the node's GPU from nvidia-smi", "nemo_rl/workers/cuda_archs.py",
     "        if rows:\n            visible", "        if False:\n            visible", ARCHS),
    ("toolkit: the stamp's file list is checked", "nemo_rl/cudakit/assemble.py",
     '    damage = _damage(home, stamp) if stamp is not None else "not assembled"',
     '    damage = None if stamp is not None else "not assembled"', CUDA),
    ("toolkit: a changed size is damage", "nemo_rl/cudakit/assemble.py",
     "    changed = [p for p in recorded if p in now and now[p] != recorded[p]]", "    changed = []", CUDA),
    ("toolkit: one run per directory at a time", "nemo_rl/cudakit/assemble.py",
     '        locks.acquire(fd, lambda: f"another `nemo-rl toolchain cuda` is assembling {home}: waiting for it")',
     "        pass", CUDA),
    ("toolkit: only the layout's own links are swept", "nemo_rl/cudakit/layout.py", "    for path in links:\n",
     "    for path in [Path(d) / n for d, ds, fs in os.walk(home) for n in [*fs, *ds]]:\n", CUDA),
    ("toolkit: --debs lacking a package never goes to the network", "nemo_rl/cudakit/assemble.py",
     '        if absent:\n            raise NemoRLError(f"--debs', '        if False:\n            raise NemoRLError(f"--debs',
     CUDA),
    ("toolkit: Ubuntu's sources are refused with what to do", "nemo_rl/cudakit/sources.py",
     '    if ident == "ubuntu" or "ubuntu" in like:', '    if False:', CUDA),
    ("toolkit: only Debian is asked for trixie", "nemo_rl/cudakit/sources.py", '    if ident == "debian":\n        return',
     "    if True:\n        return", CUDA),
    ("proof: transformer-engine imported by the pack", "nemo_rl/workers/verified.py",
     '                if c.distribution == "transformer-engine" and installed.installed(env, c.distribution)[0]}',
     "                if False}", f"{ARCHS}::test_the_pack_proves_transformer_engine_imports_when_it_is_there"),
    ("extras: a fork left out by --no-install-package is not expected", "nemo_rl/project/lockfile.py",
     "    if canonicalize_name(distribution) in left_out:\n        return False",
     "    if False:\n        return False", "tests/test_pack_seed.py"),
    ("libs: CUDA_HOME restored after the import", "nemo_rl/cuda_libs.py",
     "            if value is None:\n                os.environ.pop(name, None)", "            if value is None:\n                pass",
     LIBS),
    ("libs: a toolkit with NVRTC is left alone", "nemo_rl/cuda_libs.py", "    if nvrtc is None or _has_nvrtc(home):",
     "    if nvrtc is None:", LIBS),
    ("libs: a dangling libnvrtc link does not count", "nemo_rl/cuda_libs.py", "os.path.exists(p) and ", "", LIBS),
    ("doctor: the missing library is named", "nemo_rl/doctor/report.py", "        if library:\n            return",
     "        if False:\n            return", LIBS),
    ("doctor: the no-GPU note", "nemo_rl/doctor/report.py",
     'if extras.probe("transformer_engine").installed and not torch.cuda_available:', "if False:", LIBS),
    # issue 27: checks no test failed without
    ("bundles: find compares the inputs", "nemo_rl/workers/bundles.py", "        if not different:\n            return bundle",
     "        return bundle", f"{BUNDLES}::test_find_returns_only_a_bundle_made_for_these_inputs"),
    ("develop: --onto refuses unsaved work", "nemo_rl/deps/develop.py", "    if unsaved:\n        where = shlex.quote(str(checkout))",
     "    if False:\n        where = shlex.quote(str(checkout))", f"{DEVELOP}::test_onto_refuses_a_checkout_with_unsaved_work"),
    ("develop: takes the project lock", "nemo_rl/deps/develop.py",
     "    with landing.project_lock(project, wait=not args.no_wait):\n        return start(project, args)",
     "    return start(project, args)", f"{TRUST}::test_develop_waits_for_the_project_lock"),
    ("develop: --stop takes the project lock", "nemo_rl/deps/develop.py",
     "        with landing.project_lock(project, wait=not args.no_wait):\n            return stop(project, args)",
     "        return stop(project, args)", f"{TRUST}::test_develop_waits_for_the_project_lock"),
    ("develop: --onto takes the project lock", "nemo_rl/deps/develop.py",
     "        with landing.project_lock(project, wait=not args.no_wait):\n            return onto(project, args)",
     "        return onto(project, args)", f"{TRUST}::test_develop_waits_for_the_project_lock"),
    ("fork cache: the file lock is taken", "nemo_rl/forks/fork_cache.py",
     '        locks.acquire(fd, lambda: f"waiting for another nemo-rl command using the fork cache {repo}")\n',
     "        pass\n", f"{TRUST}::test_another_command_waits_for_the_fork_cache"),
    ("trust: journal paths stay inside the project", "nemo_rl/project/landing.py",
     "    for name in moves:\n        values.inside(project_of(staging), name, str(path))\n", "",
     f"{TRUST}::test_a_landing_journal_never_moves_through_a_link_out_of_the_project"),
    # this runner's own verdicts
    ("runner: a setup error is no kill", "tests/mutation_verdicts.py", "    if errors:\n        return Run((), passed,",
     "    if False:\n        return Run((), passed,", "tests/test_check_mutations.py"),
    ("runner: a timeout is no kill", "tests/mutation_verdicts.py",
     'if child.tag == "failure" and not TIMEOUT_FAILURE.search(message):', 'if child.tag == "failure":',
     "tests/test_check_mutations.py"),
    ("runner: a test failing without the mutation is flaky", "tests/mutation_verdicts.py",
     "        if run is baseline and run.failed:", "        if False:", "tests/test_check_mutations.py"),
    ("runner: a run goes on past errors and stops at a failure", "tests/mutation_verdicts.py",
     '        _SESSION.shouldfail = f"{report.nodeid} failed"', "        pass", "tests/test_check_mutations.py"),
    ("runner: the run without the mutation comes before the confirming one", "tests/check_mutations.py",
     '    target.write_text(text)\n    baseline = run_pytest(copy, [with_mutation.failed[0]], scratch / "baseline", timeout)\n',
     '    again = run_pytest(copy, [with_mutation.failed[0]], scratch / "mutated", timeout)\n    target.write_text(text)\n'
     '    return judge(with_mutation, run_pytest(copy, [with_mutation.failed[0]], scratch / "baseline", timeout), again)\n',
     "tests/test_check_mutations.py"),
    # the derived [[tool.uv.dependency-metadata]] entry (nemo_rl/forks/declared.py, metadata_check.py)
    ("derived: drops applied", "nemo_rl/forks/declared.py", "        if name in dropped or name in replaced_names or",
     "        if name in replaced_names or", DECLARED),
    ("derived: adds applied", "nemo_rl/forks/declared.py", "    for requirement, line in adds:\n        by_name",
     "    for requirement, line in []:\n        by_name", DECLARED),
    ("derived: one name split by marker keeps both", "nemo_rl/forks/declared.py",
     "        by_name.setdefault(name, []).append(line)\n    for requirement", "        by_name[name] = [line]\n    for requirement",
     DECLARED),
    ("derived: an add with a marker replaces that marker's only", "nemo_rl/forks/declared.py",
     "{canonicalize_name(r.name) for r, _ in adds if r.marker is None}", "{canonicalize_name(r.name) for r, _ in adds}",
     DECLARED),
    ("derived: an add without a marker replaces every one of its name", "nemo_rl/forks/declared.py",
     "        if name in dropped or name in replaced_names or (name", "        if name in dropped or (name", DECLARED),
    ("derived: one name added twice needs distinct markers", "nemo_rl/forks/declared.py",
     "            if same and (requirement.marker is None or any(", "            if False and (requirement.marker is None or any(",
     DECLARED),
    ("fork metadata: a name required twice keeps both", "nemo_rl/forks/fork_metadata.py",
     "        result[str(req) if canonicalize_name(req.name) in result else canonicalize_name(req.name)] = str(req)",
     "        result[canonicalize_name(req.name)] = str(req)", DECLARED),
    ("derived: a requirement met where the lock applies is locked", "nemo_rl/forks/lock_markers.py",
     "        if requirement.marker is None or _evaluate(requirement.marker, env):", "        if requirement.marker is None:",
     DECLARED),
    ("derived: the lock's manifest version", "nemo_rl/forks/metadata_check.py",
     '    if entry.get("version") != derived.version:', "    if False:", DECLARED),
    ("derived: the lock's manifest requires-dist", "nemo_rl/forks/metadata_check.py", "    if have != want:",
     "    if False:", DECLARED),
    ("derived: deps patches relocks a hand-edited lock", "nemo_rl/deps/patches.py",
     "            if written or relocked:\n                _relock(", "            if written:\n                _relock(",
     f"{SEQUENCE} -k no_sequence"),
    ("derived: the fork's version", "nemo_rl/forks/declared.py", "return Entry(distribution, declares.version,",
     "return Entry(distribution, None,", DECLARED),
    ("derived: version compared", "nemo_rl/forks/declared.py", "        if expected != found:",
     '        if field != "version" and expected != found:', DECLARED),
    ("derived: requires-dist compared", "nemo_rl/forks/declared.py", "    if entry.requires_dist != derived.requires_dist:",
     "    if False:", DECLARED),
    ("derived: a drop needs its why", "nemo_rl/forks/declared.py", "or not isinstance(why, str) or not why.strip():",
     "or not isinstance(why, str):", DECLARED),
    ("derived: a name listed once", "nemo_rl/forks/declared.py",
     '            if seen.get(name, key_) != key_ or (key_ == "drop" and name in seen):', "            if False:", DECLARED),
    ("derived: unnecessary drops", "nemo_rl/forks/declared.py", "if d.name not in declared]", "if False]", DECLARED),
    ("derived: checked offline", "nemo_rl/forks/records.py", "    return diffs + (declared_differences(project, fork) if metadata else [])",
     "    return diffs", f"{DERIVED} -k hand_edited_entry"),
    ("derived: declares recorded", "nemo_rl/forks/metadata_check.py", '                 "not recorded")]', '                 "not recorded")][:0]',
     f"{DERIVED} -k without_recorded"),
    ("derived: declares verified online", "nemo_rl/forks/records.py", "                  if fork_declares.get(key) != recorded.get(key)]",
     "                  if False]", f"{DERIVED} -k online_check_finds_declares"),
    ("derived: status says metadata stale", "nemo_rl/deps/status.py", "metadata_stale=bool(metadata)",
     "metadata_stale=False", f"{DERIVED} -k hand_edited_entry"),
    ("derived: deps patches writes the entry", "nemo_rl/deps/patches.py",
     "            if written or relocked:\n                _relock(", "            if relocked:\n                _relock(", f"{DERIVED} -k hand_edited_entry"),
    ("derived: bump locks the entry it derived", "nemo_rl/deps/bump.py",
     "            entry_lines, changed = bump_steps.write_entry(staging.path, fork, declares)",
     "            entry_lines, changed = [], None", f"{BUMP} -k lands_the_version"),
    ("derived: a changed entry locks online at once", "nemo_rl/deps/bump.py",
     "self.before is not None and changed is None", "self.before is not None", f"{DERIVED} -k dynamic_version"),
    ("derived: bump's refused lock names the drop line", "nemo_rl/deps/bump.py",
     "                raise bump_steps.lock_refused(self.fork, self.changed, exc) from exc", "                raise",
     f"{DERIVED} -k cannot_lock"),
    ("derived: refusal names the drop line", "nemo_rl/forks/metadata_check.py", '    lines = "\\n".join(f"    {declared.drop_line(name)}" for name in new)',
     '    lines = ""', f"{DERIVED} -k cannot_lock"),
    ("derived: unnecessary drops removed", "nemo_rl/forks/metadata_check.py", "    if unneeded:\n        drops =",
     "    if False:\n        drops =", f"{DERIVED} -k unnecessary"),
    # the installed fork against uv.lock and the recorded fork metadata
    ("installed: the locked commit", INSTALLED_FORK, "    if dist.commit != locked_commit:", "    if False:", DECLARED),
    ("installed: version against the lock", INSTALLED_FORK, '    if dist.version != package.get("version"):',
     "    if False:", DECLARED),
    ("installed: requirements against the lock's entry", INSTALLED_FORK, "        if changes:", "        if False:",
     DECLARED),
    ("installed: the drop/add lists applied", INSTALLED_FORK,
     "    want = declared.derive(distribution, own, deltas).requires_dist if deltas is not None else own.requires_dist",
     "    want = own.requires_dist", DECLARED),
    ("installed: a marker that excludes the environment", INSTALLED_FORK,
     "    return requirement is not None and _evaluate(requirement.marker, markers)",
     "    return requirement is not None", DECLARED),
    ("installed: a marker it cannot evaluate never raises", INSTALLED_FORK,
     "    except ValueError:  # UndefinedComparison, UndefinedEnvironmentName, InvalidVersion",
     "    except TypeError:  # UndefinedComparison, UndefinedEnvironmentName, InvalidVersion", DECLARED),
    ("installed: the environment's own Python", INSTALLED_FORK, "    if match := re.search(",
     "    if match := None and re.search(", DECLARED),
    ("installed: a locked requirement missing", INSTALLED_FORK,
     "    for missing in sorted(n for n in required if find_installed(n, path) is None):",
     "    for missing in sorted(n for n in required if False):", DECLARED),
    ("installed: the fork's own requirements locked (no entry)", INSTALLED_FORK,
     "    if unlocked and entry is None:", "    if False:", DECLARED),
    ("installed: what an environment leaves out is not missing", INSTALLED_FORK,
     "    skipped = {canonicalize_name(n) for n in left_out}", "    skipped = set()", f"{DECLARED} -k leaves_out"),
    ("installed: status compares", "nemo_rl/deps/status.py",
     "        differs = [] if mismatch else [str(p) for p in installed_fork.problems(project, env, fork.distribution)]",
     "        differs = []", f"{SEQUENCE} -k agree_offline"),
    ("installed: verify compares", "nemo_rl/deps/verify.py",
     "            for problem in installed_fork.problems(project, env, fork.distribution, left_out=skipped):",
     "            for problem in []:", f"{SEQUENCE} -k agree_offline"),
    ("installed: worker environments compare", "nemo_rl/workers/environments.py",
     "            elif differs := installed_fork.problems(project, env.path, fork.distribution):",
     "            elif differs := []:", f"{RAY} -k not_what_the_lock_says"),
    ("doctor: installed fork against the lock", "nemo_rl/doctor/report.py",
     'return ("installed differs", "; ".join(differs)) if differs else ("ok", None)', 'return ("ok", None)',
     "tests/test_doctor.py"),
    ("doctor: compares the installed fork", "nemo_rl/doctor/report.py",
     "            if project and probe.installed and package and package.commit else []", "            if False else []",
     "tests/test_doctor.py -k compares_the_installed"),
    # bump's report and lock
    ("bump report: a commit already there is not added", "nemo_rl/forks/bump_steps.py",
     "        if r.commit in old_shas:\n            continue\n", "", DECLARED),
    ("bump report: one old commit matches one new (counted by commit)", "nemo_rl/forks/bump_steps.py",
     "            old_ids[r.patch_id] -= 1\n", "", DECLARED),
    ("bump report: shared patch-ids", "nemo_rl/forks/bump_steps.py", "if len(shas) > 1 and pid !=", "if len(shas) > 9 and pid !=",
     DECLARED),
    ("bump: the offline lock's reason", "nemo_rl/deps/bump.py",
     'return f"it changed more than the SHA (uv.lock line {number}: {got.strip()[:120]!r})"',
     'return "it changed more than the SHA"', DECLARED),
    # deps upstream
    ("upstream: shipped at the base too", "nemo_rl/forks/upstream_report.py", "        wheel = wheel | base_wheel",
     "        pass", f"{UPSTREAM} -k shipped_module"),
    ("upstream: a rebase resolves each conflict", "nemo_rl/forks/upstream_report.py",
     "conflicts = {sha: trial.apply(sha, resolve=True) for sha in remaining}",
     "conflicts = {sha: trial.apply(sha) for sha in remaining}", f"{UPSTREAM} -k rebase_in_order"),
    ("upstream: git's own conflicting files", "nemo_rl/forks/git_history.py",
     "        if not conflicts:\n            conflicts = self._failing_paths(sha)",
     "        if not conflicts:\n            conflicts = [c.path for c in changes(self.repo, sha)]", f"{UPSTREAM} -k rebase_in_order"),
    ("upstream: the commit that deleted a file", "nemo_rl/forks/upstream_report.py",
     'commit = {p: f" in {by[p][:12]}" if p in by else "" for p in missing}', 'commit = {p: "" for p in missing}',
     f"{UPSTREAM} -k classified"),
    # the fast unit tests (`pytest -m "not slow"`) catch these on their own
    ("fast: an inherited object directory is dropped", "nemo_rl/git.py", '"GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", ',
     '"GIT_INDEX_FILE", ', "tests/test_git_history.py"),
    ("fast: the trial index is git's own scrubbed environment", "nemo_rl/git.py",
     '        env["GIT_INDEX_FILE"] = str(index_file)', "        pass", "tests/test_git_history.py"),
    ("fast: the backend's get_requires_for_build_wheel is installed", "nemo_rl/forks/pep517.py",
     "        requires.extend(_checked(hooks.get_requires_for_build_wheel(), rev))",
     "        _checked(hooks.get_requires_for_build_wheel(), rev)",
     "tests/test_pep517.py"),
    ("fast: the second hook runs in the first one's process", "nemo_rl/forks/hook_pair.py",
     "and set(asked) <= set(given):", "and False:", "tests/test_pep517.py -k one_process"),
    ("fast: the second call reads the first run's answer", "nemo_rl/forks/pep517.py",
     'if name == "get_requires_for_build_wheel" or not _answered_ahead(ahead, control):', "if True:",
     "tests/test_pep517.py -k one_process"),
    ("fast: a hook's output.json is an object of bounded size", "nemo_rl/forks/pep517.py",
     "        _output(control)  # the backend's process wrote it", "        pass  # the backend's process wrote it",
     "tests/test_pep517.py -k odd_values"),
    ("fast: the hook's return value names what it wrote", "nemo_rl/forks/pep517.py",
     "        return _produced(out, name)", "        return name", "tests/test_pep517.py -k odd_values"),
    ("fast: METADATA has a Name and a Version", "nemo_rl/forks/fork_metadata.py",
     '    if not message["Name"] or not message["Version"]:', "    if False:",
     "tests/test_fork_metadata.py -k without_a_name"),
    ("fast: a build backend runs under a time limit", "nemo_rl/forks/pep517.py",
     "timeout=WHEEL_TIMEOUT_S if wheel else METADATA_TIMEOUT_S, keep=OUTPUT_KEPT)", "timeout=None, keep=OUTPUT_KEPT)",
     "tests/test_pep517.py -k never_returns"),
    ("fast: patches export refuses --check anywhere", "nemo_rl/deps/patches.py",
     "    if args.export and (args.check or args.offline):", "    if False:", "tests/test_cli.py -k refuses_check"),
    ("fast: -v between deps and its verb", "nemo_rl/deps/cli.py", "    verbose.add(deps)  #", "    pass  #",
     "tests/test_cli.py -k verbose_before_or_after"),
    ("fast: status's states, the most fundamental first", "nemo_rl/deps/status.py",
     '("landing interrupted", interrupted), ("lock stale", lock_stale),',
     '("lock stale", lock_stale), ("landing interrupted", interrupted),', "tests/test_status.py -k most_fundamental"),
    ("fast: status --check fails on orphaned records", "nemo_rl/deps/status.py",
     "    return bool(lock_problem or orphans or any(", "    return bool(lock_problem or any(",
     "tests/test_status.py -k check_fails"),
    ("fast: --remove leaves out bytecode only", "nemo_rl/deps/develop.py",
     '    ignored = [f for f in ignored if "__pycache__/" not in f and not f.endswith(".pyc")]',
     "    ignored = list(ignored)", "tests/test_develop.py"),
    ("fast: recover finishes a landing cut short", "nemo_rl/deps/recover.py", "        if journal:  # killed while",
     "        if False:  # killed while", "tests/test_recover.py"),
    ("fast: the fork cache removes git's stale locks", "nemo_rl/forks/fork_cache.py",
     "        _remove_stale_git_locks(repo)\n        yield", "        yield", "tests/test_fork_cache.py"),
    ("fast: a refused lock's remedy names only the added requirements", "nemo_rl/forks/metadata_check.py",
     "    new = list(dict.fromkeys(n for n in map(declared._name, after.requires_dist) if n not in old))",
     "    new = list(dict.fromkeys(map(declared._name, after.requires_dist)))", "tests/test_metadata_check.py"),
    ("fast: metadata leaves out the fork's extras", "nemo_rl/forks/fork_metadata.py",
     '        if req.marker and "extra" in str(req.marker):', "        if False:", "tests/test_fork_metadata.py"),
    ("fast: worker-env key is its directory's name", "nemo_rl/workers/environments.py",
     '\n                or meta["key"] != path.name):', "):", "tests/test_environments.py"),
    ("fast: worker-env flags are strings", "nemo_rl/workers/environments.py",
     'not all(isinstance(f, str) for f in meta["flags"])', "False", "tests/test_environments.py"),
    ("fast: journal names landable paths only", "nemo_rl/project/landing.py",
     "not all(_landable(name) for name in moves)", "False", "tests/test_landing.py"),
    ("fast: entry's record digest", "nemo_rl/forks/records.py",
     '("patch-id", record.patch_id),\n                       ("digest", record.digest())', '("patch-id", record.patch_id)',
     "tests/test_records.py"),
    ("fast: entry's record name inside the directory", "nemo_rl/forks/records.py",
     "Path(record_name).name != record_name or ", "", "tests/test_records.py"),
    ("fast: record missing a fact", "nemo_rl/forks/record_files.py", '    if missing:\n        raise NemoRLError(f"{where} is missing',
     '    if False:\n        raise NemoRLError(f"{where} is missing', "tests/test_record_files.py"),
    ("fast: a damaged patch-id cache is ignored", "nemo_rl/forks/patch_ids.py",
     "return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}", "return data",
     "tests/test_patch_ids.py"),
    ("fast: settings refuse a relative cache", "nemo_rl/settings.py",
     "if setting and not os.path.isabs(os.path.expanduser(setting)):", "if False:", "tests/test_settings.py"),
    ("fast: envs verbs take -v", "nemo_rl/envs/command.py", "        verbose.add(p)\n", "", "tests/test_cli.py"),
    ("fast: deps status says what it does", "nemo_rl/deps/cli.py", 'p = verbs.add_parser("status", help=status, description=',
     'p = verbs.add_parser("status", help=status, epilog=', "tests/test_cli.py"),
    ("fast: patches refuses extra words", "nemo_rl/deps/cli.py", "        elif len(words) > 1:\n", "        elif False:\n",
     "tests/test_cli.py"),
    ("fast: patches export takes exactly DIST DIR", "nemo_rl/deps/cli.py", "found = self.EXPORT.parse_args([\"--\", *words[1:]])",
     "found = self.EXPORT.parse_known_args([\"--\", *words[1:], 'x', 'y'])[0]", "tests/test_cli.py"),
    ("fast: build requirements are PEP 508", "nemo_rl/forks/pep517.py",
     "        parsed = [Requirement(r) for r in requirements]", "        parsed = []",
     "tests/test_pep517.py"),
    ("fast: backend-path is a list of strings", "nemo_rl/forks/pep517.py",
     "    if not isinstance(backend, str) or not (backend_path is None or (", "    if False and (backend_path is None or (",
     "tests/test_pep517.py"),
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
    ("never: ignored files are work", "nemo_rl/deps/develop.py", "    if ignored:\n        blockers.append",
     "    if False:\n        blockers.append", NEVER),
    ("never: ENOLCK is the user's to fix", "nemo_rl/locks.py",
     "        if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP):\n            raise", "        if True:\n            raise",
     NEVER),
    ("never: deeply nested state JSON", "nemo_rl/values.py", "    except RecursionError as exc:",
     "    except ZeroDivisionError as exc:", NEVER),
    ("never: no link out of a bundle", "nemo_rl/workers/bundles.py",
     '        if (os.path.isabs(target) or landing == ".." or landing.startswith("../")', "        if (False", NEVER),
    ("never: no foreign hard link in a bundle", "nemo_rl/workers/bundle_trust.py",
     "        if outside > 0:", "        if False:", NEVER),
    ("never: a node build's own links are the bundle's", "nemo_rl/workers/bundle_trust.py",
     "        count += (other.st_dev, other.st_ino) == inode", "        pass", NEVER),
    ("never: the pinned digest", "nemo_rl/workers/bundles.py", "    if trusted and manifest.digest not in trusted:\n        where",
     "    if False:\n        where", NEVER),
    ("never: the pinned digests choose among configured bundles", "nemo_rl/workers/bundles.py",
     "        if trusted and manifest.digest not in trusted:\n            different.append",
     "        if False:\n            different.append", NEVER),
    ("never: the node's copy is checked", "nemo_rl/workers/bundles.py", "        check_copy(cache, bundle, manifest, record)\n", "", NEVER),
    ("never: only files nobody else writes are linked", "nemo_rl/workers/bundles.py",
     "        if info.st_uid == euid and not info.st_mode & 0o022:", "        if True:", NEVER),
    ("never: the environment gets copies", "nemo_rl/workers/bundles.py", '        mode = "copy" if linked else "hardlink"',
     '        mode = "hardlink"', NEVER),
    ("never: a working cache of its own", "nemo_rl/workers/bundle_trust.py",
     "    work = Path(tempfile.mkdtemp(prefix=WORK_CACHE_PREFIX, dir=root))",
     '    work = root / f"{WORK_CACHE_PREFIX}{os.getpid()}"\n    shutil.rmtree(work, ignore_errors=True)\n    work.mkdir()',
     NEVER),
    ("never: a broken bundle is skipped", "nemo_rl/workers/bundles.py",
     "        except NemoRLError as exc:  # one broken bundle never hides the good ones", "        except ZeroDivisionError as exc:",
     NEVER),
    ("never: an empty NEMO_RL_BUNDLE_DIR is no network", "nemo_rl/workers/bundles.py",
     '        if settings.bundle_dir():  # a shared mount', "        if False:  # a shared mount", NEVER),
    ("never: killed packs of any name", "nemo_rl/workers/bundles.py", 'root.glob(".*.packing-*")', 'root.glob(".x.packing-*")',
     NEVER),
    ("never: prune removes killed packs", "nemo_rl/workers/housekeeping.py", "    return removed + _prune_packs()",
     "    return removed", NEVER),
    ("never: one pack per destination", "nemo_rl/workers/bundles.py", "        if not locks.acquire(claim, None):",
     "        if False:", NEVER),
    ("never: a cached proof of a new pin is asked again", "nemo_rl/forks/fork_cache.py",
     "        if git.served(fork.url, sha) is False and not (", "        if False and not (", NEVER),
    ("never: a timeout above zero", "nemo_rl/values.py", "not 0 < seconds <= TIMEOUT_MAX_S:",
     "not -1 < seconds <= TIMEOUT_MAX_S:", NEVER),
    ("never: --onto a missing upstream branch", "nemo_rl/deps/develop.py",
     '        if git.ls_remote(fork.upstream_url, f"refs/heads/{branch}") is None:', "        if False:", NEVER),
    ("never: --onto during a rebase", "nemo_rl/deps/develop.py", "    if git.rebasing(checkout):  #", "    if False:  #", NEVER),
    ("never: --remove needs the checkout's own git", "nemo_rl/deps/develop.py",
     "        if git.toplevel(checkout) != checkout.resolve():", "        if False:", NEVER),
    ("never: pack into an unwritable place", "nemo_rl/workers/bundles.py",
     "    except OSError as exc:\n        raise NemoRLError(f\"cannot pack into", "    except ZeroDivisionError as exc:\n        raise NemoRLError(f\"cannot pack into", NEVER),
    # the hostile review of "Never hangs, never trusts"
    ("review: a deleted checkout is not live", "nemo_rl/project/develop_state.py",
     "                if live and not checkout_present(checkout):  # deleted", "                if False:  # deleted", f"{REVIEW}::test_a_deleted_checkout_is_said_to_be_gone"),
    ("review: status says the checkout is gone", "nemo_rl/deps/status.py",
     "                        checkout_gone=gone,", "                        checkout_gone=False,", f"{REVIEW}::test_a_deleted_checkout_is_said_to_be_gone"),
    ("review: --stop removes only its own token's overlays", "nemo_rl/project/develop_state.py",
     '        if not os.path.lexists(path) or (owner is not None and overlay_owner(path) not in (owner, "")):',
     "        if not os.path.lexists(path):",
     f"{REVIEW}::test_two_containers_with_one_checkout_path_keep_their_own_overlays {REVIEW}::test_stop_without_state_leaves_other_containers_overlays"),
    ("review: the develop token is in the worker key", "nemo_rl/workers/environments.py",
     "[str(e.checkout), e.token]", '[str(e.checkout), ""]', f"{REVIEW}::test_two_containers_with_one_checkout_path_keep_their_own_overlays"),
    ("review: a working cache is ours only with our marker", "nemo_rl/workers/bundle_trust.py",
     "    if marker is None or not stat.S_ISREG(marker.st_mode) or marker.st_uid != euid:", "    if False:", f"{REVIEW}::test_only_working_caches_we_made_are_counted_or_removed"),
    ("review: a linked working cache is never ours", "nemo_rl/workers/bundle_trust.py",
     '    if stat.S_ISLNK(info.st_mode):\n        return "a symbolic link"\n    if not stat.S_ISDIR(info.st_mode):',
     "    if False:", f"{REVIEW}::test_only_working_caches_we_made_are_counted_or_removed"),
    ("review: another user's working cache is not ours", "nemo_rl/workers/bundle_trust.py",
     "    if info.st_uid != euid:", "    if False:", f"{REVIEW}::test_only_working_caches_we_made_are_counted_or_removed"),
    ("review: planted working caches hold no link of ours", "nemo_rl/workers/bundle_trust.py",
     "    return [path for path in found if why_not_ours(path) is None]", "    return found", f"{REVIEW}::test_only_working_caches_we_made_are_counted_or_removed"),
    ("review: --onto is not blocked by stashes", "nemo_rl/deps/develop.py",
     'if u in ("uncommitted changes", "untracked files")]', 'if "commit(s) on no remote branch" not in u]', f"{REVIEW}::test_the_stash_advice_of_onto_works_when_followed"),
    ("review: a digest in either case", "nemo_rl/values.py", "    text = value.strip().lower()", "    text = value.strip()",
     f"{REVIEW}::test_a_digest_in_either_case_is_one_digest"),
    ("review: digests separated by semicolons", "nemo_rl/values.py", 're.compile(r"[\\s,;]+")', 're.compile(r"[\\s,]+")',
     f"{REVIEW}::test_digest_lists_take_commas_semicolons_and_spaces"),
    ("review: a space after sha256: is named", "nemo_rl/values.py", '    if re.search(r":\\s", setting):', "    if False:",
     f"{REVIEW}::test_digest_lists_take_commas_semicolons_and_spaces"),
    ("review: --digest is normalised where checked", "nemo_rl/workers/bundles.py",
     "{bundle_trust.digest_argument(digest)} if digest", "{digest} if digest", f"{REVIEW}::test_digest_lists_take_commas_semicolons_and_spaces"),
    ("review: hard links inside one bundle are its own", "nemo_rl/workers/bundle_trust.py",
     "        outside = nlink[inode] - len(inside) - sum(", "        outside = nlink[inode] - 1 - sum(", f"{REVIEW}::test_hard_links_between_files_of_one_bundle_are_its_own"),
    ("review: one timeout rule has an upper bound", "nemo_rl/values.py", "not 0 < seconds <= TIMEOUT_MAX_S:",
     "not 0 < seconds:", f"{REVIEW}::test_one_timeout_rule_for_every_api"),
    ("review: process.run follows the one timeout rule", "nemo_rl/process.py",
     'return None if timeout is None else values.timeout_seconds(timeout, "process.run")',
     "return None if timeout is None else float(timeout)", f"{REVIEW}::test_one_timeout_rule_for_every_api"),
    ("review: an empty NEMO_RL_BUNDLE_DIR is refused", "nemo_rl/settings.py", "    if not setting.strip():\n        raise",
     "    if False:\n        raise", f"{REVIEW}::test_an_empty_bundle_dir_is_refused_everywhere_it_is_read"),
    ("review: a node checks archive hashes", "nemo_rl/workers/bundles.py",
     '        checked = archive_hashes.check(cache, project, f"bundle {bundle}")', "        checked = 0", f"{REVIEW}::test_a_node_refuses_a_bundle_whose_archive_uv_lock_never_pinned"),
    ("review: an archive hash is compared", "nemo_rl/workers/archive_hashes.py", "        if recorded != {digest.lower()}:",
     "        if False:", f"{REVIEW}::test_index_archives_carry_uv_locks_hashes"),
    ("review: sdist pointers are read", "nemo_rl/workers/archive_hashes.py", 'rglob("revision.http")',
     'rglob("revision.none")', f"{REVIEW}::test_index_archives_carry_uv_locks_hashes"),
    ("review: an empty --digest is a refused digest", "nemo_rl/envs/command.py",
     "digest_argument(args.digest) if args.digest is not None else None", "digest_argument(args.digest) if args.digest else None",
     f"{REVIEW}::test_an_empty_digest_is_refused_never_taken_for_no_pin"),
    ("review: an empty digest given to check is refused", "nemo_rl/workers/bundles.py",
     "    trusted = {bundle_trust.digest_argument(digest)} if digest is not None else",
     "    trusted = {bundle_trust.digest_argument(digest)} if digest else",
     f"{REVIEW}::test_an_empty_digest_is_refused_never_taken_for_no_pin"),
    ("review: NEMO_RL_BUNDLE_DIGESTS set but empty is refused", "nemo_rl/workers/bundle_trust.py",
     "    if not found:\n        raise", "    if False:\n        raise",
     f"{REVIEW}::test_an_empty_digest_is_refused_never_taken_for_no_pin"),
    ("review: a FIFO in a bundle is refused by check", "nemo_rl/workers/bundle_trust.py",
     "            if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):", "            if False:",
     f"{REVIEW}::test_a_fifo_in_a_bundle_is_refused_never_waited_on"),
    ("review: the digest never opens a FIFO", "nemo_rl/workers/bundles.py",
     "    if not stat.S_ISREG(os.lstat(path).st_mode):  # a FIFO", "    if False:  # a FIFO",
     f"{REVIEW}::test_a_fifo_in_a_bundle_is_refused_never_waited_on"),
    # issue 25's review: the lock's fork dependencies with their extras and markers, on every supported platform
    ("lock: a locked dependency's extras", "nemo_rl/forks/lock_markers.py", '        extras = item.get("extra")',
     "        extras = None", "tests/test_metadata_check.py -k extras_and_marker"),
    ("lock: a requirement's extras", "nemo_rl/forks/lock_markers.py",
     '            result |= {(name, ""), *((name, canonicalize_name(e)) for e in requirement.extras)}',
     '            result |= {(name, "")}', "tests/test_metadata_check.py -k extras_and_marker"),
    ("lock: a locked dependency's marker", "nemo_rl/forks/lock_markers.py",
     "        if marker and (parsed is None or not _evaluate(parsed, env)):", "        if False:",
     "tests/test_metadata_check.py -k narrowed"),
    ("lock: every supported platform, not this machine", "nemo_rl/forks/metadata_check.py",
     "    for env in envs:\n        want, have", "    for env in envs[:1]:\n        want, have",
     "tests/test_metadata_check.py -k another_platform"),
    ("lock: the manifest's markers compared", "nemo_rl/forks/metadata_check.py",
     "    key = (spelled, lock_markers.signature(requirement, envs))", '    key = (spelled, "")',
     "tests/test_metadata_check.py -k manifest"),
    ("lock: the CI check sees a hand-edited dependency", "nemo_rl/forks/metadata_check.py",
     "    if lock_path.exists():\n        result += [(\"uv.lock\"", "    if False:\n        result += [(\"uv.lock\"",
     "tests/test_lock_truth.py -k relocks"),
    ("installed: the lock omits beside an entry: relock", INSTALLED_FORK,
     '    elif unlocked and not any(p.kind == "requirements differ" for p in result):',
     "    elif False:", f"{DECLARED} -k omits"),
    ("installed: an extra's requirements installed", INSTALLED_FORK,
     "            if find_installed(missing, path) is None:\n                result.append(Problem(\"requirement missing\"",
     "            if False:\n                result.append(Problem(\"requirement missing\"", f"{DECLARED} -k extras"),
    ("landing: an edit made in another terminal is not landed over", "nemo_rl/project/landing.py",
     "        if changed:\n            raise NemoRLError(", "        if False:\n            raise NemoRLError(",
     "tests/test_landing.py -k while_staged"),
    ("landing: a directory's files digested", "nemo_rl/project/landing.py",
     '    paths = sorted(p for p in path.rglob("*") if not p.is_dir()) if path.is_dir() else [path]',
     "    paths = [] if path.is_dir() else [path]", "tests/test_landing.py -k while_staged"),
    ("landing: the second terminal's edit survives deps patches", "nemo_rl/project/landing.py",
     "        self.copied = {name: _digest(self.project / name) for name in (*self.files, *self.directories)}",
     "        self.copied = {}", "tests/test_lock_truth.py -k another_terminal"),
    ("derived: an entry spelled differently found", "nemo_rl/forks/declared.py",
     "    entry = next((e for e in entries if canonicalize_name(str(e.get(\"name\"))) == canonicalize_name(derived.name)),",
     "    entry = next((e for e in entries if e.get(\"name\") == derived.name),", "tests/test_metadata_check.py -k spelled"),
    ("derived: an entry spelled differently named", "nemo_rl/forks/declared.py",
     "    if entry.name != derived.name:  # uv takes it", "    if False:  # uv takes it",
     "tests/test_metadata_check.py -k spelled"),
    ("ci: only [declares] changes are printed", ".ci/declares-changes", '  table == "[declares]" && /^[-+]/ {',
     "  /^[-+]/ {", "tests/test_lock_truth.py -k ci_prints"),
    # the hostile review of the bump (fork METADATA, hook answers, a backend's output and children, uv config)
    ("bump: a backend that cannot be imported is named, not its traceback", "nemo_rl/forks/pep517.py",
     "    if isinstance(exc, pyproject_hooks.BackendUnavailable):", "    if False:",
     "tests/test_deps_verify.py -k unreadable_fork_metadata"),
    ("bump: a direct reference the fork declares is refused", "nemo_rl/forks/declared.py",
     "            if name not in dropped:\n", "            if False:\n", f"{DECLARED} -k direct_reference"),
    ("bump: a dropped direct reference is not refused", "nemo_rl/forks/declared.py",
     "            if name not in dropped:\n", "            if True:\n", f"{DERIVED} -k direct_reference"),
    ("bump: a dropped direct reference keeps only its name", "nemo_rl/forks/declared.py",
     "            requirement.url = None\n", "", f"{DECLARED} -k direct_reference"),
    ("bump: the fork's declarations are checked before uv locks", "nemo_rl/forks/bump_steps.py",
     "    return fork_metadata.declares(new, new_rev, fork.distribution, dropped)",
     "    return declared.Declares(new.version, new.requires_python, tuple(new.requires.values()))",
     f"{DERIVED} -k direct_reference"),
    ("bump: the METADATA names the distribution", "nemo_rl/forks/fork_metadata.py",
     "    if canonicalize_name(metadata.name) != canonicalize_name(distribution):", "    if False:",
     f"{DERIVED} -k another_distribution"),
    ("fast: the METADATA names the distribution", "nemo_rl/forks/fork_metadata.py",
     "    if canonicalize_name(metadata.name) != canonicalize_name(distribution):", "    if False:",
     "tests/test_fork_metadata.py -k another_distribution"),
    ("fast: METADATA's Version is PEP 440", "nemo_rl/forks/fork_metadata.py",
     '        Version(message["Version"])\n', "        pass\n", "tests/test_fork_metadata.py -k pep_440"),
    ("bump: METADATA's Version is PEP 440", "nemo_rl/forks/fork_metadata.py",
     '        Version(message["Version"])\n', "        pass\n", f"{DERIVED} -k pep_440"),
    ("fast: a truncated cached answer is rebuilt", "nemo_rl/forks/fork_metadata.py",
     "    except (OSError, ValueError, RecursionError):\n        return None", "    except OSError:\n        return None",
     "tests/test_fork_metadata.py -k damaged"),
    ("fast: a cached answer of another shape is rebuilt", "nemo_rl/forks/fork_metadata.py",
     '    if not isinstance(data, dict) or not _strings(data.get("placeholders", [])):', "    if False:",
     "tests/test_fork_metadata.py -k damaged"),
    ("fast: a cached version is PEP 440", "nemo_rl/forks/fork_metadata.py",
     '        Version(data["version"])\n', "", "tests/test_fork_metadata.py -k damaged"),
    ("fast: cached requirements parse", "nemo_rl/forks/fork_metadata.py",
     "        for line in requires.values():\n            Requirement(line)\n", "",
     "tests/test_fork_metadata.py -k damaged"),
    ("fast: a backend's files are read through the one safe reader", "nemo_rl/forks/pep517.py",
     "    return values.read_plain_file(path, limit)", "    return Path(path).read_bytes()",
     "tests/test_pep517.py"),
    ("fast: METADATA is read like a hook's answer", "nemo_rl/forks/fork_metadata.py",
     '        return pep517.read_bounded(path, METADATA_LIMIT).decode(errors="replace")',
     '        return path.read_bytes().decode(errors="replace")', "tests/test_fork_metadata.py -k without_a_name"),
    ("fast: a backend's output is kept only in part", "nemo_rl/forks/pep517.py",
     "timeout=WHEEL_TIMEOUT_S if wheel else METADATA_TIMEOUT_S, keep=OUTPUT_KEPT)",
     "timeout=WHEEL_TIMEOUT_S if wheel else METADATA_TIMEOUT_S)", "tests/test_pep517.py -k kept_only_in_part"),
    ("fast: kept output is bounded while it is read", "nemo_rl/process.py",
     "        if self.limit is not None and len(self.data) > 2 * self.limit:", "        if False:", "tests/test_process.py -k keep"),
    ("fast: what a finished child left in its group is ended", "nemo_rl/process.py",
     "            _signal_group(proc, signal.SIGKILL)\n            proc.wait()\n            interrupt",
     "            proc.wait()\n            interrupt",
     "tests/test_process.py -k finished_child"),
    ("fast: pipes are not waited on once the child exited", "nemo_rl/process.py",
     "                    if timeout <= 0:\n                        break", "                    if False:\n                        break",
     "tests/test_process.py -k not_waited_on"),
    ("fast: the user's uv configuration is read", "nemo_rl/uv.py",
     '"run", "--project", os.path.abspath(os.sep), "--no-project",', '"run", "--no-config", "--no-project",',
     "tests/test_pep517.py -k users_uv_configuration"),
    ("fast: the fork's uv configuration is not", "nemo_rl/uv.py",
     '"run", "--project", os.path.abspath(os.sep), "--no-project",', '"run", "--no-project",',
     "tests/test_pep517.py -k users_uv_configuration"),
    ("fast: build requirements are bounded in number", "nemo_rl/forks/pep517.py",
     "        if len(requirements) > REQUIRES_LIMIT:", "        if False:", "tests/test_pep517.py -k thousands"),
    ("fast: build requirements are bounded in length", "nemo_rl/forks/pep517.py",
     "> REQUIREMENT_LIMIT), None):", "> REQUIREMENT_LIMIT), None) and False:", "tests/test_pep517.py -k thousands"),
    ("fast: patches takes options anywhere among its words", "nemo_rl/deps/cli.py",
     "    p.__class__ = _PatchesParser", "    pass", "tests/test_cli.py -k anywhere"),
    ("fast: patches takes words after --", "nemo_rl/deps/cli.py",
     '[*(getattr(namespace, "words", None) or []), *tail]', '[*(getattr(namespace, "words", None) or [])]',
     "tests/test_cli.py -k anywhere"),
    ("plain: the reader refuses links and FIFOs before opening", "nemo_rl/values.py",
     "    if not stat.S_ISREG(info.st_mode):\n", "    if False:\n",
     f"{PLAIN}::test_the_reader_refuses_what_is_not_a_plain_file"),
    ("plain: the reader checks the file it opened", "nemo_rl/values.py",
     "if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):",
     "if False:", f"{PLAIN}::test_the_reader_checks_the_file_it_opened"),
    ("plain: the reader's size cap", "nemo_rl/values.py", "            if size > limit:", "            if False:",
     f"{PLAIN}::test_the_reader_refuses_what_is_not_a_plain_file"),
    ("plain: state files through the one reader", "nemo_rl/values.py",
     "return json.loads(read_plain_file(path).decode())", "return json.loads(path.read_text())",
     f"{PLAIN}::test_a_fifo_worker_metadata_is_broken_not_a_hang"),
    ("plain: the CUDA record through the one reader", "nemo_rl/workers/cuda_archs.py",
     "return values.read_plain_file(bundle / SIDECAR)", "return (bundle / SIDECAR).read_bytes()",
     f"{PLAIN}::test_a_fifo_cuda_record_is_refused_not_a_hang"),
    ("plain: overlay owners through the one reader", "nemo_rl/project/develop_state.py",
     "lines = values.read_plain_file(path, OVERLAY_MAX).decode(errors=\"replace\").splitlines()[:3]",
     "lines = path.read_text(errors=\"replace\").splitlines()[:3]",
     f"{PLAIN}::test_a_fifo_overlay_never_hangs_stop"),
    ("plain: overlay listing through the one reader", "nemo_rl/project/develop_state.py",
     "return values.read_plain_file(path, OVERLAY_MAX).decode(errors=\"replace\").splitlines()",
     "return path.read_text(errors=\"replace\").splitlines()",
     f"{PLAIN}::test_a_fifo_overlay_never_hangs_stop"),
    ("plain: stop skips another user's worker environment", "nemo_rl/deps/develop.py",
     "and path.lstat().st_uid == os.getuid()", "",
     f"{PLAIN}::test_stop_leaves_another_users_worker_environment_alone"),
    ("plain: an overlay that cannot be removed is a NemoRLError", "nemo_rl/project/develop_state.py",
     'raise NemoRLError(f"cannot remove the overlay', 'raise PermissionError(f"cannot remove the overlay',
     f"{PLAIN}::test_an_overlay_that_cannot_be_removed_is_the_users_to_fix"),
    ("plain: another container's environment is never pruned", "nemo_rl/workers/housekeeping.py",
     "elif (foreign := develop_state.foreign_overlay(path, mine)) is not None:", "elif (foreign := None) is not None:",
     f"{PLAIN}::test_a_checkout_at_the_same_path_in_another_container_keeps_its_environments"),
    ("plain: a develop token is all hex (fullmatch)", "nemo_rl/project/develop_state.py",
     "if not isinstance(token, str) or not _TOKEN.fullmatch(token):",
     "if not isinstance(token, str) or not re.match(r\"^[0-9a-f]{0,64}$\", token):",
     f"{PLAIN}::test_a_token_with_a_newline_is_refused"),
    ("plain: an overlay's owner token is all hex (fullmatch)", "nemo_rl/project/develop_state.py",
     "    if not _TOKEN.fullmatch(owner):\n", "    if not re.match(r\"^[0-9a-f]{0,64}$\", owner):\n",
     f"{PLAIN}::test_a_token_with_a_newline_is_refused"),
    ("plain: an empty owner line is nobody's", "nemo_rl/project/develop_state.py",
     "    return owner if owner and _TOKEN.fullmatch(owner) else None", "    return owner",
     f"{PLAIN}::test_an_empty_owner_line_is_nobodys_not_tokenless"),
    ("plain: a FIFO copied from a bundle is named", "nemo_rl/workers/bundles.py",
     "                _copy_tree(bucket, cache / bucket.name, bundle)",
     "                shutil.copytree(bucket, cache / bucket.name, symlinks=True)",
     f"{PLAIN}::test_a_fifo_planted_after_the_check_is_named"),
    ("plain: stop says a deleted checkout is gone", "nemo_rl/deps/develop.py",
     "if entry.checkout.exists()\n", "if True\n", f"{PLAIN}::test_stop_says_a_deleted_checkout_is_gone"),
    ("plain: an archive pointer is keyed by where it lies", "nemo_rl/workers/archive_hashes.py",
     "if pointer.label and wheel_key(pointer.label) != key:", "if False:",
     f"{PLAIN}::test_an_archive_pointer_is_keyed_by_its_path_and_every_hash_counts"),
    ("plain: every hash entry of a pointer counts", "nemo_rl/workers/archive_hashes.py",
     "        if recorded != {digest.lower()}:", "        if digest.lower() not in recorded:",
     f"{PLAIN}::test_an_archive_pointer_is_keyed_by_its_path_and_every_hash_counts"),
    ("plain: an empty directory is no checkout", "nemo_rl/project/develop_state.py",
     'return checkout.is_dir() and (checkout / ".git").exists()', "return checkout.is_dir()",
     f"{PLAIN}::test_an_empty_directory_at_the_checkout_is_a_gone_checkout"),
    ("plain: --onto during a merge says to finish it", "nemo_rl/deps/develop.py",
     "    under_way = git.operation_in_progress(checkout)\n", "    under_way = None\n",
     f"{PLAIN}::test_onto_during_a_merge_says_to_finish_it"),
    ("plain: NEMO_RL_BUNDLE_DIR's whitespace is named", "nemo_rl/settings.py",
     "    if setting != setting.strip():  #", "    if False:  #", f"{PLAIN}::test_a_bundle_dir_with_whitespace_is_named"),
    ("plain: a quoted digest says to drop the quotes", "nemo_rl/values.py",
     "        if len(text) > 1 and text[0] == text[-1]", "        if False and text[0] == text[-1]",
     f"{PLAIN}::test_a_quoted_digest_says_to_drop_the_quotes"),
    ("plain: a Decimal timeout is refused by its type", "nemo_rl/values.py",
     "    if seconds is None and isinstance(value, numbers.Number)", "    if False and isinstance(value, numbers.Number)",
     f"{PLAIN}::test_a_decimal_timeout_is_refused_by_its_type"),
    ("plain: an empty unmarked working cache is a killed build's", "nemo_rl/workers/bundle_trust.py",
     "    if marker is None and _empty(path):", "    if False:", f"{PLAIN}::test_an_empty_unmarked_working_cache_is_a_killed_builds"),
    ("plain: a leftover working cache's hard link is named", "nemo_rl/workers/bundle_trust.py",
     "            if leftover is not None:\n", "            if False:\n",
     f"{PLAIN}::test_a_hard_link_from_a_leftover_working_cache_is_named"),
    # a locked or installed version the fork's requirement refuses (an override, a pasted [[package]])
    ("locked version: held against the requirement", "nemo_rl/forks/metadata_check.py",
     "        if SpecifierSet(str(requirement.specifier), prereleases=parsed.is_prerelease).contains(parsed):",
     "        if True:", "tests/test_metadata_check.py -k refuses"),
    ("locked version: a prerelease allowed when locked as one", "nemo_rl/forks/metadata_check.py",
     "prereleases=parsed.is_prerelease).contains(parsed)", ").contains(parsed)",
     "tests/test_metadata_check.py -k refuses"),
    ("locked version: the one the fork's dependency names", "nemo_rl/forks/metadata_check.py",
     "        version = str(named[name]) if named[name] is not None and len(versions) > 1 else versions[0]",
     "        version = versions[-1]", "tests/test_metadata_check.py -k refuses"),
    ("locked version: an override named as the cause", "nemo_rl/forks/metadata_check.py",
     "then run `uv lock`)\" if name in overrides else", "then run `uv lock`)\" if False else",
     "tests/test_metadata_check.py -k refuses"),
    ("locked version: checked by the offline check", "nemo_rl/forks/metadata_check.py",
     "    result += _version_gaps(lock, package.get(\"dependencies\"), requirements, envs)\n", "",
     "tests/test_lock_truth.py -k locked_version_the_fork"),
    ("installed version: held against the requirement", INSTALLED_FORK,
     "    result += _refused_versions(want_here, path, skipped, distribution)\n", "",
     "tests/test_lock_truth.py -k locked_version_the_fork"),
    ("patches: what a relock leaves is rc 1", "nemo_rl/deps/patches.py", "    return 1 if left else 0",
     "    return 0", "tests/test_lock_truth.py -k locked_version_the_fork"),
    ("status: an override's fix is to edit it", "nemo_rl/deps/status.py", "        remedy = OVERRIDDEN", "        pass",
     "tests/test_lock_truth.py -k locked_version_the_fork"),
    ("markers: sampled at each version literal compared", "nemo_rl/forks/lock_markers.py",
     "    points += [p for p in _literal_points(markers)", "    points += [p for p in _literal_points(())",
     "tests/test_metadata_check.py -k inside"),
    ("markers: and at the micro after it", "nemo_rl/forks/lock_markers.py",
     "            found |= {(major, minor, micro), (major, minor, micro + 1)}",
     "            found |= {(major, minor, micro)}", "tests/test_metadata_check.py -k inside"),
    ("locked dependency: an override that replaced it named", "nemo_rl/forks/metadata_check.py",
     "        overridden = sorted({m.split(\"[\")[0].split(\" \")[0] for m in missing} & _overrides(lock).keys())",
     "        overridden: list[str] = []", "tests/test_metadata_check.py -k override_replaced"),
    ("patches --check: an override's fix is to edit it", "nemo_rl/deps/patches.py",
     '            overridden += [fork.distribution] if any(', "            overridden += [] if any(",
     "tests/test_lock_truth.py -k locked_version_the_fork"),
    ("runner: an interrupt ends the pytest runs going on", "tests/check_mutations.py",
     "    with RUNNING_LOCK:\n        for pgid in RUNNING:", "    with RUNNING_LOCK:\n        for pgid in ():",
     "tests/test_check_mutations.py -k interrupted_runner"),
    ("runner: SIGTERM ends the runner as Ctrl-C does", "tests/check_mutations.py",
     "        signal.signal(signum, _interrupted)\n", "        pass\n",
     "tests/test_check_mutations.py -k interrupted_runner"),
    # issue 25's second review: recover re-checks the digests; a landing cut short said as it is; both problems said
    ("recover: no landing over an edit made since staging", "nemo_rl/project/landing.py",
     "    _require_unchanged(project, staging, moves, before)\n", "", "tests/test_recover.py -k never_lands_over"),
    ("recover: a directory swap cut short is no edit", "nemo_rl/project/landing.py",
     "        return held is None and old.is_dir() and _digest(old) == before[name]", "        return False",
     "tests/test_recover.py -k directory_swap"),
    ("recover: a journal without digests lands nothing", "nemo_rl/project/landing.py",
     "            return before is not None", "            return True", "tests/test_recover.py -k without_digests"),
    ("bump: the journal records what each path held", "nemo_rl/project/landing.py",
     '"before": {n: self.copied[n] for n in moves}', '"before": None',
     "tests/test_landing.py -k unchanged_project_lands"),
    ("fast: a journal's digests, one per move", "nemo_rl/project/landing.py",
     "    if before is not None and (not isinstance(before, dict)", "    if False and (not isinstance(before, dict)",
     "tests/test_landing.py -k digests"),
    ("fast: recover says what had moved before it", "nemo_rl/deps/recover.py",
     "            before = [name for name in moves if name not in moved]", "            before = []",
     "tests/test_recover.py -k never_landed"),
    ("fast: a landing cut short is only its forks' state", "nemo_rl/deps/status.py",
     "return cut.unreadable is not None or not records_moved or records.relative_dir(distribution) in records_moved",
     "return True", "tests/test_status.py -k forks_it_changes"),
    ("fast: a landing cut short before any move says so", "nemo_rl/deps/status.py", " if not cut.moved else",
     " if False else", "tests/test_status.py -k never_a_move"),
    ("status: the environment beside a lock problem", "nemo_rl/deps/status.py",
     "if state is None or (state in LOCK_STATES and present):", "if state is None:",
     "tests/test_deps_status.py -k both_said"),
    ("fast: status --check fails on the environment beside a lock problem", "nemo_rl/deps/status.py",
     "row.state in FAILING or row.environment for row", "row.state in FAILING for row",
     "tests/test_status.py -k beside"),
    # a version refused further down the fork's closure (uv.lock records no specifier for a registry package's needs)
    ("installed closure: a refused transitive version named", INSTALLED_FORK,
     "    result += _refused_in_closure(lock, depends, markers, path, skipped | {name}, distribution)\n", "",
     "tests/test_lock_truth.py -k transitive"),
    ("installed closure: an extra's requirements followed", INSTALLED_FORK,
     '_evaluate(requirement.marker, markers | {"extra": o})', "_evaluate(requirement.marker, markers)",
     "tests/test_lock_truth.py -k transitive"),
    ("fast: installed closure: walked past the first level", INSTALLED_FORK,
     "        todo += sorted(lock_markers.locked(needs, markers))\n", "", "tests/test_declared.py -k deep"),
    ("fast: installed closure: another fork's own requirements are its check", INSTALLED_FORK,
     "if dep in skipped or dep in derived or option in", "if dep in skipped or option in",
     "tests/test_declared.py -k deep"),
    ("runner: a hint that no longer fails falls back to the selection", "tests/check_mutations.py",
     "    if with_mutation is None or not with_mutation.failed:\n", "    if with_mutation is None:\n",
     "tests/test_check_mutations.py -k killer_first"),
    ("runner: a hint only for the selection it was caught in", "tests/check_mutations.py",
     "hint[\"tests\"] == tests", "True", "tests/test_check_mutations.py -k hints_are_kept"),
]



# The pytest runs going on, each its own process group (so a timeout kills Ray too), ended when the runner is
# interrupted: a run in its own session outlives its parent otherwise.
RUNNING: set[int] = set()
RUNNING_LOCK = threading.Lock()
STOPPING = threading.Event()


class Stopped(Exception):
    """The runner was interrupted: no new pytest run starts."""


def run_pytest(copy: Path, selection: list[str], scratch: Path, timeout: float) -> Run:
    """pytest over `selection` with the code of `copy`, in its own process group (a timeout kills Ray too)."""
    if STOPPING.is_set():
        raise Stopped
    scratch.mkdir(parents=True, exist_ok=True)
    report = scratch / "junit.xml"
    report.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(copy), str(copy / "tests")]),
           # bytecode of its own: the copy's mutated and restored sources can share an mtime and a size
           "PYTHONPYCACHEPREFIX": str(scratch / "pycache")}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "mutation_verdicts",
            f"--junitxml={report}", "-o", "junit_family=xunit1", *selection]
    proc = subprocess.Popen(argv, cwd=copy, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    with RUNNING_LOCK:
        RUNNING.add(proc.pid)
    try:
        if STOPPING.is_set():  # interrupted while it started: end_runs may have looked before it was added
            raise Stopped
        returncode = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        returncode = None
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # what the run left behind (Ray's processes), or the run itself
        except ProcessLookupError:
            pass
        proc.wait()
        with RUNNING_LOCK:
            RUNNING.discard(proc.pid)
    if STOPPING.is_set():  # killed by end_runs: its report proves nothing
        raise Stopped
    return classify(report.read_text() if report.exists() else None, returncode)


def verdict_of(copy: Path, file: str, mutated: str, tests: str, scratch: Path, timeout: float,
               first: str | None = None) -> tuple[str, str]:
    """The verdict on one mutation of `copy` (a checkout copy holding the original text): its tests with the
    mutation; when one fails, that test alone without the mutation, then alone with it once more. `first`: the
    test that caught this mutation last time (a hint), run alone before the whole selection, which runs only
    when it does not fail: the verdict is the same, and a row whose killer sits late in a slow file costs one
    test instead of the file."""
    target = copy / file
    text = target.read_text()
    target.write_text(mutated)
    with_mutation = run_pytest(copy, [first], scratch / "mutated", timeout) if first else None
    if with_mutation is None or not with_mutation.failed:
        with_mutation = run_pytest(copy, tests.split(), scratch / "mutated", timeout)
    if not with_mutation.failed:
        return judge(with_mutation)
    target.write_text(text)
    baseline = run_pytest(copy, [with_mutation.failed[0]], scratch / "baseline", timeout)
    if baseline.inconclusive or baseline.failed:
        return judge(with_mutation, baseline)
    target.write_text(mutated)
    return judge(with_mutation, baseline, run_pytest(copy, [with_mutation.failed[0]], scratch / "mutated", timeout))


def run_one(file: str, original: str, mutated: str, tests: str, timeout: float,
            first: str | None = None) -> tuple[str, str]:
    with tempfile.TemporaryDirectory(prefix="nemo-rl-mutation-") as tmp:
        copy = Path(tmp) / "repo"
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".git", "venvs", ".nemo-rl",
                                                                   "benchmark-results", "__pycache__"))
        text = (copy / file).read_text()
        if text.count(original) != 1:
            return "not applied", f"the original text occurs {text.count(original)} times"
        return verdict_of(copy, file, text.replace(original, mutated), tests, Path(tmp), timeout, first)


OUTCOMES = ("caught", "inconclusive", "survived", "flaky", "not applied")

# Which test caught each mutation last time, with the selection it was caught in (a hint is used only while the
# row's selection is unchanged). Each caught row updates it as the run goes, so an interrupted run keeps what
# it learnt. Committed: the next run, anywhere, starts from it.
HINTS = ROOT / "tests" / "mutation_killers.json"


class Hints:
    def __init__(self, path: Path, use: bool) -> None:
        self.path, self.lock = path, threading.Lock()
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        self.known = {k: v for k, v in data.items() if isinstance(v, dict) and isinstance(v.get("tests"), str)
                      and isinstance(v.get("killer"), str)} if isinstance(data, dict) else {}
        self.use = use

    def first(self, name: str, tests: str) -> str | None:
        hint = self.known.get(name)
        return hint["killer"] if self.use and hint and hint["tests"] == tests else None

    def caught(self, name: str, tests: str, killer: str) -> None:
        with self.lock:
            self.known[name] = {"tests": tests, "killer": killer}
            names = {m[0] for m in MUTATIONS}
            text = json.dumps({k: self.known[k] for k in sorted(self.known) if k in names}, indent=1) + "\n"
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            tmp.write_text(text)
            os.replace(tmp, self.path)


def end_runs() -> None:
    """Kill every pytest run going on (its whole group: Ray's processes too); none starts afterwards."""
    STOPPING.set()
    with RUNNING_LOCK:
        for pgid in RUNNING:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM (a cancelled job) and SIGHUP end the runner as Ctrl-C does


# Runs whose tests time signals or start a Ray cluster get the machine to themselves: beside another run they
# time out on a busy machine and prove nothing.
ALONE = (RAY, INTERRUPTS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", action="append", default=[], help="only mutations whose name contains this "
                        "(repeat for any of several)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds one pytest run may take (default 3600)")
    parser.add_argument("--no-hints", action="store_true", help="run each mutation's whole selection first, not "
                        "the test that caught it last time (tests/mutation_killers.json)")
    parser.add_argument("--jobs", type=int, default=1, help="mutations run at once, each in its own copy (default 1); "
                        "those of the Ray and interruption tests always run alone")
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error("--jobs must be 1 or more")
    counts = dict.fromkeys(OUTCOMES, 0)
    hints = Hints(HINTS, use=not args.no_hints)
    selected = [m for m in MUTATIONS if not args.k or any(k in m[0] for k in args.k)]

    def one(mutation: tuple[str, str, str, str, str]) -> None:
        name, file, original, mutated, tests = mutation
        started = time.monotonic()
        outcome, detail = twice(functools.partial(run_one, file, original, mutated, tests, args.timeout,
                                                  hints.first(name, tests)))
        counts[outcome] += 1
        if outcome == "caught":
            hints.caught(name, tests, detail.split(" (")[0])
        shown = f"caught by {detail}" if outcome == "caught" else f"{outcome.upper()} ({detail})"
        print(f"| {name} | {tests} | {shown.replace('|', '/')} | {time.monotonic() - started:.0f} |", flush=True)

    print("| check removed | tests | result | s |\n|---|---|---|---|")
    alone = [m for m in selected if any(t in m[4] for t in ALONE)]
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupted)
    pool = concurrent.futures.ThreadPoolExecutor(args.jobs)
    try:
        for future in [pool.submit(one, m) for m in selected if m not in alone]:
            future.result()
        for mutation in alone:
            one(mutation)
    except KeyboardInterrupt:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)  # the cleanup takes a moment: a second signal cannot cut it short
        end_runs()
        pool.shutdown(wait=True, cancel_futures=True)  # the runs going on were killed: their threads end now
        print(f"\ninterrupted after {sum(counts.values())} of {len(selected)} mutation(s): "
              + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES if counts[o]), flush=True)
        return 130
    pool.shutdown()
    total = sum(counts.values())
    print(f"\n{total} mutation(s): " + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES if counts[o] or o != "not applied"))
    return 0 if total and counts["caught"] == total else 1


if __name__ == "__main__":
    sys.exit(main())
