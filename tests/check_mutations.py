"""Delete each check once and see a test fail: a hand-made mutation run over the checks of `deps patches --check`,
bump's validation, status's states, what is read from disk, and the worker environments.

    uv run python tests/check_mutations.py                     # every mutation
    uv run python tests/check_mutations.py -k digest           # those whose name contains "digest"
    uv run python tests/check_mutations.py -k digest -k lock   # ... "digest" or "lock"
    uv run python tests/check_mutations.py --jobs 2            # two at a time (the Ray and signal ones alone)

Each mutation edits one place in a copy of the checkout in a temporary directory (the checkout is never changed)
and runs the tests that cover it with PYTHONPATH pointing at the copy. A mutation is

- caught: a test failed in its own body (an assertion, or an error the test raised), failed when run alone
  with the mutation, and passes alone once the mutation is undone. The test that caught a row last time (a
  hint) runs alone first: when it fails, that was its run alone (rows of the tests that time signals,
  processes, waits or a Ray cluster make it once more after the run without the mutation, as a failure there
  can clear with time); a test's run without any mutation is made once per runner run, as every row's copy is
  made from one snapshot of the checkout taken at the start;
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
NODE_COPY = "tests/test_node_copy.py"
ARCHS = "tests/test_cuda_archs.py"  # its nvcc tests run with CUDA_HOME naming a CUDA 12 toolkit
SEED = "tests/test_pack_seed.py"
LIBS = "tests/test_cuda_libs.py"
DECLARED = "tests/test_declared.py"
DERIVED = "tests/test_deps_declared.py"
NO_ENTRY = "tests/test_lock_truth.py -k without_a_derived"
SEQUENCE = "tests/test_lock_sequence.py"
INSTALLED_FORK = "nemo_rl/forks/installed_fork.py"
SCRATCH = "tests/test_scratch.py"
NEVER = "tests/test_never_trusts.py"
REVIEW = "tests/test_never_trusts_review.py"
PLAIN = "tests/test_plain_files.py"
WHOSE = "tests/test_whose_environment.py"
FIXES = "tests/test_review_fixes.py"
REST = "tests/test_review24_rest.py"
TERMINAL = "tests/test_terminal_text.py"

# (name, file, original text, mutated text, tests that must catch it)
MUTATIONS = [
    # a fork without a derived entry: uv.lock's [[package]] against [declares] (review 25 F7)
    ("no entry: bump records [declares] for every fork", "nemo_rl/forks/bump_steps.py",
     '    progress("reading the fork\'s own metadata at the new commit (its build backend)")',
     '    if not before.derives:\n        return None\n    progress("reading the fork\'s own metadata")', NO_ENTRY),
    ("no entry: deps patches records [declares] for every fork", "nemo_rl/deps/patches.py",
     "index, noted = records.build(staged, records.read_index(staged), fork, fork.rev, base, recs, declares)",
     "index, noted = records.build(staged, records.read_index(staged), fork, fork.rev, base, recs, "
     "declares if derives or not staged.exists() else None)", NO_ENTRY),
    ("no entry: the offline check compares the locked fork with [declares]", "nemo_rl/forks/metadata_check.py",
     "                        if lock_path.exists() else [])", "                        if False else [])", NO_ENTRY),
    ("no entry: no manifest entry required", "nemo_rl/forks/locked_fork.py",
     "    if not derived_entry:\n        return result", "    if False:\n        return result",
     "tests/test_metadata_check.py -k without_a_derived"),
    ("no entry: the fork's own extras are locked", "nemo_rl/forks/locked_fork.py", "    if extras and derived_entry:",
     "    if extras:", "tests/test_metadata_check.py -k without_a_derived"),
    ("no entry: deps patches relocks a hand-edited lock", "nemo_rl/deps/patches.py",
     "relocked = not written and not", "relocked = derives and not written and not", NO_ENTRY),
    ("no entry: status names no entry that does not exist", "nemo_rl/forks/installed_fork.py",
     '"uv.lock\'s [[package]], edited by hand,")', '"its [[tool.uv.dependency-metadata]] entry")', NO_ENTRY),
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
    ("bump: landing journal rolls forward", "nemo_rl/project/landing.py", "if (self.path / journal.JOURNAL).exists():", "if False:",
     BUMP),
    ("status: bad pin", "nemo_rl/deps/status.py", "bad_pin=bool(fork.bad_rev)", "bad_pin=False", STATUS),
    ("status: records stale", "nemo_rl/deps/status.py", "records_stale=bool(problems)", "records_stale=False", STATUS),
    ("status: lock stale", "nemo_rl/deps/status.py",
     "    lock_stale = locked_commit != fork.rev or bool(package and package.other_source(fork))", "    lock_stale = False",
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
    ("trust: journal names landable paths only", "nemo_rl/project/journal.py",
     "            or not all(_landable(name) for name in moves)):", "            or False):", TRUST),
    ("trust: leftovers only while no command holds the lock", "nemo_rl/project/journal.py",
     "if not stagings or (not locked and locks.held(project)):", "if not stagings:", TRUST),
    ("trust: bump holds the project lock", "nemo_rl/deps/bump.py", "    with state_dir.project_lock(project, wait=not args.no_wait):\n        return bump(project, args)",
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
    ("trust: rev on the recorded branch", "nemo_rl/forks/fork_cache.py",
     "        if on_branch and fork.branch and not on_fork_branch():",
     "        if False:",
     f"{TRUST} {DEVELOP}"),
    ("trust: upstream commit is not a fork commit", "nemo_rl/forks/fork_cache.py",
     "            if not on_fork_branch():", "            if False:", TRUST),
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
    ("guard: drift's changed", "nemo_rl/forks/fork_metadata.py", "for n in sorted(old.keys() & new.keys()) if old[n] != new[n]]", "for n in sorted(old.keys() & new.keys()) if False]",
     GUARDS),
    ("guard: drift leaves out extras", "nemo_rl/forks/fork_metadata.py", '        if not lock_markers.base_requirement(req):', "        if False:",
     GUARDS),
    ("guard: verify --locked", "nemo_rl/deps/verify.py", 'flags = ["--locked", "--extra", extra', 'flags = ["--extra", extra', GUARDS),
    ("guard: doctor's developing", "nemo_rl/doctor/report.py", '        if checkout and state in ("ok", "env stale", "installed differs"):', "        if False:",
     GUARDS),
    # issue 16: worker environments that never lie
    ("workers: fork commit checked", "nemo_rl/workers/environments.py", "            if mismatch:\n", "            if False:\n", RAY),
    ("workers: Python version checked", "nemo_rl/workers/environments.py", "    if result.python != platform.python_version():",
     "    if False:", RAY),
    ("workers: Python version in the key", "nemo_rl/workers/environments.py", '"python": platform.python_version(), "platform"',
     '"platform"', f"{RAY} -k another_python"),
    ("workers: project in the key", "nemo_rl/workers/environments.py", '    facts = {"project": str(project.resolve()), "lock"',
     '    facts = {"lock"', RAY),
    ("workers: prune's in-use check", "nemo_rl/workers/housekeeping.py",
     "            if users(row.path):  # in use, asked under the lock", "            if False:  # in use, asked under the lock", RAY),
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
    ("bundles: links to directories in the digest", "nemo_rl/workers/bundles.py", "        links = [name for name in dirnames if os.path.islink(os.path.join(dirpath, name))]",
     "        links = []", BUNDLES),
    ("bundles: an unfinished pack is no bundle", "nemo_rl/workers/manifests.py", '    if ".packing-" in bundle.name:', "    if False:", BUNDLES),
    ("bundles: a live node build's cache is kept", "nemo_rl/locks.py",
     "    held = try_hold(directory)\n    if held is None:\n        return False\n    try:\n        if not remove",
     "    held = os.open(directory, os.O_RDONLY)\n    if held is None:\n        return False\n    try:\n        if not remove",
     HOUSEKEEPING),
    ("bundles: dead packs removed", "nemo_rl/workers/bundle_pack.py", "            shutil.rmtree(leftover, ignore_errors=True)", "            pass", BUNDLES),
    ("bundles: hidden directories are not bundles", "nemo_rl/workers/bundles.py", 'if not p.name.startswith(".") and (p / MANIFEST).is_file())',
     "if (p / MANIFEST).is_file())", BUNDLES),
    ("bundles: no pack while developing", "nemo_rl/workers/bundle_pack.py", "    if develop_state.read(project):\n", "    if False:\n", BUNDLES),
    ("bundles: uv writes into a working cache, never the node's copy", "nemo_rl/workers/bundles.py",
     "            tree_copy.link_tree(copy, cache)", "            os.rmdir(cache)\n            os.symlink(copy, cache)",
     f"{NEVER} -k installed_is_what"),
    ("bundles: transformer-engine pre-flight", "nemo_rl/workers/bundle_pack.py", "        if unbuildable:\n", "        if False:\n", BUNDLES),
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
    ("upstream: a conflict is a conflict", "nemo_rl/forks/trial_rebase.py", "        return Merge.parse(result.stdout, result.returncode == 0, (ours, theirs))", "        return Merge.parse(result.stdout, result.returncode in (0, 1), (ours, theirs))", UPSTREAM),
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
     "    except NemoRLError as problem:\n        return [f\"  requirements: not compared:",
     "    except ValueError as problem:\n        return [f\"  requirements: not compared:", BUMP),
    ("interrupt: the handler records the signal", "nemo_rl/interrupt.py", "    if not _received:\n        _received.append(signum)",
     "    pass", INTERRUPTS),
    ("interrupt: a wait for a child looks at the flag", "nemo_rl/process.py", "        interrupt.check()\n        if self._deadline is None:",
     "        if self._deadline is None:", f"{INTERRUPTS} -k whole_group"),
    ("interrupt: a wait for a lock looks at the flag", "nemo_rl/locks.py", "    while True:\n        interrupt.check()\n",
     "    while True:\n", INTERRUPTS),
    ("interrupt: a signal before the verb stops it", "nemo_rl/cli.py", "        interrupt.check()  # a signal while the verbs were imported\n",
     "", f"{INTERRUPTS} -k before_the_verb"),
    ("interrupt: a signal after the last checkpoint is an interruption", "nemo_rl/cli.py",
     "        interrupt.check()  # a signal that came after the last checkpoint", "        pass  #", INTERRUPTS),
    ("interrupt: a landing is recorded as complete", "nemo_rl/project/journal.py", "    interrupt.completed(", "    (lambda step: None)(",
     INTERRUPTS),
    ("pipe: a reader that left does not abandon the work", "nemo_rl/__main__.py", "            if exc.errno not in (errno.EPIPE, errno.EIO):",
     "            if True:", INTERRUPTS),
    ("interrupt: a child dead of the same signal is an interruption", "nemo_rl/process.py",
     "            interrupt.check()  # a child that died of the very signal", "            pass  #",
     f"{INTERRUPTS} -k dead_of_the_signal"),
    ("interrupt: an error after a signal exits as interrupted", "nemo_rl/cli.py",
     "        if (signum := interrupt.received()) is not None:  # a child died",
     "        if False and (signum := interrupt.received()) is not None:  # a child died", INTERRUPTS),
    ("interrupt: no landing starts after a signal", "nemo_rl/project/landing.py",
     "        interrupt.check()  # the last point at which nothing has changed\n", "", INTERRUPTS),
    ("interrupt: the forced exit is armed", "nemo_rl/interrupt.py", "    signal.alarm(FORCE_AFTER_S)", "    pass",
     f"{INTERRUPTS} -k without_a_checkpoint"),
    ("interrupt: a second signal ends at once", "nemo_rl/interrupt.py",
     "    if _received:  # a second signal: the user insists\n        _force(signum, frame)\n", "", INTERRUPTS),
    ("interrupt: nohup's ignored SIGHUP stays ignored", "nemo_rl/interrupt.py",
     "        if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:\n            continue\n", "", INTERRUPTS),
    ("process: children in a session of their own", "nemo_rl/process.py", "            start_new_session=True,\n",
     "            process_group=0,\n", INTERRUPTS),
    # Not listed, being equivalent: `Running.end` skipping a collected child (`if self._result is None`), since
    # `_end_groups` itself signals only a child whose returncode is still None.
    ("process: a boolean timeout is refused", "nemo_rl/values.py", "    if not isinstance(value, bool) and isinstance(", "    if isinstance(", INTERRUPTS),
    ("process: a streaming child's stderr passes through", "nemo_rl/process.py", "                        to_stderr(chunk)",
     "                        pass", INTERRUPTS),
    ("pipe: a closed stderr at start-up gets /dev/null", "nemo_rl/__main__.py",
     "            os.dup2(os.open(os.devnull, os.O_RDWR), fd)", "            pass", f"{INTERRUPTS} -k never_the_next"),
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
    ("values: a URL ends at the end", "nemo_rl/values.py", r'file)://[^\s\x00-\x1f\x7f]+\Z"',
     r'file)://[^\s\x00-\x1f\x7f]+$"',
     "tests/test_values.py -k final_newline"),
    ("values: an scp-style URL ends at the end", "nemo_rl/values.py", r'[^\s\x00-\x1f\x7f]*\Z")',
     r'[^\s\x00-\x1f\x7f]*$")',
     "tests/test_values.py -k final_newline"),
    ("extras: --no-install-package leaves a fork out", "nemo_rl/project/lockfile.py",
     "    if canonicalize_name(distribution) in left_out:\n        return False\n", "", "tests/test_values.py -k leave_out"),
    ("node: uv links the node's checked copy into the environment", "nemo_rl/workers/bundles.py",
     '"UV_LINK_MODE": "hardlink"})', '"UV_LINK_MODE": "copy"})', f"{NEVER} -k installed_is_what"),
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
    ("review: copies into the working cache lose group/other write", "nemo_rl/workers/tree_copy.py",
     "                      info.st_mode & 0o755)  # uv keeps", "                      info.st_mode & 0o777)  # uv keeps",
     "tests/test_bundles.py -k never_writable"),
    ("review: a build's environment loses group/other write", "nemo_rl/workers/bundles.py",
     "                os.chmod(path, st.st_mode & 0o7777 & ~0o022)", "                pass",
     "tests/test_bundles.py -k umask"),
    ("review: verification refuses what others may write", "nemo_rl/workers/environments.py",
     "    if loose := verified.loose(env.path):", "    if loose := []:", "tests/test_verified.py -k others_may_write"),
    ("review: group/other-writable paths are found", "nemo_rl/workers/verified.py",
     "                    if (st.st_mode & 0o022 or st.st_uid != euid) and not stat.S_ISLNK(st.st_mode):",
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
    ("derived: one entry per fork", "nemo_rl/forks/declared.py", "    if len(same) > 1:  # uv then ignores ours", "    if False:  # uv then ignores ours",
     DECLARED),
    ("runner: a skip beside a pass is no survival", "tests/mutation_verdicts.py", '    if skipped:  # "survived" means',
     '    if False:  # "survived" means', "tests/test_check_mutations.py"),
    ("develop: --onto over its own branch says how to go on", "nemo_rl/deps/develop_onto.py",
     '    if git.ref_exists(checkout, f"refs/heads/{work}"):  # an earlier --onto', "    if False:  # an earlier --onto",
     f"{DEVELOP} -k onto_again"),
    ("derived: the locked package follows the entry", "nemo_rl/forks/locked_fork.py",
     "    if missing:\n        overridden =", "    if False:\n        overridden =", DECLARED),
    ("never: a link out through another link", "nemo_rl/workers/bundles.py",
     "                or not (real == inside or real.startswith(inside + os.sep))):", "                or False):", NEVER),
    ("never: --remove refuses submodules", "nemo_rl/deps/develop.py",
     '        submodules = (checkout / ".gitmodules").exists() or (checkout / ".git" / "modules").exists()',
     "        submodules = False", NEVER),
    ("never: line separators Python may split on", "nemo_rl/values.py",
     " or len(str(path).splitlines()) > 1 or not str(path).isprintable():", ":", NEVER),
    ("never: a journal names each path once", "nemo_rl/project/journal.py",
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
    ("archs: pack records the archs", "nemo_rl/workers/bundle_pack.py",
     '        cuda_archs.record(env, lock, work)  # read from the built binaries', "        pass", ARCHS),
    # issue 23, review: the compiled build in a bundle (seeded cache, sealed record), the toolkit's leftovers
    ("pack: the fresh cache is seeded with the builder's built wheels", "nemo_rl/workers/bundle_pack.py",
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
     "lambda content: check_sealed(bundle, manifest, record, content))",
     "lambda content: check_sealed(bundle, manifest, cuda_archs.read_record(bundle) and b'{}', content))",
     "tests/test_bundle_seal.py"),
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
    ("develop: --onto refuses unsaved work", "nemo_rl/deps/develop_onto.py", "    if unsaved:\n        where = shlex.quote(str(checkout))",
     "    if False:\n        where = shlex.quote(str(checkout))", f"{DEVELOP}::test_onto_refuses_a_checkout_with_unsaved_work"),
    ("develop: takes the project lock", "nemo_rl/deps/develop.py",
     "    with state_dir.project_lock(project, wait=not args.no_wait):\n        return start(project, args)",
     "    return start(project, args)", f"{TRUST}::test_develop_waits_for_the_project_lock"),
    ("develop: --stop takes the project lock", "nemo_rl/deps/develop.py",
     "        with state_dir.project_lock(project, wait=not args.no_wait):\n            return stop(project, args)",
     "        return stop(project, args)", f"{TRUST}::test_develop_waits_for_the_project_lock"),
    ("develop: --onto takes the project lock", "nemo_rl/deps/develop.py",
     "        with state_dir.project_lock(project, wait=not args.no_wait):\n            if lockfile.fork(",
     "        if True:\n            if lockfile.fork(", f"{TRUST}::test_develop_waits_for_the_project_lock"),
    ("fork cache: the file lock is taken", "nemo_rl/forks/fork_cache.py",
     '        locks.acquire(fd, lambda: f"waiting for another nemo-rl command using the fork cache {repo}")\n',
     "        pass\n", f"{TRUST}::test_another_command_waits_for_the_fork_cache"),
    ("trust: journal paths stay inside the project", "nemo_rl/project/journal.py",
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
     '    target.write_text(text)\n    baseline = (baselines or ' 'Baselines()).run(copy, test, scratch / "baseline", timeout)\n',
     '    again = run_pytest(copy, [test], scratch / "mutated", timeout)\n    target.write_text(text)\n'
     '    return judge(with_mutation, run_pytest(copy, [test], scratch / "baseline", timeout), again)\n',
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
    ("derived: the lock's manifest version", "nemo_rl/forks/locked_fork.py",
     '    if entry.get("version") != derived.version:', "    if False:", DECLARED),
    ("derived: the lock's manifest requires-dist", "nemo_rl/forks/locked_fork.py", "    if have != want:",
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
    ("derived: declares verified online", "nemo_rl/forks/records.py", "              if fork_declares.get(key) != recorded.get(key)]",
     "              if False]", f"{DERIVED} -k online_check_finds_declares"),
    ("derived: status says metadata stale", "nemo_rl/deps/status.py", "metadata_stale=bool(metadata)",
     "metadata_stale=False", f"{DERIVED} -k hand_edited_entry"),
    ("derived: deps patches writes the entry", "nemo_rl/deps/patches.py",
     "            if written or relocked:\n                _relock(", "            if relocked:\n                _relock(", f"{DERIVED} -k hand_edited_entry"),
    ("derived: bump locks the entry it derived", "nemo_rl/forks/bump_steps.py",
     "    if declares is None or not before.derives:  # uv locks",
     "    if True:  # uv locks", f"{BUMP} -k lands_the_version"),
    ("derived: a changed entry locks online at once", "nemo_rl/deps/bump.py",
     "self.committed is not None and changed is None", "self.committed is not None", f"{DERIVED} -k dynamic_version"),
    ("derived: bump's refused lock names the drop line", "nemo_rl/deps/bump.py",
     "                raise bump_steps.lock_refused(self.fork, self.changed, exc) from exc", "                raise",
     f"{DERIVED} -k cannot_lock"),
    ("derived: refusal names the drop line", "nemo_rl/forks/metadata_check.py", '    lines = "\\n".join(f"    {declared.drop_line(name)}" for name in new)',
     '    lines = ""', f"{DERIVED} -k cannot_lock"),
    ("derived: unnecessary drops removed", "nemo_rl/forks/declared.py", "    if unneeded:\n        drops =",
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
    ("upstream: git's own conflicting files", "nemo_rl/forks/trial_rebase.py",
     "        return merged.conflicts",
     "        return sorted(c.path for c in changes(self.repo, sha))", f"{UPSTREAM} -k rebase_in_order"),
    ("upstream: merged against the commit's own parent, as a cherry-pick", "nemo_rl/forks/trial_rebase.py",
     "        merged = self._merge(sha, parents[1] if len(parents) > 1 else self._commit(EMPTY_TREE))",
     "        merged = self._merge(sha, self._commit(EMPTY_TREE))",
     "tests/test_git_history.py -k rename"),
    ("node copy: a kept copy that is not the bundle's is not used", "nemo_rl/workers/bundle_copy.py",
     "        except NemoRLError:\n            # its files are what its stamp found", "        except ValueError:\n            # its files are what its stamp found",
     "tests/test_bundle_seal.py -k stamp_names_another"),
    ("develop: --stop looks up the worker environments before it changes anything", "nemo_rl/deps/develop.py",
     "    workers = _own_worker_envs(project)  # before anything changes: a refused venv directory stops here\n"
     "    for touched in dict.fromkeys([env, *(entry.envs if entry else ())]):\n"
     "        develop_state.remove_overlay(touched, args.distribution)\n",
     "    for touched in dict.fromkeys([env, *(entry.envs if entry else ())]):\n"
     "        develop_state.remove_overlay(touched, args.distribution)\n"
     "    workers = _own_worker_envs(project)\n",
     "tests/test_deps_develop.py -k refused_venv"),
    ("locks: a lock file of ours is made 0600 whatever its mode was", "nemo_rl/locks.py",
     "    if stat.S_IMODE(info.st_mode) != 0o600:", "    if stat.S_IMODE(info.st_mode) & 0o077 and False:",
     "tests/test_never_trusts.py -k only_its_owner"),
    ("upstream: a blob no server has sends the commit to its diff", "nemo_rl/forks/trial_rebase.py",
     "        if result.returncode not in (0, 1) and result.stderr.count(_UNSERVED) >= self._promisor_count():",
     "        if False:",
     "tests/test_git_history.py -k no_server_has"),
    ("upstream: a conflict is resolved to the commit's side as a rebase would", "nemo_rl/forks/trial_rebase.py",
     "            if theirs is not None:", "            if False:", "tests/test_git_history.py -k applies_in_order"),
    ("upstream: git names a moved-aside file after our throwaway commit", "nemo_rl/forks/trial_rebase.py",
     """        names = {_unquoted(re.sub(rf"~(?:{'|'.join(commits)})(\\"?)$", r"\\1", path)) for path in stages}""",
     "        names = {_unquoted(path) for path in stages}", "tests/test_git_history.py -k file_and_directory"),
    ("upstream: a conflict on no one path is a conflict", "nemo_rl/forks/trial_rebase.py",
     "        if merged.clean:\n", "        if merged.clean or not merged.stages:\n",
     "tests/test_git_history.py -k renamed_into_two"),
    ("upstream: an unreachable server is an error, not a lacking blob", "nemo_rl/forks/trial_rebase.py",
     "result.stderr.count(_UNSERVED) >= self._promisor_count():", "_UNSERVED in result.stderr:",
     "tests/test_git_history.py -k unreachable"),
    ("upstream: conflicting paths named as the file system names them", "nemo_rl/forks/trial_rebase.py",
     "        names = {_unquoted(re.sub(", "        names = {(re.sub(", "tests/test_git_history.py -k odd_paths"),
    ("upstream: a merge commit is said to be dropped", "nemo_rl/deps/upstream.py",
     "                   if row.merge else", "                   if False else", "tests/test_upstream.py -k merge_commit"),
    ("upstream: a merge commit is not counted as needed", "nemo_rl/forks/upstream_report.py",
     '    needed = [r for r in rows if r.upstreamed != "yes" and not r.merge]',
     '    needed = [r for r in rows if r.upstreamed != "yes"]', "tests/test_upstream.py -k merge_commit"),
    ("upstream: conflicting paths kept as git quotes them", "nemo_rl/forks/trial_rebase.py",
     '["-c", "core.quotePath=true", "merge-tree"', '["-c", "core.quotePath=false", "merge-tree"',
     "tests/test_git_history.py -k odd_paths"),
    ("upstream: a merge commit is dropped, as git rebase drops it", "nemo_rl/forks/trial_rebase.py",
     "        if len(parents) > 2:  # git rebase drops", "        if False:  # git rebase drops",
     "tests/test_git_history.py -k merge_commit"),
    ("upstream: a failed merge is an error, not a conflict", "nemo_rl/forks/trial_rebase.py",
     "        if result.returncode not in (0, 1):", "        if False:", "tests/test_git_history.py -k cannot_make"),
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
    ("fast: recover finishes a landing cut short", "nemo_rl/deps/recover.py", "        if has_journal:  # killed while",
     "        if False:  # killed while", "tests/test_recover.py"),
    ("fast: the fork cache removes git's stale locks", "nemo_rl/forks/fork_cache.py",
     "        _remove_stale_git_locks(repo)\n        yield", "        yield", "tests/test_fork_cache.py"),
    ("fast: a refused lock's remedy names only the added requirements", "nemo_rl/forks/metadata_check.py",
     "    new = list(dict.fromkeys(n for n in map(declared._name, after.requires_dist) if n not in old))",
     "    new = list(dict.fromkeys(map(declared._name, after.requires_dist)))", "tests/test_metadata_check.py"),
    ("fast: metadata leaves out the fork's extras", "nemo_rl/forks/fork_metadata.py",
     '        if not lock_markers.base_requirement(req):', "        if False:", "tests/test_fork_metadata.py"),
    ("fast: worker-env key is its directory's name", "nemo_rl/workers/environments.py",
     '\n                or meta["key"] != path.name or not Path(meta["project"]).is_absolute()\n                or not (',
     '\n                or not Path(meta["project"]).is_absolute()\n                or not (',
     "tests/test_environments.py"),
    ("fast: worker-env flags are strings", "nemo_rl/workers/environments.py",
     'not all(isinstance(f, str) for f in meta["flags"])', "False", "tests/test_environments.py"),
    ("fast: journal names landable paths only", "nemo_rl/project/journal.py",
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
    ("never: --onto fetches into a user's clone by URL", "nemo_rl/deps/develop_onto.py",
     "    if entry.managed and git.remote_url(entry.checkout, \"upstream\"):", "    if True:", NEVER),
    ("never: --onto refuses a tree or blob", "nemo_rl/deps/develop_onto.py", '    if kind != "commit":', "    if False:", NEVER),
    ("never: recover checks what it moves", "nemo_rl/project/journal.py",
     "        if os.path.lexists(staging / name):\n            _check_staged(staging, name)",
     "        if False:\n            _check_staged(staging, name)", NEVER),
    ("never: renames probed before staging", "nemo_rl/project/landing.py",
     "        if inside:\n            require_renames(project, [*files, *directories])\n", "", NEVER),
    ("never: a landing across filesystems is refused, the staged copy kept", "nemo_rl/project/journal.py",
     "        if exc.errno != errno.EXDEV:\n            raise\n        raise NemoRLError(f\"cannot move",
     "        raise\n        raise NemoRLError(f\"cannot move", f"{NEVER} -k across_filesystems"),
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
    ("never: the pinned digest", "nemo_rl/workers/bundles.py", "    if trusted and manifest.digest not in trusted:\n        where",
     "    if False:\n        where", NEVER),
    ("never: the pinned digests choose among configured bundles", "nemo_rl/workers/bundles.py",
     "        if trusted and manifest.digest not in trusted:\n            different.append",
     "        if False:\n            different.append", NEVER),
    ("never: the node's copy is checked", "nemo_rl/workers/bundle_copy.py",
     "        content = digest_of(cache, copied, hashes)  # the names and links walked again; each file hashed once\n"
     "        sealed(content)\n",
     "        content = digest_of(cache, copied, hashes)  # the names and links walked again; each file hashed once\n",
     NEVER),
    ("node copy: a kept copy is held to what its check found", "nemo_rl/workers/bundle_copy.py",
     '        if digest_of(cache, known, {}) != stamp.content:', '        if False:',
     f"{NEVER} -k installed_is_what"),
    ("node copy: a kept copy is held against the bundle's digest", "nemo_rl/workers/bundle_copy.py",
     '        try:\n            sealed(stamp.content)', '        try:\n            pass',
     f"{NEVER} -k installed_is_what"),
    ("never: a working cache of its own", "nemo_rl/workers/bundle_trust.py",
     "        work = Path(tempfile.mkdtemp(prefix=prefix, dir=root))",
     '        work = root / f"{prefix}{os.getpid()}"\n        shutil.rmtree(work, ignore_errors=True)\n'
     '        work.mkdir()',
     NEVER),
    ("never: a broken bundle is skipped", "nemo_rl/workers/bundles.py",
     "        except NemoRLError as exc:  # one broken bundle never hides the good ones", "        except ZeroDivisionError as exc:",
     NEVER),
    ("never: an empty NEMO_RL_BUNDLE_DIR is no network", "nemo_rl/workers/bundles.py",
     '        if settings.bundle_dir():  # a shared mount', "        if False:  # a shared mount", NEVER),
    ("never: killed packs of any name", "nemo_rl/workers/bundle_pack.py", 'root.glob(".*.packing-*")', 'root.glob(".x.packing-*")',
     NEVER),
    ("never: prune removes killed packs", "nemo_rl/workers/housekeeping.py", "    return bundle_pack.remove_dead_packs(root) + bundle_pack",
     "    return [] + bundle_pack", NEVER),
    ("never: one pack per destination", "nemo_rl/workers/bundle_pack.py", "    if claim is None:\n        raise NemoRLError(f\"another `nemo-rl envs pack`",
     "    if False:\n        raise NemoRLError(f\"another `nemo-rl envs pack`", NEVER),
    ("never: a cached proof of a new pin is asked again", "nemo_rl/forks/fork_cache.py",
     "        if git.served(fork.url, sha) is False and not (", "        if False and not (", NEVER),
    ("never: a timeout above zero", "nemo_rl/values.py", "not 0 < seconds <= TIMEOUT_MAX_S:",
     "not -1 < seconds <= TIMEOUT_MAX_S:", NEVER),
    ("never: --onto a missing upstream branch", "nemo_rl/deps/develop_onto.py",
     '        if git.ls_remote(fork.upstream_url, f"refs/heads/{branch}") is None:', "        if False:", NEVER),
    ("never: --onto during a rebase", "nemo_rl/deps/develop_onto.py", "    if git.rebasing(checkout):  #", "    if False:  #", NEVER),
    ("never: --remove needs the checkout's own git", "nemo_rl/deps/develop.py",
     "        if git.toplevel(checkout) != checkout.resolve():", "        if False:", NEVER),
    ("never: pack into an unwritable place", "nemo_rl/workers/bundle_pack.py",
     "    except OSError as exc:\n        raise NemoRLError(f\"cannot pack into", "    except ZeroDivisionError as exc:\n        raise NemoRLError(f\"cannot pack into", NEVER),
    # the hostile review of "Never hangs, never trusts"
    ("review: a deleted checkout is not live", "nemo_rl/project/develop_state.py",
     "                if live and checkout_gone(checkout):  # deleted", "                if False:  # deleted", f"{REVIEW}::test_a_deleted_checkout_is_said_to_be_gone"),
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
    ("review: a planted node copy is never taken as checked", "nemo_rl/workers/bundle_copy.py",
     "            if why_not_ours(candidate) is not None:\n                continue",
     "            if False:\n                continue",
     f"{NEVER} -k node_copy_is_taken"),
    ("review: --onto is not blocked by stashes", "nemo_rl/deps/develop_onto.py",
     'if u in ("uncommitted changes", "untracked files")]', 'if "commit(s) on no remote branch" not in u]', f"{REVIEW}::test_the_stash_advice_of_onto_works_when_followed"),
    ("review: a digest in either case", "nemo_rl/values.py", "    text = value.strip().lower()", "    text = value.strip()",
     f"{REVIEW}::test_a_digest_in_either_case_is_one_digest"),
    ("review: digests separated by semicolons", "nemo_rl/values.py", 're.compile(r"[\\s,;]+")', 're.compile(r"[\\s,]+")',
     f"{REVIEW}::test_digest_lists_take_commas_semicolons_and_spaces"),
    ("review: a space after sha256: is named", "nemo_rl/values.py", '    if re.search(r":\\s", setting):', "    if False:",
     f"{REVIEW}::test_digest_lists_take_commas_semicolons_and_spaces"),
    ("review: --digest is normalised where checked", "nemo_rl/workers/bundles.py",
     "{bundle_trust.digest_argument(digest)} if digest", "{digest} if digest", f"{REVIEW}::test_digest_lists_take_commas_semicolons_and_spaces"),
    ("review: one timeout rule has an upper bound", "nemo_rl/values.py", "not 0 < seconds <= TIMEOUT_MAX_S:",
     "not 0 < seconds:", f"{REVIEW}::test_one_timeout_rule_for_every_api"),
    ("review: process.run follows the one timeout rule", "nemo_rl/process.py",
     'return None if timeout is None else values.timeout_seconds(timeout, "process.run")',
     "return None if timeout is None else float(timeout)", f"{REVIEW}::test_one_timeout_rule_for_every_api"),
    ("review: an empty NEMO_RL_BUNDLE_DIR is refused", "nemo_rl/settings.py", "    if not setting.strip():\n        raise",
     "    if False:\n        raise", f"{REVIEW}::test_an_empty_bundle_dir_is_refused_everywhere_it_is_read"),
    ("review: a node checks archive hashes", "nemo_rl/workers/bundles.py",
     '        checked, unlisted = archive_hashes.check(cache, project, f"bundle {bundle}")', "        checked, unlisted = 0, []", f"{REVIEW}::test_a_node_refuses_a_bundle_whose_archive_uv_lock_never_pinned"),
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
    ("review: a FIFO in a bundle is refused by the copy", "nemo_rl/workers/tree_copy.py",
     "    if not stat.S_ISREG(os.lstat(path).st_mode):  # looked at", "    if False:  # looked at",
     f"{REVIEW}::test_a_device_in_a_bundle_is_refused_never_opened"),
    ("review: a file swapped for a FIFO after the look is refused by the copy", "nemo_rl/workers/tree_copy.py",
     "        if not stat.S_ISREG(info.st_mode):\n            raise _not_a_file(path, bundle)",
     "        if False:\n            raise _not_a_file(path, bundle)", f"{REVIEW} -k swapped_for_a_fifo"),
    ("review: the digest never opens a FIFO", "nemo_rl/workers/bundles.py",
     "    if not stat.S_ISREG(info.st_mode):  # a FIFO", "    if False:  # a FIFO",
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
    ("lock: every supported platform, not this machine", "nemo_rl/forks/lock_markers.py",
     "    for env in envs:\n        on = env if extra", "    for env in envs[:1]:\n        on = env if extra",
     "tests/test_metadata_check.py -k another_platform"),
    ("lock: the manifest's markers compared", "nemo_rl/forks/locked_fork.py",
     "    key = (written, lock_markers.signature(requirement, envs))", '    key = (written, "")',
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
    ("landing: a directory's files digested", "nemo_rl/project/journal.py",
     '    paths = sorted(p for p in path.rglob("*") if not p.is_dir()) if path.is_dir() else [path]',
     "    paths = [] if path.is_dir() else [path]", "tests/test_landing.py -k while_staged"),
    # the same check through deps patches' relock (emptying the digests taken at the copy breaks every landing, the
    # test's setup included: no verdict)
    ("landing: the second terminal's edit survives deps patches", "nemo_rl/project/landing.py",
     "        if changed:\n            raise NemoRLError(", "        if False:\n            raise NemoRLError(",
     "tests/test_lock_truth.py -k another_terminal"),
    ("derived: an entry spelled differently found", "nemo_rl/forks/declared.py",
     "    entry = next((e for e in entries if canonicalize_name(str(e.get(\"name\"))) == canonicalize_name(derived.name)),",
     "    entry = next((e for e in entries if e.get(\"name\") == derived.name),", "tests/test_metadata_check.py -k spelled"),
    ("derived: an entry spelled differently named", "nemo_rl/forks/declared.py",
     "    if entry.name != derived.name:  # uv takes it", "    if False:  # uv takes it",
     "tests/test_metadata_check.py -k spelled"),
    ("ci: only [declares] changes are printed", ".ci/declares-changes",
     '    old, new = before.get("declares"), after.get("declares")', "    old, new = before, after",
     "tests/test_lock_truth.py -k ci_prints"),
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
     "    return fork_metadata.declares(new, new_rev, before.fork.distribution, before.dropped, extras=not before.derives)",
     "    return declared.Declares(new.version, new.requires_python, tuple(new.requires.values()))",
     f"{DERIVED} -k direct_reference"),
    ("bump: the drift's old side from the recorded [declares]", "nemo_rl/deps/bump.py",
     "    old, built = before.recorded_at_pin(), []", "    old, built = None, []",
     f"{DERIVED} -k recorded_declares_when_the_old_commit_is_gone"),
    ("bump: [declares] read only when the index is pinned at the pin", "nemo_rl/forks/bump_steps.py",
     "        if (index is None or index.pinned != fork.rev or", "        if (index is None or",
     f"{DERIVED} -k not_the_record_of_the_pin"),
    ("bump: [declares] read only when the index's digest checks", "nemo_rl/forks/bump_steps.py",
     "                or index.digest != index.expected_digest()):", "                or False):",
     f"{DERIVED} -k recorded_declares_were_edited"),
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
     "        for line in [*requires.values(), *(line for lines in extras.values() for line in lines)]:\n"
     "            Requirement(line)\n", "",
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
    ("fast: kept output is bounded while it is read", "nemo_rl/process_output.py",
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
    ("plain: stop says a deleted checkout is gone", "nemo_rl/deps/develop.py",
     "if entry.checkout.exists()\n", "if True\n", f"{PLAIN}::test_stop_says_a_deleted_checkout_is_gone"),
    ("plain: an archive pointer is keyed by where it lies", "nemo_rl/workers/archive_hashes.py",
     "if pointer.label and not _lies_where_uv_looks(pointer):", "if False:",
     f"{PLAIN}::test_an_archive_pointer_is_keyed_by_its_path_and_every_hash_counts"),
    ("plain: every hash entry of a pointer counts", "nemo_rl/workers/archive_hashes.py",
     "        if recorded != {digest.lower()}:", "        if digest.lower() not in recorded:",
     f"{PLAIN}::test_an_archive_pointer_is_keyed_by_its_path_and_every_hash_counts"),
    ("plain: an empty directory is no checkout", "nemo_rl/project/develop_state.py",
     "            return next(entries, None) is None", "            return False",
     f"{PLAIN}::test_an_empty_directory_at_the_checkout_is_a_gone_checkout"),
    ("plain: --onto during a merge says to finish it", "nemo_rl/deps/develop_onto.py",
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
    # a locked or installed version the fork's requirement refuses (an override, a pasted [[package]])
    ("locked version: held against the requirement", "nemo_rl/forks/locked_fork.py",
     "        if SpecifierSet(str(requirement.specifier), prereleases=parsed.is_prerelease).contains(parsed):",
     "        if True:", "tests/test_metadata_check.py -k refuses"),
    ("locked version: a prerelease allowed when locked as one", "nemo_rl/forks/locked_fork.py",
     "prereleases=parsed.is_prerelease).contains(parsed)", ").contains(parsed)",
     "tests/test_metadata_check.py -k refuses"),
    ("locked version: the one the fork's dependency names", "nemo_rl/forks/locked_fork.py",
     '        version = str(item["version"]) if item.get("version") is not None and len(versions) > 1 else versions[0]',
     "        version = versions[-1]", "tests/test_metadata_check.py -k refuses"),
    ("locked version: an override named as the cause", "nemo_rl/forks/locked_fork.py",
     "then run `uv lock`)\" if name in overrides else", "then run `uv lock`)\" if False else",
     "tests/test_metadata_check.py -k refuses"),
    ("locked version: checked by the offline check", "nemo_rl/forks/locked_fork.py",
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
     "    literals = [*markers, *(supported", "    literals = [*(supported",
     "tests/test_metadata_check.py -k inside"),
    ("markers: and at the micro after it", "nemo_rl/forks/lock_markers.py",
     "            found |= {(major, minor, micro), (major, minor, micro + 1)}",
     "            found |= {(major, minor, micro)}", "tests/test_metadata_check.py -k inside"),
    ("locked dependency: an override that replaced it named", "nemo_rl/forks/locked_fork.py",
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
    ("recover: no landing over an edit made since staging", "nemo_rl/project/journal.py",
     "    _require_unchanged(project, staging, moves, before)\n", "", "tests/test_recover.py -k never_lands_over"),
    ("recover: a directory swap cut short is no edit", "nemo_rl/project/journal.py",
     "        return held is None and old.is_dir() and digest(old) == before[name]", "        return False",
     "tests/test_recover.py -k directory_swap"),
    ("recover: a journal without digests lands nothing", "nemo_rl/project/journal.py",
     "            return before is not None", "            return True", "tests/test_recover.py -k without_digests"),
    ("bump: the journal records what each path held", "nemo_rl/project/landing.py",
     '"before": {n: self.copied[n] for n in moves}', '"before": None',
     "tests/test_landing.py -k unchanged_project_lands"),
    ("fast: a journal's digests, one per move", "nemo_rl/project/journal.py",
     "    if before is not None and (not isinstance(before, dict)", "    if False and (not isinstance(before, dict)",
     "tests/test_landing.py -k digests"),
    ("fast: recover says what had moved before it", "nemo_rl/deps/recover.py",
     "            before = [name for name in moves if name not in moved]", "            before = []",
     "tests/test_recover.py -k never_landed"),
    ("fast: a landing cut short is only its forks' state", "nemo_rl/project/journal.py",
     "return self.unreadable is not None or not records_moved or records in records_moved",
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
     "    if alone is not None and " "alone.failed[:1] " "== (first,):\n", "    if alone is not None:\n",
     "tests/test_check_mutations.py -k killer_first"),
    ("runner: a hint only for the selection it was caught in", "tests/check_mutations.py",
     "hint[\"tests\"] == tests", "True", "tests/test_check_mutations.py -k hints_are_kept"),
    # whose worker environment it is, and the last files read through the one reader (issue 24, third round)
    ("whose: another checkout's id is left to it", "nemo_rl/workers/housekeeping.py",
     "        elif env.checkout and env.checkout != ours:", "        elif False:",
     f"{WHOSE} -k another_checkout_at_this_path"),
    ("whose: a checkout without an id owns no environment with one", "nemo_rl/workers/housekeeping.py",
     "        elif env.checkout and env.checkout != ours:", "        elif env.checkout and env.checkout != (ours or env.checkout):",
     f"{WHOSE} -k without_an_id"),
    ("whose: another user's environment is not ours", "nemo_rl/workers/environments.py",
     'if info.st_uid != os.geteuid() else None', "if False else None", f"{WHOSE} -k another_users"),
    ("whose: a link in the venv directory is not ours", "nemo_rl/workers/environments.py",
     '    if stat.S_ISLNK(info.st_mode):\n        return "a symbolic link"', '    if False:\n        return "a symbolic link"',
     f"{WHOSE} -k link_in_the_venv"),
    ("whose: a damaged checkout id is named", "nemo_rl/project/identity.py", "    if os.path.lexists(path):\n",
     "    if False:\n", f"{WHOSE} -k damaged_checkout_id"),
    ("whose: the metadata's checkout id is checked", "nemo_rl/workers/environments.py",
     'identity.ID.fullmatch(meta["checkout"]))', "True)", f"{WHOSE} -k not_hex"),
    ("whose: a checkout id is a string", "nemo_rl/workers/environments.py",
     '(isinstance(meta.get("checkout"), str) and identity.ID.fullmatch(meta["checkout"]))',
     'identity.ID.fullmatch(str(meta.get("checkout")))', f"{WHOSE} -k not_hex"),
    ("whose: a read-only checkout builds without an id", "nemo_rl/project/identity.py",
     "        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):\n", "        if False:\n",
     f"{WHOSE} -k read_only_checkout"),
    ("whose: an id another build linked meanwhile is read", "nemo_rl/project/identity.py",
     "    if os.path.lexists(path) and (found := checkout_id(project)) is not None:", "    if False:",
     f"{WHOSE} -k meanwhile"),
    ("pointer: a wheel's pointer names its wheel", "nemo_rl/workers/archive_hashes.py",
     "        if not sdist and not label.strip():\n", "        if False:\n",
     "tests/test_review_fixes.py -k hash_of_its_tags"),
    ("process: a full disk says to free space", "nemo_rl/process.py", "full_disk(self._result) or self._remedy",
     "self._remedy", "tests/test_process.py -k full_disk"),
    ("whose: a build records its checkout's id", "nemo_rl/workers/environments.py",
     "    checkout = identity.ensure_checkout_id(project)\n", '    checkout = ""\n',
     f"{BUNDLES} -k builds_offline_from_a_read_only_bundle"),
    ("reader: the verification record", "nemo_rl/workers/verified.py",
     "json.loads(values.read_plain_file(env / RECORD))", "json.loads((env / RECORD).read_text())",
     f"{WHOSE} -k fifo_verification_record"),
    ("reader: pyvenv.cfg", INSTALLED_FORK, 'values.read_plain_file(env / "pyvenv.cfg").decode()',
     '(env / "pyvenv.cfg").read_text()', f"{WHOSE} -k fifo_pyvenv"),
    ("reader: the toolkit stamp", "nemo_rl/cudakit/assemble.py", "json.loads(values.read_plain_file(home / STAMP))",
     "json.loads((home / STAMP).read_text())", f"{WHOSE} -k fifo_toolkit_stamp"),
    ("reader: the patch-id cache", "nemo_rl/forks/patch_ids.py", "json.loads(values.read_plain_file(repo / CACHE))",
     "json.loads((repo / CACHE).read_text())", f"{WHOSE} -k fifo_patch_id"),
    ("reader: the fork's pyproject.toml", "nemo_rl/forks/pep517.py",
     'read_bounded(source / "pyproject.toml", PYPROJECT_LIMIT).decode()', '(source / "pyproject.toml").read_text()',
     f"{WHOSE} -k pyproject_that_is_a_link"),
    ("fixes: a pointer is matched by the file it records", "nemo_rl/workers/archive_hashes.py",
     "    return Pointer(path, wheel_key(label), hashes, label)",
     "    return Pointer(path, f\"{path.parent.name} {path.name[:-len('.http')]}\", hashes, label)",
     f"{FIXES} -k hash_of_its_tags"),
    ("fixes: a hashed stem of a locked version names a locked wheel", "nemo_rl/workers/archive_hashes.py",
     "            if hashed_stem and _version(key) in versions:", "            if False:", f"{FIXES} -k hash_of_its_tags"),
    ("fixes: an unreadable pointer is refused", "nemo_rl/workers/archive_hashes.py",
     "        if not pointer.readable:", "        if False:", f"{FIXES} -k hash_of_its_tags"),
    ("fixes: an overlay token this checkout does not record is kept", "nemo_rl/workers/housekeeping.py",
     '            state, note = "other checkout", (\n                f"its {foreign} was written by a develop',
     '            state, note = "stale", (\n                f"its {foreign} was written by a develop',
     f"{FIXES} -k no_longer_records"),
    ("fixes: an unrecorded overlay's row names its rm -rf", "nemo_rl/workers/housekeeping.py",
     'remove it: rm -rf {shlex.quote(str(path))}")', 'remove it")', f"{FIXES} -k no_longer_records"),
    ("fixes: an unclaimed environment names the command that removes it", "nemo_rl/workers/housekeeping.py",
     '            f"{shlex.quote(str(path))}")', '            "")', f"{FIXES} -k no_longer_records"),
    ("fixes: output that cannot be written fails the command", "nemo_rl/__main__.py",
     "        code = code or 1\n", "        pass\n", f"{FIXES} -k cannot_be_written"),
    ("fixes: a failed staging copy removes itself", "nemo_rl/project/landing.py",
     "nothing may be left behind\n            self.discard()\n", "nothing may be left behind\n            pass\n",
     f"{FIXES} -k full_disk"),
    ("fixes: a full disk while staging says to free space", "nemo_rl/project/landing.py",
     "            if isinstance(failed, OSError) and failed.errno in (errno.ENOSPC, errno.EDQUOT):", "            if False:",
     f"{FIXES} -k full_disk"),
    ("full disk: a failed write names the file it was writing", "nemo_rl/project/state_dir.py",
     "        if isinstance(exc, OSError) and exc.errno and exc.filename is None:", "        if False:",
     "tests/test_full_disk.py -k write_atomic_names"),
    ("full disk: a copy inside copytree keeps its errno", "nemo_rl/project/landing.py",
     "copy_function=_copy)", "copy_function=shutil.copy2)", "tests/test_full_disk.py -k copytree"),
    ("full disk: staging unwraps the copy's own error", "nemo_rl/project/landing.py",
     "            failed = exc.error if isinstance(exc, _CopyFailed) else exc", "            failed = exc",
     "tests/test_full_disk.py -k copytree"),
    ("full disk: the CLI says to free space whatever the errno's file", "nemo_rl/cli.py",
     "    if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # the path is fine", "    if False:  # the path is fine",
     "tests/test_full_disk.py -k staged_write"),
    ("full disk: an ENOSPC naming no file is exit 1", "nemo_rl/cli.py",
     "    if not exc.filename:  # nothing names the file", "    if False:  # nothing names the file",
     "tests/test_full_disk.py -k names_no_file"),
    ("full disk: the CLI names a directory that exists", "nemo_rl/cli.py",
     "    directory = next((p for p in Path(name).parents if p.is_dir()), Path(\"/\"))",
     "    directory = Path(name)", "tests/test_full_disk.py -k develop_that_fills"),
    ("full disk: a develop that fails removes its overlay", "nemo_rl/deps/develop.py",
     "            develop_state.remove_overlay(env, fork.distribution, token)", "            pass",
     "tests/test_full_disk.py -k develop_that_fills"),
    ("full disk: a develop that fails removes its shadow", "nemo_rl/deps/develop.py",
     "        develop_state.remove_shadow(project, fork.distribution)\n        raise", "        raise",
     "tests/test_full_disk.py -k develop_that_fills"),
    ("full disk: a half-made shadow is removed", "nemo_rl/project/develop_state.py",
     "no half-made shadow stays\n        remove_shadow(project, distribution)", "no half-made shadow stays\n        pass",
     "tests/test_full_disk.py -k develop_that_fills"),
    ("full disk: a failed print names what had landed", "nemo_rl/cli.py",
     "            done = interrupt.completed_steps()  # a bump that landed", "            done = []  #",
     "tests/test_full_disk.py -k print_that_fails"),
    ("full disk: output that cannot be flushed names what had landed", "nemo_rl/__main__.py",
     "            done = interrupt.completed_steps()", "            done = []", "tests/test_full_disk.py -k output_cannot_be_written"),
    ("settings: a relative NEMO_RL_VENV_DIR is refused", "nemo_rl/settings.py",
     "    if setting and not path.is_absolute():  # each Ray worker", "    if False:  # each Ray worker",
     "tests/test_settings.py -k relative"),
    ("settings: a relative path setting names the path it means", "nemo_rl/settings.py",
     "    here = os.path.abspath(os.path.expanduser(setting))", "    here = setting",
     "tests/test_settings.py -k relative"),
    ("fixes: develop records its overlay as a completed step", "nemo_rl/deps/develop.py",
     "    interrupt.completed(f\"{develop_state.STATE} records", "    (lambda step: None)(f\"{develop_state.STATE} records",
     f"{FIXES} -k signal_after"),
    ("fixes: develop again after uv sync applies the recorded develop", "nemo_rl/deps/develop.py",
     "        return _apply(project, fork, state, entry, env)", "        pass", f"{FIXES} -k advice_that_works"),
    ("fixes: a develop path is checked before anything is written", "nemo_rl/deps/develop.py",
     "check_checkout(values.plain_path(Path(args.path).resolve(), \"the checkout path\"), fork)",
     "check_checkout(Path(args.path).resolve(), fork)", f"{FIXES} -k line_break"),
    ("fixes: --onto advice quotes the checkout path", "nemo_rl/deps/develop_onto.py",
     "    quoted = shlex.quote(str(checkout))  # advice", "    quoted = str(checkout)  # advice",
     f"{FIXES} -k spaces_as_one_word"),
    # issue 25's third review: a pin moved with the old [declares], header spellings, two locked versions, a marker
    # nothing evaluates, locked extras, a marker merely naming extra, commands over a landing cut short
    ("offline: [declares] read at the pin", "nemo_rl/forks/metadata_check.py",
     "    stale = [] if declares.commit == fork.rev else [", "    stale = [] if True else [",
     "tests/test_lock_truth.py -k pin_moved"),
    ("offline: the records end at the pin", "nemo_rl/forks/records.py", "    if last != index.pinned:",
     "    if False:", "tests/test_lock_truth.py -k pin_moved"),
    ("ci: [declares] read from the parsed TOML", ".ci/declares-changes", "        return tomllib.loads(text), None",
     "        return {}, None", "tests/test_lock_truth.py -k ci_prints"),
    ("ci: a pin moved with [declares] kept is printed", ".ci/declares-changes",
     '    if before.get("pinned") != after.get("pinned") and old == new and isinstance(new, dict):',
     "    if False:", "tests/test_lock_truth.py -k ci_prints"),
    ("locked version: every locked entry of a name", "nemo_rl/forks/locked_fork.py",
     '            named.setdefault(canonicalize_name(str(d.get("name"))), []).append(d)',
     '            named[canonicalize_name(str(d.get("name")))] = [d]', "tests/test_metadata_check.py -k either_order"),
    ("locked marker: one that cannot be evaluated is a difference", "nemo_rl/forks/locked_fork.py",
     "    if unreadable:\n", "    if False:\n", "tests/test_metadata_check.py -k cannot_be_evaluated"),
    ("locked marker: the fork's own unevaluable marker is none", "nemo_rl/forks/locked_fork.py",
     "                  and (n not in undecided or lock_markers.names_extra(m))]", "                  and False]",
     "tests/test_metadata_check.py -k cannot_be_evaluated"),
    ("locked optional-dependencies of a derived fork are a difference", "nemo_rl/forks/locked_fork.py",
     "    if extras and derived_entry:", "    if False:",
     "tests/test_metadata_check.py -k optional_dependencies"),
    ("metadata: a marker merely naming extra is a base requirement", "nemo_rl/forks/lock_markers.py",
     "    return requirement.marker is None or any(_evaluate(requirement.marker, env) for env in _ANY)",
     '    return requirement.marker is None or "extra" not in str(requirement.marker)',
     "tests/test_fork_metadata.py -k merely"),
    ("bump: refuses over a landing cut short", "nemo_rl/deps/bump.py",
     "    journal.refuse_cut_short(project, locked=not args.dry_run)", "    pass",
     "tests/test_lock_truth.py -k cut_short"),
    ("patches: refuses over a landing cut short", "nemo_rl/deps/patches.py",
     "            journal.refuse_cut_short(project, locked=True)", "            pass",
     "tests/test_lock_truth.py -k cut_short"),
    ("status: a landing cut short after every move leaves the project whole", "nemo_rl/deps/status.py",
     "            if not left else\n", "            if False else\n", "tests/test_status.py -k every_move"),
    ("runner: a mutation that does not compile is not applied", "tests/check_mutations.py",
     "            except SyntaxError as exc:\n                return", "            except ValueError as exc:\n                return",
     "tests/test_check_mutations.py -k does_not_compile"),
    ("rest: a checkout git cannot read is a state of its own", "nemo_rl/deps/status.py",
     "checkout_unreadable=problem is not None,", "checkout_unreadable=False,", f"{REST} -k git_cannot_read"),
    ("rest: a checkout with its files but no .git is not gone", "nemo_rl/project/develop_state.py",
     "            return next(entries, None) is None", "            return not (checkout / \".git\").exists()",
     f"{REST} -k git_cannot_read"),
    ("rest: a missing .git is said to be missing", "nemo_rl/project/develop_state.py",
     '    if not os.path.lexists(checkout / ".git"):', "    if False:", f"{REST} -k git_cannot_read"),
    ("rest: --onto refuses a checkout git cannot read", "nemo_rl/deps/develop_onto.py",
     "    if problem is not None:  # its files are there", "    if False:  # its files are there",
     f"{REST} -k git_cannot_read"),
    ("rest: envs build records the built environment as a completed step", "nemo_rl/workers/environments.py",
     "        interrupt.completed(f\"the worker environment {where.path} is built", "        (lambda step: None)(f\"the worker environment {where.path} is built",
     f"{REST} -k worker_environment_is_built"),
    ("rest: a relative NEMO_RL_BUNDLE_DIR is refused", "nemo_rl/settings.py",
     "    if not os.path.isabs(path):  # read from every node", "    if False:  # read from every node",
     f"{REST} -k relative_bundle"),
    ("rest: a .nemo-rl link or file is refused", "nemo_rl/project/state_dir.py",
     "    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):", "    if False:", f"{REST} -k nemo_rl_link"),
    ("rest: prune never removes a broken environment", "nemo_rl/workers/housekeeping.py",
     '        if row.state not in ("stale", "unfinished build", "kept copy"):',
     '        if row.state not in ("stale", "broken", "unfinished build", "kept copy"):', f"{REST} -k prune_removes_only"),
    ("rest: a broken environment names its rm -rf", "nemo_rl/workers/housekeeping.py",
     '                            f"unused, rm -rf {shlex.quote(str(path))}"))', '                            "unused"))',
     f"{REST} -k prune_removes_only"),
    ("rest: prune removes a pruned key's lock file", "nemo_rl/workers/housekeeping.py",
     "    return removed + _prune_lock_files() + _prune_packs()", "    return removed + _prune_packs()",
     f"{REST} -k prune_removes_only"),
    ("rest: prune removes free pack locks", "nemo_rl/workers/housekeeping.py",
     "bundle_pack.remove_dead_packs(root) + bundle_pack.remove_free_pack_locks(root)", "bundle_pack.remove_dead_packs(root)",
     f"{REST} -k free_lock_files"),
    ("rest: a lock whose file was removed meanwhile is taken again", "nemo_rl/locks.py",
     "            if _names(path, fd):\n                return fd",
     "            if True:\n                return fd", f"{REST} -k held_twice"),
    ("rest: an unreadable checkout's fix says whether its files run", "nemo_rl/deps/status.py",
     '                          f"{fork.distribution} is imported from the files of" if active else',
     '                          f"{fork.distribution} is imported from the files of" if True else',
     f"{REST} -k git_cannot_read"),
    ("rest: prune removes only lock files named like a key's", "nemo_rl/workers/housekeeping.py",
     "        if not KEY.fullmatch(where.key) or environments.not_ours(path)", "        if environments.not_ours(path)", f"{REST} -k free_lock_files"),
    ("develop: again after uv sync refuses a gone checkout", "nemo_rl/deps/develop.py",
     "    if develop_state.checkout_gone(entry.checkout):  # the overlay would lead nowhere",
     "    if False:  # the overlay would lead nowhere", "tests/test_review_fixes.py -k recorded_checkout_that_is_gone"),
    ("locked marker: one naming extra is not packaging's to decide", "nemo_rl/forks/lock_markers.py",
     '    if _names_extra(getattr(marker, "_markers", []), ("extra", *MACHINE)):',
     '    if _names_extra(getattr(marker, "_markers", []), MACHINE):', "tests/test_metadata_check.py -k naming_extra"),
    ("ci: a base named is the only base", ".ci/declares-changes",
     '    for ref in [named] if named else ["origin/main", "main"]:', '    for ref in [named, "origin/main", "main"] if named else ["origin/main", "main"]:',
     "tests/test_lock_truth.py -k declares_a_change"),
    ("landing: an unreadable cut-short journal gets its own fix", "nemo_rl/project/journal.py",
     "        if cut.unreadable is not None:  # recover cannot finish it either", "        if False:  # recover",
     "tests/test_landing.py -k cannot_be_read"),
    # review 25c: samples that meet the lock, machine markers, extra markers, sources, the CI base, journal links
    ("samples: the Pythons the supported markers name", "nemo_rl/forks/lock_markers.py",
     '    literals = [*markers, *(supported if isinstance(supported, list) else []), str(lock.get("requires-python") or "")]',
     "    literals = list(markers)", "tests/test_metadata_check.py -k supported_markers_are_sampled"),
    ("samples: a machine's release and version", "nemo_rl/forks/lock_markers.py",
     '_MACHINES = {"linux": (("6.1.0-18-amd64", "#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)"), ("", "")),',
     '_MACHINES = {"linux": (("", ""),),', "tests/test_metadata_check.py -k machine_markers"),
    ("samples: none meeting the lock is a difference", "nemo_rl/forks/locked_fork.py",
     "    if not envs:  # every comparison below would run over nothing and pass", "    if False:",
     "tests/test_metadata_check.py -k no_sampled_environment"),
    ("locked marker: one naming extra is never the fork's", "nemo_rl/forks/locked_fork.py",
     "                  and (n not in undecided or lock_markers.names_extra(m))]", "                  and n not in undecided]",
     "tests/test_metadata_check.py -k naming_extra"),
    ("journal: a dangling link is a journal", "nemo_rl/project/journal.py",
     "    return [(path, os.path.lexists(path / JOURNAL)) for path in stagings]",
     "    return [(path, (path / JOURNAL).exists()) for path in stagings]", "tests/test_landing.py -k dangling_link"),
    ("source: the locked URL is pyproject's", "nemo_rl/project/lockfile.py",
     '        if where != fork.url or parse_qs(parts.query, keep_blank_values=True) != expected:',
     '        if parse_qs(parts.query, keep_blank_values=True) != expected:',
     "tests/test_lock_truth.py -k source_edited"),
    ("source: no query beyond rev", "nemo_rl/project/lockfile.py",
     '        if where != fork.url or parse_qs(parts.query, keep_blank_values=True) != expected:',
     "        if where != fork.url:", "tests/test_lock_truth.py -k source_edited"),
    ("source: the offline check names it", "nemo_rl/forks/records.py", "    if locked_source is not None:",
     "    if False:", "tests/test_lock_truth.py -k source_edited"),
    ("source: status calls it lock stale", "nemo_rl/deps/status.py",
     "    lock_stale = locked_commit != fork.rev or bool(package and package.other_source(fork))",
     "    lock_stale = locked_commit != fork.rev", "tests/test_lock_truth.py -k source_edited"),
    ("source: deps patches relocks it", "nemo_rl/forks/metadata_check.py",
     "    return not (package and package.other_source(fork)) and not locked_fork.locked_differences(",
     "    return not locked_fork.locked_differences(", "tests/test_lock_truth.py -k source_edited"),
    ("ci: the base is resolved as a commit first", ".ci/declares-changes",
     '        if resolved.returncode != 0 or not resolved.stdout.strip():\n            continue\n'
     '        found = git("merge-base", "HEAD", resolved.stdout.strip())',
     '        found = git("merge-base", "HEAD", ref)', "tests/test_lock_truth.py -k declares_a_change"),
    ("ci: a base that is HEAD says so", ".ci/declares-changes",
     '    if base == git("rev-parse", "HEAD").stdout.strip():', "    if False:",
     "tests/test_lock_truth.py -k declares_a_change"),
    ("fix: status names the entry only where there is one", "nemo_rl/deps/status.py",
     '    elif state == "metadata stale":  # names the derived entry only where the fork has one', "    elif False:",
     "tests/test_lock_truth.py -k without_a_derived"),
    ("fix: deps patches names the entry only where there is one", "nemo_rl/deps/patches.py",
     '                if metadata_check.derives(project, dist) else "it also relocks the fork")',
     '                if True else "it also relocks the fork")', "tests/test_lock_truth.py -k without_a_derived"),
    ("runner: rows no hint names first", "tests/check_mutations.py",
     "    return sorted(selected, key=lambda m: " "hints.first(m[0], m[4]) is not None)", "    return list(selected)",
     "tests/test_check_mutations.py -k no_hint_names"),
    ("runner: a passing run without the mutation is made once", "tests/check_mutations.py",
     "                self.passed[test] " "= run", "                pass", "tests/test_check_mutations.py -k made_once"),
    ("runner: a failing hint is its own run alone", "tests/check_mutations.py",
     "    if alone is not None and " "not confirm:", "    if False:", "tests/test_check_mutations.py -k made_once"),
    ("runner: a hint is its run alone only when it ran first", "tests/check_mutations.py",
     "alone.failed[:1] " "== (first,):", "alone.failed:", "tests/test_check_mutations.py -k ran_after"),
    ("runner: an inconclusive run without the mutation is not kept", "tests/check_mutations.py",
     "        if not run.inconclusive and " "not run.failed:", "        if not run.failed:",
     "tests/test_check_mutations.py -k not_kept"),
    ("runner: timed tests confirm a failing hint", "tests/check_mutations.py",
     "    return any(t in tests for t in " "TIMED)", "    return False", "tests/test_check_mutations.py -k timed"),
    ("runner: rows are copied from the snapshot", "tests/check_mutations.py",
     "        shutil.copytree(source " "or ROOT, copy, ignore=LEFT_OUT)", "        shutil.copytree(ROOT, copy, ignore=LEFT_OUT)",
     "tests/test_check_mutations.py -k snapshot"),
    ("runner: a hint that is an option or another file is not used", "tests/check_mutations.py",
     '    if not (sep and rest and file.endswith(".py") and ' 'killer.isprintable()) or killer.startswith("-"):\n'
     "        return False\n", "", "tests/test_check_mutations.py -k usable"),
    ("runner: a hint is within the row's selection", "tests/check_mutations.py",
     "               for t in tests.split() " 'if not t.startswith("-"))', "               for t in [file])",
     "tests/test_check_mutations.py -k usable"),
    ("runner: a second runner's hints are kept", "tests/check_mutations.py",
     "merged = {**there, " "**self.known}", "merged = dict(self.known)",
     "tests/test_check_mutations.py -k second_runner"),
    ("runner: a hints file that is not hints is left alone", "tests/check_mutations.py",
     "                    if there is None:\n                        raise OSError(f\"{self.path} is not a plain",
     "                    if False:\n                        raise OSError(f\"{self.path} is not a plain",
     "tests/test_check_mutations.py -k not_hints"),
    ("runner: the snapshot reaches every row", "tests/check_mutations.py",
     "hints.first(name, tests), baselines, " "source))", "hints.first(name, tests), baselines))",
     "tests/test_check_mutations.py -k main_judges"),
    ("runner: a hint that cannot be written costs only the hint", "tests/check_mutations.py",
     "            except OSError " "as exc:\n                print(f\"warning: the hint", "            except ValueError as exc:\n                print(f\"warning: the hint",
     "tests/test_check_mutations.py -k cannot_be_written"),
    # review 24c: environments planted at the key, state a commit brought, metadata of another project
    ("whose: an environment planted at the key is never used", "nemo_rl/workers/environments.py",
     "    if os.path.lexists(path) and (foreign := not_ours(path)) is not None:", "    if False:",
     "tests/test_review24c.py -k at_the_key"),
    ("whose: another owner's files are loose", "nemo_rl/workers/verified.py",
     "(st.st_mode & 0o022 or st.st_uid != euid) and", "(st.st_mode & 0o022) and",
     "tests/test_review24c.py -k another_users_environment_at"),
    ("whose: metadata of another project is rebuilt", "nemo_rl/workers/environments.py",
     "        if found is None or found.project != project.resolve():", "        if found is None:",
     "tests/test_review24c.py -k naming_another_project"),
    ("whose: a relative project is no metadata", "nemo_rl/workers/environments.py",
     'meta["key"] != path.name or not Path(meta["project"]).is_absolute()', 'meta["key"] != path.name',
     "tests/test_review24c.py -k naming_another_project"),
    ("state: files git tracks under .nemo-rl are no state", "nemo_rl/project/state_dir.py", "    if found:\n",
     "    if False:\n", "tests/test_review24c.py -k files_a_commit_put"),
    # review 25c F4: the extras of a fork without a derived entry
    ("extras: each keeps only what it brings", "nemo_rl/forks/fork_metadata.py",
     "if not lock_markers.base_requirement(req)\n                         and lock_markers.with_extra(req, extra)]",
     "if lock_markers.with_extra(req, extra)]", "tests/test_fork_metadata.py -k each_extra"),
    ("extras: a damaged cached extras table is rebuilt", "nemo_rl/forks/fork_metadata.py",
     "\n                and isinstance(extras, dict) and _strings(list(extras)) and all(map(_strings, extras.values()))):",
     "):", "tests/test_fork_metadata.py -k damaged"),
    ("extras: deps patches records them", "nemo_rl/forks/records.py",
     "extras=not metadata_check.derives(project, fork.distribution))", "extras=False)",
     "tests/test_lock_truth.py -k extras_of_a_fork_without"),
    ("extras: bump records them", "nemo_rl/forks/bump_steps.py", "extras=not before.derives)", "extras=False)",
     "tests/test_lock_truth.py -k extras_of_a_fork_without"),
    ("extras: [declares] writes them", "nemo_rl/forks/declared.py", "        if self.extras:\n", "        if False:\n",
     "tests/test_declared.py -k keeps_the_extras"),
    ("extras: [declares] reads them", "nemo_rl/forks/declared.py",
     "    return Declares(table[\"version\"], python, tuple(requires), commit,\n"
     "                    tuple((name, tuple(lines)) for name, lines in sorted(extras.items())))",
     "    return Declares(table[\"version\"], python, tuple(requires), commit)", "tests/test_declared.py -k keeps_the_extras"),
    ("extras: a locked extra is held against [declares]", "nemo_rl/forks/locked_fork.py",
     "        return result + _extra_gaps(extras, declared_extras, envs, root_edges.asked_extras(lock, name))",
     "        return result",
     "tests/test_metadata_check.py -k extras_of_a_fork_without"),
    ("extras: an extra the fork does not declare is named", "nemo_rl/forks/locked_fork.py",
     "        if extra not in wanted:\n            result.append(",
     "        if extra not in wanted:\n            continue\n            result.append(",
     "tests/test_metadata_check.py -k extras_of_a_fork_without"),
    # text others write reaches the terminal shown, never acted on (review 24c F4)
    ("terminal: progress lines (a lock holder's description) show escapes", "nemo_rl/progress.py",
     'sys.stderr.write(f"==> {values.printable(message)}\\n")', 'sys.stderr.write(f"==> {message}\\n")',
     f"{TERMINAL} -k holder"),
    ("terminal: error messages show escapes", "nemo_rl/cli.py",
     'print(f"error: {values.printable(str(exc), lines=True)}", file=sys.stderr)',
     'print(f"error: {exc}", file=sys.stderr)', f"{TERMINAL} -k error_message"),
    ("terminal: a file's OSError shows escapes", "nemo_rl/cli.py",
     'print(f"error: {values.printable(message, lines=True)}"\n', 'print(f"error: {message}"\n',
     f"{TERMINAL} -k os_or"),
    ("terminal: an unexpected error shows escapes", "nemo_rl/cli.py",
     '{type(exc).__name__}: {values.printable(str(exc))}', "{type(exc).__name__}: {exc}", f"{TERMINAL} -k os_or"),
    ("terminal: a newline is kept only in a message of several lines", "nemo_rl/values.py",
     'not (lines and ch == "\\n")', "not lines", f"{TERMINAL} -k error_message"),
    ("terminal: record differences show escapes", "nemo_rl/forks/records.py",
     '        return values.printable(f"{self.file}: {self.field}: expected {self.expected}, found {self.found}")',
     '        return f"{self.file}: {self.field}: expected {self.expected}, found {self.found}"',
     f"{TERMINAL} -k record"),
    ("terminal: status lines show escapes", "nemo_rl/deps/status.py",
     '    return "\\n".join(values.printable(line) for line in lines)', '    return "\\n".join(lines)',
     f"{TERMINAL} -k status_shows"),
    ("terminal: another user's lock file is refused", "nemo_rl/locks.py",
     "    if info.st_uid != os.geteuid():", "    if False:", f"{TERMINAL} -k another_user"),
    # text from a fork or a shared directory shown, never acted on (review 24c F4, the rest)
    ("terminal: envs list lines show escapes", "nemo_rl/envs/command.py",
     '    return values.printable(f"{row.key}  {state:<16}', '    return (f"{row.key}  {state:<16}',
     f"{TERMINAL} -k envs_list"),
    ("terminal: bump's report shows escapes", "nemo_rl/deps/bump.py",
     "    print(values.printable(report(fork, new_rev, before.index, base, noted, changes, args.dry_run, lock_mode),\n"
     "                           lines=True))",
     "    print(report(fork, new_rev, before.index, base, noted, changes, args.dry_run, lock_mode))",
     f"{TERMINAL} -k commit_subject"),
    ("terminal: upstream's report shows escapes", "nemo_rl/deps/upstream.py",
     '        print(values.printable("\\n\\n".join(render(report) for report in reports), lines=True))',
     '        print("\\n\\n".join(render(report) for report in reports))', f"{TERMINAL} -k commit_subject"),
    ("values: a git URL holds no control character", "nemo_rl/values.py",
     r'_URL = re.compile(r"^(https?|ssh|git|file)://[^\s\x00-\x1f\x7f]+\Z"',
     r'_URL = re.compile(r"^(https?|ssh|git|file)://[^\s]+\Z"', "tests/test_values.py -k transports"),
    ("records: a subject's carriage return survives its record", "nemo_rl/forks/record_files.py",
     '    lines = text.split("\\n")', "    lines = text.splitlines()", f"{TERMINAL} -k commit_subject"),
    # the final review: kernel markers, uv's conflict extras, a pyproject subdirectory, git refusing a checkout
    ("locked marker: one on the kernel decides nothing", "nemo_rl/forks/lock_markers.py",
     '    if _names_extra(getattr(marker, "_markers", []), ("extra", *MACHINE)):',
     '    if _names_extra(getattr(marker, "_markers", [])):', "tests/test_metadata_check.py -k on_the_kernel"),
    ("locked marker: uv's conflict extras named as such", "nemo_rl/forks/locked_fork.py",
     '    conflicts = [f"{n} (marker {m!r:.80})" for n, m in found if lock_markers.conflict_extra(m)]',
     "    conflicts = []", "tests/test_metadata_check.py -k conflicting_extras"),
    ("source: pyproject's subdirectory is expected", "nemo_rl/project/lockfile.py",
     '**({"subdirectory": [fork.subdirectory]} if fork.subdirectory else {})', "**{}",
     "tests/test_locked_source.py"),
    ("state: a checkout git will not read is refused", "nemo_rl/git.py",
     '    if "not a git repository" in result.stderr:  # LC_ALL=C: git\'s own words\n        return None\n',
     "    return None\n", "tests/test_review24c.py -k git_will_not_read"),
    ("journal: an unreadable journal says files may have moved", "nemo_rl/project/journal.py",
     'fix = (f"nothing more was moved, but the landing may have moved some files before it was cut short: `git "',
     'fix = (f"nothing was moved; `git "', "tests/test_landing.py -k saying_nothing_more_moved"),
    ("locks: a lock file swapped each time ends in an error", "nemo_rl/locks.py",
     "    for _ in range(LOCK_FILE_TRIES):\n        fd = open_lock_file(path)", "    while True:\n        fd = open_lock_file(path)",
     "tests/test_review24c.py -k swapped_each_time"),
    ("node copy: an identity that moved is hashed again", "nemo_rl/workers/bundle_copy.py",
     '                if identity(os.lstat(cache / relative)) == kept:', '                if True:',
     f"{NEVER} -k installed_is_what"),
    ("node copy: racy identities are left out of the stamp", "nemo_rl/workers/bundle_copy.py",
     "        if now - kept[3] > RACY_NS:", "        if True:", f"{NEVER} -k node_copy_is_taken"),
    ("node copy: a stamp not this user's alone is no stamp", "nemo_rl/workers/bundle_copy.py",
     "        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:",
     "        if not stat.S_ISREG(info.st_mode):", f"{NEVER} -k node_copy_is_taken"),
    ("node copy: a copy found changed is removed", "nemo_rl/workers/bundle_copy.py",
     '            left = not locks.remove_unheld(candidate)', '            left = True',
     f"{NEVER} -k installed_is_what"),
    ("node copy: prune leaves a copy a build holds", "nemo_rl/locks.py",
     "    held = try_hold(directory)\n    if held is None:\n        return False\n    try:\n        if not remove",
     "    held = os.open(directory, os.O_RDONLY)\n    if held is None:\n        return False\n    try:\n        if not remove",
     f"{NEVER} -k node_copy_is_taken"),
    ("node copy: the stamp names the bundle's digest", "nemo_rl/workers/bundle_copy.py",
     '        if stamp.digest != digest:', '        if False:', f"{NEVER} -k node_copy_is_taken"),
    ("bytecode: every environment built gets private bytecode", "nemo_rl/workers/environments.py",
     "        bytecode.install(staging, verified.sites(staging))\n", "", f"{BUNDLES} -k only_the_checkout"),
    ("bytecode: verification refuses an environment without it", "nemo_rl/workers/environments.py",
     "    if wrong := bytecode.problem(env.path, verified.sites(env.path)):", "    if wrong := None:",
     "tests/test_verified.py -k without_private_bytecode"),
    ("bytecode: its directory is only the owner's", "nemo_rl/workers/bytecode.py",
     "    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:",
     "    if not stat.S_ISDIR(info.st_mode):", "tests/test_verified.py -k only_the_owner"),
    ("bytecode: the .pth is the line nemo-rl writes", "nemo_rl/workers/bytecode.py",
     "            if (site / PTH).read_bytes() != LINE.encode():", "            if False:",
     "tests/test_verified.py -k only_the_owner"),
    ("loose: the environment itself and pyvenv.cfg", "nemo_rl/workers/verified.py",
     '    for path in [str(env), str(env / "pyvenv.cfg")]:', "    for path in []:",
     "tests/test_verified.py -k start_up_file_and_bytecode"),
    ("loose: __pycache__ too", "nemo_rl/workers/verified.py",
     "        for dirpath, _, filenames in os.walk(top):  # `__pycache__` too",
     '        for dirpath, _, filenames in ((p, d, f) for p, d, f in os.walk(top) if "__pycache__" not in p):  #',
     "tests/test_verified.py -k start_up_file_and_bytecode"),
    ("ensure: a second look before anything runs", "nemo_rl/workers/environments.py",
     "        _refuse_foreign(where.path)  # again", "        pass  # again", f"{NEVER} -k planted_between"),
    ("settings: a shared venv directory must be sticky", "nemo_rl/settings.py",
     "    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:", "    if False:", f"{NEVER} -k sticky"),
    ("settings: a venv directory must be root's or ours, whatever its mode", "nemo_rl/settings.py",
     "    if info.st_uid not in trusted:", "    if False:", f"{NEVER} -k sticky"),
    ("settings: listing and pruning hold the venv directory to the same rules", "nemo_rl/settings.py",
     "        if path.is_dir():  # listing and pruning too", "        if False:  # listing and pruning too",
     f"{NEVER} -k sticky"),
    ("settings: the user sudo ran as is root's own", "nemo_rl/settings.py",
     "        trusted.add(int(sudo))", "        pass", f"{NEVER} -k sticky"),
    ("settings: the venv directory nemo-rl makes is not group-writable", "nemo_rl/settings.py",
     "        path.mkdir(mode=0o755, exist_ok=True)", "        path.mkdir(exist_ok=True)", f"{NEVER} -k sticky"),
    ("installed fork: a requirement listed twice is one", "nemo_rl/forks/installed_fork.py",
     "        wanted = {_spelled(r) for r in want_here}\n        changes = [f\"+{r}\" for r in sorted(wanted - have)]",
     "        from collections import Counter\n        wanted, have = Counter(_spelled(r) for r in want_here), Counter(have)\n"
     "        changes = [f\"+{r}\" for r in sorted((wanted - have).elements())]",
     "tests/test_declared.py -k lists_twice"),
    ("node copy: one killed before its check is listed unfinished", "nemo_rl/workers/housekeeping.py",
     "            elif copy and (digest := bundle_copy.stamp_digest(path)) is not None:", "            elif copy and (digest := ''):",
     f"{NEVER} -k node_copy_is_taken"),
    ("ensure: an environment an older nemo-rl built gets private bytecode", "nemo_rl/workers/environments.py",
     "            bytecode.install(found.path, verified.sites(found.path))", "            pass",
     "tests/test_review24c.py -k older_nemo_rl"),
    ("node copy: a node keeps its last used copies only", "nemo_rl/workers/bundle_copy.py",
     "        _keep_newest(digests)\n", "", f"{NEVER} -k node_copy_is_taken"),
    ("node copy: the last used are kept", "nemo_rl/workers/bundle_copy.py",
     '        os.utime(candidate / STAMP)  # last used', '        pass  # last used', f"{NEVER} -k node_copy_is_taken"),
    ("node copy: a copy a killed build left is removed by the next", "nemo_rl/workers/bundle_copy.py",
     "                locks.remove_unheld(candidate)\n            elif found is None:",
     "                pass\n            elif found is None:",
     f"{NEVER} -k node_copy_is_taken"),
    ("housekeeping: a copy being made is listed so", "nemo_rl/workers/housekeeping.py",
     "                made = locks.held(path)", "                made = False", f"{NEVER} -k node_copy_is_taken"),
    ("node copy: one file that cannot be copied ends the copy", "nemo_rl/workers/tree_copy.py",
     "        if failed.is_set():\n            return", "        if False:\n            return",
     f"{REVIEW} -k ends_the_copy"),
    ("toolchain: another user's lock names the toolkit's fix", "nemo_rl/locks.py",
     "lock file\", not_yours or _not_yours_fix(path))\n    if", "lock file\", _not_yours_fix(path))\n    if",
     "tests/test_cudakit.py -k another_user_locked"),
    ("node copy: a signal ends the copy within a file", "nemo_rl/workers/tree_copy.py",
     "            interrupt.check()  # a signal ends the copy", "            pass  # a signal ends the copy",
     f"{REVIEW} -k signal_during"),
    ("bundles: a signal ends the digest within a file", "nemo_rl/workers/bundles.py",
     "    interrupt.check()  # gigabytes are hashed here", "    pass  # gigabytes are hashed here",
     f"{REVIEW} -k signal_during"),
    ("process: a streamed stderr's end is read for its cause", "nemo_rl/process.py",
     "                    kept[key.fileobj].add(chunk)  # type: ignore[index]",
     "                    if not self._stream or key.fileobj is not proc.stderr:\n"
     "                        kept[key.fileobj].add(chunk)  # type: ignore[index]",
     "tests/test_process.py -k streamed_failure"),
    ("process: a streamed stderr is not called empty", "nemo_rl/process.py",
     "            if self._stream:  # its stderr went", "            if False:  # its stderr went",
     "tests/test_process.py -k streamed_failure"),
    ("review24d: a landing target that is a mount point is refused before staging", "nemo_rl/project/landing.py",
     "if os.path.lexists(target) and (str(where) in mounted or os.path.ismount(target)):", "if False:",
     "tests/test_review24d.py -k mount"),
    ("review24d: staging names its targets to the mount check", "nemo_rl/project/landing.py",
     "require_renames(project, [*files, *directories])", "require_renames(project)",
     "tests/test_review24d.py -k mount_point_among"),
    ("review24d: mountinfo's mount points are read", "nemo_rl/project/landing.py",
     "    return {unescape(fields[4]) for fields in (line.split(\" \") for line in lines) if len(fields) > 4}",
     "    return set()", "tests/test_review24d.py -k bind_mounted"),
    ("review24d: a landing onto a mount point says so and keeps the staged files", "nemo_rl/project/journal.py",
     "        if exc.errno == errno.EBUSY:", "        if False:", "tests/test_review24d.py -k recover_onto"),
    ("review24d: a linked patches/ or patches/<dist> is refused", "nemo_rl/forks/records.py",
     "        if path.is_symlink():\n            raise NemoRLError(", "        if False:\n            raise NemoRLError(",
     "tests/test_review24d.py -k records_committed"),
    ("review24d: a linked record is refused", "nemo_rl/forks/records.py",
     "*(directory.iterdir() if _real_dir(directory) else ())", "*()", "tests/test_review24d.py -k entry"),
    ("review24d: deps patches refuses linked records before any work", "nemo_rl/deps/patches.py",
     "        records.records_dir(project, fork.distribution)  # a linked records directory is refused", "        pass  #",
     "tests/test_review24d.py -k records_committed"),
    ("review24d: the offline check over a landing cut short names recover", "nemo_rl/deps/patches.py",
     "        if cut is not None:  # its records may be half moved", "        if False:  #",
     "tests/test_review24d.py -k offline_check_over"),
    ("review24d: a lock file refused with EACCES is named", "nemo_rl/locks.py",
     "        if exc.errno == errno.EACCES:", "        if False:", "tests/test_review24d.py -k planted_lock_file_link"),
    # review 25d: markers uv never writes, the project's own edges to a fork, asked extras, undeclared git sources
    ("locked marker: one uv never writes is a difference", "nemo_rl/forks/locked_fork.py",
     '    result += lock_markers.hand_markers("dependencies", dependencies)\n', "",
     "tests/test_metadata_check.py -k uv_never_writes"),
    ("locked marker: a Python version spelled otherwise than uv's", "nemo_rl/forks/lock_markers.py",
     "        if op not in _COMPARISONS or not _RELEASE.fullmatch(right[:-2] if wildcard else right):",
     "        if op not in _COMPARISONS:", "tests/test_metadata_check.py -k uv_never_writes"),
    ("locked marker: a Python version on the right", "nemo_rl/forks/lock_markers.py",
     '        if kinds[2] == "Variable" and right in _VERSION_NAMES:', "        if False:",
     "tests/test_metadata_check.py -k uv_never_writes"),
    ("samples: every spelling of a version literal", "nemo_rl/forks/lock_markers.py",
     '        for word in re.findall(r"(?<![\\w.])[vV]?\\d+(?:\\.\\d+)+", str(text or "")):',
     '        for word in re.findall(r"""(?:[\'"]\\s*|[<>=!~]=?\\s*)(3\\.\\d+(?:\\.\\d+)?)""", str(text or "")):',
     "tests/test_metadata_check.py -k uv_never_writes"),
    ("root edges: compared by the offline check", "nemo_rl/forks/metadata_check.py",
     "              in root_edges.differences(lockfile.load_toml(lock_path), dist)] if lock_path.exists() else []",
     "              in []] if lock_path.exists() else []", "tests/test_lock_truth.py -k own_locked_edge"),
    ("root edges: deps patches relocks them", "nemo_rl/forks/metadata_check.py",
     ") and not root_edges.differences(", ") and not (lambda *_: [])(", "tests/test_lock_truth.py -k own_locked_edge"),
    ("root edges: an extra's list with the base list", "nemo_rl/forks/root_edges.py",
     "            missing, unexpected = lock_markers.gaps(requirements, locked, envs, extra=extra, beside=beside)",
     "            missing, unexpected = lock_markers.gaps(requirements, locked, envs, extra=extra)", "tests/test_metadata_check.py -k own_locked_edges"),
    ("root edges: a marker on them uv never writes", "nemo_rl/forks/root_edges.py",
     '            result += [(f"{where} {f}", e, g) for f, e, g in lock_markers.hand_markers(field, locked)]\n', "",
     "tests/test_lock_truth.py -k own_locked_edge"),
    ("extras: an asked extra missing altogether", "nemo_rl/forks/locked_fork.py",
     "    tables.update({extra: [] for extra in sorted(asked & wanted.keys()) if extra not in present})\n", "",
     "tests/test_metadata_check.py -k table_is_deleted"),
    ("extras: asked by an edge's extra", "nemo_rl/forks/root_edges.py",
     "            found |= {canonicalize_name(str(e)) for e in (extras if isinstance(extras, list) else [])}",
     "            pass", "tests/test_metadata_check.py -k table_is_deleted"),
    ("orphans: a git source pinned by rev without a fork table", "nemo_rl/forks/records.py",
     '                    if dist not in known and any(isinstance(s, dict) and "git" in s',
     "                    if False and any(isinstance(s, dict) and \"git\" in s", "tests/test_metadata_check.py -k git_source_pinned"),
    ("orphans: a git source pinned by branch or in a list is a fork too", "nemo_rl/forks/records.py",
     "for s in (source if isinstance(source, list) else [source])))",
     "for s in ([source] if isinstance(source, dict) and 'rev' in source else [])))",
     "tests/test_metadata_check.py -k git_source_pinned"),
    ("ci: an empty list against none is no reordering", ".ci/declares-changes",
     "                if a_items == b_items:  # an empty list against none: the key itself came or went",
     "                if False:", "tests/test_lock_truth.py -k declares_a_change"),
    # builds at once from one bundle (review finding N3): one copy, used together, never removed under a build
    ("node copy: two builds at once take turns on the node lock", "nemo_rl/workers/bundle_copy.py",
     "        node = locks.lock_file(node_lock(root), waiting)", "        node = locks.open_lock_file(node_lock(root))",
     f"{NODE_COPY} -k two_builds"),
    ("node copy: a waiting build names the one it waits for", "nemo_rl/workers/bundle_copy.py",
     "        os.pwrite(node, f\"pid {os.getpid()} on {platform.node()}", "        os.pwrite(node, b\"\", 0) or (f\"pid {os.getpid()} on {platform.node()}",
     f"{NODE_COPY} -k two_builds"),
    ("node copy: a build waiting for another ends on a signal", "nemo_rl/locks.py",
     "    while True:\n        interrupt.check()\n", "    while True:\n", f"{NODE_COPY} -k ends_on_a_signal"),
    ("node copy: builds hold a kept copy shared", "nemo_rl/workers/bundle_copy.py",
     "    held = locks.try_hold(candidate, shared=True)", "    held = locks.try_hold(candidate)",
     f"{NODE_COPY} -k in_use_is_used"),
    ("node copy: a new copy is held shared once stamped", "nemo_rl/workers/bundle_copy.py",
     "        locks.share(held)  # a build waiting", "        pass  # a build waiting", f"{NODE_COPY} -k in_use_is_used"),
    ("locks: a shared hold keeps a remover out", "nemo_rl/locks.py",
     "        _flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)",
     "        _flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)", f"{NODE_COPY} -k prune_leaves"),
    ("node copy: KEEP counts bundles, not copies", "nemo_rl/workers/bundle_copy.py",
     "        if digest not in kept and len(kept) < KEEP:", "        if len(kept) < KEEP:",
     f"{NODE_COPY} -k one_copy_per_bundle"),
    ("locks: try_hold counts a filesystem without locks as held", "nemo_rl/locks.py",
     "    except (BlockingIOError, NemoRLError):  # held; or ENOLCK", "    except BlockingIOError:  # held; or ENOLCK",
     f"{NODE_COPY} -k without_locks"),
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


class Baselines:
    """Each test's run alone without any mutation, made once per runner run: every row's copy is made from one
    snapshot of the checkout (`snapshot`), so a second run of it would repeat the same experiment. Only a
    conclusive pass is kept; a failing or inconclusive baseline is made again for each row it concerns."""

    def __init__(self) -> None:
        self.passed: dict[str, Run] = {}
        self.lock = threading.Lock()

    def run(self, copy: Path, test: str, scratch: Path, timeout: float) -> Run:
        with self.lock:
            known = self.passed.get(test)
        if known is not None:
            return known
        run = run_pytest(copy, [test], scratch, timeout)
        if not run.inconclusive and not run.failed:
            with self.lock:
                self.passed[test] = run
        return run


def verdict_of(copy: Path, file: str, mutated: str, tests: str, scratch: Path, timeout: float,
               first: str | None = None, baselines: Baselines | None = None,
               confirm: bool = True) -> tuple[str, str]:
    """The verdict on one mutation of `copy` (a checkout copy holding the original text): its tests with the
    mutation; when one fails, that test alone without the mutation, then alone with it once more. `first`: the
    test that caught this mutation last time (a hint), run alone before the whole selection, which runs only
    when it does not fail: the verdict is the same, and a row whose killer sits late in a slow file costs one
    test instead of the file. A hint that fails was already a run alone with the mutation: it is not made again
    unless `confirm` (`needs_confirm`: tests that time signals, processes or a cluster, whose failure can clear
    with time). A hint counts as that run only when the test that failed is the hint itself (a hint naming a
    class runs more than one test, and what ran before may be why it failed). `baselines`: the runs without a mutation already made (none: each row
    makes its own)."""
    target = copy / file
    text = target.read_text()
    target.write_text(mutated)
    alone = run_pytest(copy, [first], scratch / "mutated", timeout) if first else None
    if alone is not None and alone.failed[:1] == (first,):
        with_mutation = alone
    else:
        with_mutation, alone = run_pytest(copy, tests.split(), scratch / "mutated", timeout), None
    if not with_mutation.failed:
        return judge(with_mutation)
    test = with_mutation.failed[0]
    target.write_text(text)
    baseline = (baselines or Baselines()).run(copy, test, scratch / "baseline", timeout)
    if baseline.inconclusive or baseline.failed:
        return judge(with_mutation, baseline)
    if alone is not None and not confirm:
        return judge(with_mutation, baseline, alone)
    target.write_text(mutated)
    return judge(with_mutation, baseline, run_pytest(copy, [test], scratch / "mutated", timeout))


# What a copy of the checkout leaves out: environments, git's own data, state and caches.
LEFT_OUT = shutil.ignore_patterns(".venv", ".git", "venvs", ".nemo-rl", "benchmark-results", "__pycache__",
                                  ".mypy_cache", ".ruff_cache", ".pytest_cache", ".mutation_killers.json.*")


def snapshot(dest: Path) -> Path:
    """The checkout as the run starts, copied once: every row is judged on it, whatever is edited, checked out or
    merged in the checkout while the run goes on (a run without a mutation is then the same experiment for each
    row, and `Baselines` may keep it)."""
    shutil.copytree(ROOT, dest, ignore=LEFT_OUT)
    return dest


# Test files whose assertions depend on timing: signals, waits, two processes overlapping, a hang detected after
# some seconds (a planted FIFO), threads joined with a timeout, a Ray cluster.
TIMED = (RAY, INTERRUPTS, GUARDS, SIDE, NODE_COPY, BUMP, HOUSEKEEPING, REST, TRUST, CUDA, WHOSE, PLAIN,
         "tests/test_process.py", "tests/test_pep517.py", "tests/test_check_mutations.py")


def needs_confirm(tests: str) -> bool:
    """Whether a failing hint is run alone once more after the run without the mutation: when the row's tests
    time signals, processes, waits or a Ray cluster, where a busy moment can fail a test once (a hint is always
    a test of the row's own files: `usable_hint`)."""
    return any(t in tests for t in TIMED)


def run_one(file: str, original: str, mutated: str, tests: str, timeout: float,
            first: str | None = None, baselines: Baselines | None = None,
            source: Path | None = None) -> tuple[str, str]:
    """One row's verdict on a copy of `source` (the run's snapshot; the checkout itself when none is given)."""
    with tempfile.TemporaryDirectory(prefix="nemo-rl-mutation-") as tmp:
        copy = Path(tmp) / "repo"
        shutil.copytree(source or ROOT, copy, ignore=LEFT_OUT)
        text = (copy / file).read_text()
        if text.count(original) != 1:
            return "not applied", f"the original text occurs {text.count(original)} times"
        if file.endswith(".py"):
            try:  # a row whose replacement breaks the syntax would only ever be a collection error
                compile(text.replace(original, mutated), file, "exec")
            except SyntaxError as exc:
                return "not applied", f"the mutated file does not compile: {exc}"
        return verdict_of(copy, file, text.replace(original, mutated), tests, Path(tmp), timeout, first, baselines,
                          confirm=needs_confirm(tests))


OUTCOMES = ("caught", "inconclusive", "survived", "flaky", "not applied")

# Which test caught each mutation last time, with the selection it was caught in (a hint is used only while the
# row's selection is unchanged). Each caught row updates it as the run goes, so an interrupted run keeps what
# it learnt. Committed: the next run, anywhere, starts from it.
HINTS = ROOT / "tests" / "mutation_killers.json"


def usable_hint(killer: str, tests: str) -> bool:
    """A hint is one test of the row's own selection: a node id in one of its files, or under a node id it names;
    never a pytest option, another file, or a string with control characters (the hints file is committed data,
    which a pull request can edit)."""
    file, sep, rest = killer.partition("::")
    if not (sep and rest and file.endswith(".py") and killer.isprintable()) or killer.startswith("-"):
        return False
    return any(killer == t or (t == file if "::" not in t else killer.startswith((t + "::", t + "[")))
               for t in tests.split() if not t.startswith("-"))


HINTS_LIMIT = 1 << 20


def _read_hints(path: Path) -> dict[str, dict[str, str]] | None:
    """The hints the file holds; {} when there is none; None when it is no plain file of JSON hints (a link, a
    FIFO, too large, not JSON): it is then neither used nor written over."""
    from nemo_rl import values

    try:
        data = json.loads(values.read_plain_file(path, HINTS_LIMIT))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    return {k: v for k, v in data.items() if isinstance(v, dict) and isinstance(v.get("tests"), str)
            and isinstance(v.get("killer"), str)}


class Hints:
    def __init__(self, path: Path, use: bool) -> None:
        self.path, self.lock = path, threading.Lock()
        self.known = _read_hints(path) or {}
        self.use = use

    def first(self, name: str, tests: str) -> str | None:
        hint = self.known.get(name)
        if not (self.use and hint and hint["tests"] == tests):
            return None
        return hint["killer"] if usable_hint(hint["killer"], tests) else None

    def caught(self, name: str, tests: str, killer: str) -> None:
        """Record a row's killer. A second runner on the same checkout may write the file too: the write is made
        under a lock on a file beside it, over what the file holds then. A write that fails costs the hint
        only, never the verdict."""
        import fcntl

        with self.lock:
            self.known[name] = {"tests": tests, "killer": killer}
            names = {m[0] for m in MUTATIONS}
            try:
                with open(self.path.with_name(f".{self.path.name}.lock"), "a") as lock:
                    fcntl.flock(lock, fcntl.LOCK_EX)
                    there = _read_hints(self.path)
                    if there is None:
                        raise OSError(f"{self.path} is not a plain file of hints: left as it is")
                    merged = {**there, **self.known}
                    text = json.dumps({k: merged[k] for k in sorted(merged) if k in names}, indent=1) + "\n"
                    fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
                    try:
                        with os.fdopen(fd, "w") as out:
                            os.fchmod(out.fileno(), 0o644)  # a committed file, as git checks it out
                            out.write(text)
                        os.replace(tmp, self.path)
                    finally:
                        if os.path.exists(tmp):
                            os.unlink(tmp)
            except OSError as exc:
                print(f"warning: the hint for {name!r} was not recorded: {exc}", file=sys.stderr, flush=True)


def run_order(selected: list, hints: Hints) -> list:
    """Rows no hint names first (never caught with their selection as it is: new or changed rows, or survivors),
    then the rest, each group in list order: a run cut short has judged what is least known. The verdicts do not
    depend on the order."""
    return sorted(selected, key=lambda m: hints.first(m[0], m[4]) is not None)


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
    baselines = Baselines()
    counted = threading.Lock()
    taken = tempfile.TemporaryDirectory(prefix="nemo-rl-mutation-snapshot-")
    source = snapshot(Path(taken.name) / "repo")
    selected = [m for m in MUTATIONS if not args.k or any(k in m[0] for k in args.k)]

    def one(mutation: tuple[str, str, str, str, str]) -> None:
        name, file, original, mutated, tests = mutation
        started = time.monotonic()
        outcome, detail = twice(functools.partial(run_one, file, original, mutated, tests, args.timeout,
                                                  hints.first(name, tests), baselines, source))
        with counted:
            counts[outcome] += 1
        if outcome == "caught":
            hints.caught(name, tests, detail.split(" (")[0])
        shown = f"caught by {detail}" if outcome == "caught" else f"{outcome.upper()} ({detail})"
        print(f"| {name} | {tests} | {shown.replace('|', '/')} | {time.monotonic() - started:.0f} |", flush=True)

    print("| check removed | tests | result | s |\n|---|---|---|---|")
    selected = run_order(selected, hints)
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
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # no row still copies the snapshot
        taken.cleanup()
    total = sum(counts.values())
    print(f"\n{total} mutation(s): " + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES if counts[o] or o != "not applied"))
    return 0 if total and counts["caught"] == total else 1


if __name__ == "__main__":
    sys.exit(main())
