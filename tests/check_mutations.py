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
import os
import shutil
import signal
import subprocess
import sys
import tempfile
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
LIBS = "tests/test_cuda_libs.py"
DECLARED = "tests/test_declared.py"
DERIVED = "tests/test_deps_declared.py"
SCRATCH = "tests/test_scratch.py"
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
    ("bundles: the bundle is never written", "nemo_rl/workers/bundles.py", "                _link_tree(bucket, work / bucket.name)",
     "                os.symlink(bucket.resolve(), work / bucket.name)", BUNDLES),
    ("bundles: transformer-engine pre-flight", "nemo_rl/workers/bundles.py", "        if unbuildable:\n", "        if False:\n", BUNDLES),
    # issue 28: nodes with only the checkout, verification recorded
    ("verified: the record is used", "nemo_rl/workers/environments.py", "        if not verified.still_verified(env.path, project):",
     "        if True:", f"{RAY} -k checked_again_only"),
    ("verified: directories in the state", "nemo_rl/workers/environments.py", "        verified.write(env.path, project, result.python, ray_there, watched,",
     "        verified.write(env.path, project, result.python, ray_there, [],", f"{RAY} -k checked_again_only"),
    ("verified: loaded files in the state", "nemo_rl/workers/environments.py", "verified.inside(env.path, [*result.files, *metadata]))",
     "verified.inside(env.path, []))", f"{RAY} -k checked_again_only"),
    ("verified: nothing recorded when the state moved during the check", "nemo_rl/workers/environments.py",
     "    if verified.state(env.path, watched, []) == before:", "    if True:", f"{RAY} -k checked_again_only"),
    ("verified: state compared", "nemo_rl/workers/verified.py", "    return state(env, record.dirs, record.files) == record.state",
     "    return True", f"{RAY} -k checked_again_only"),
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
     "        if args.bundle is not None and sys.prefix == sys.base_prefix:", "        if False:", f"{BUNDLES} -k node_with_only"),
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
    ("process: a boolean timeout is refused", "nemo_rl/process.py", "isinstance(timeout, bool) or ", "", INTERRUPTS),
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
    ("verified: bytecode a worker writes keeps the record", "nemo_rl/workers/verified.py",
     '                               if n != "__pycache__")', "                               )",
     "tests/test_verified.py"),
    ("verified: a nested record is no record", "nemo_rl/workers/verified.py",
     "    except (OSError, ValueError, RecursionError):  # not a record we wrote", "    except (OSError, ValueError):  # not a record we wrote",
     "tests/test_verified.py"),
    ("never: a fork's uv configuration is not read", "nemo_rl/uv.py", '"--no-project", "--no-config", ', '"--no-project", ',
     "tests/test_fork_metadata.py"),
    ("never: direct-reference build requirements refused", "nemo_rl/forks/fork_metadata.py",
     "        if direct := [str(r) for r in parsed if r.url]:", "        if direct := []:", "tests/test_fork_metadata.py"),
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
     "    if missing := sorted(required - found):", "    if missing := []:", DECLARED),
    ("never: a link out through another link", "nemo_rl/workers/bundles.py",
     "                or not (real == inside or real.startswith(inside + os.sep))):", "                or False):", NEVER),
    ("never: the linked inode is checked again", "nemo_rl/workers/bundles.py",
     "                if linked.st_uid == euid and not linked.st_mode & 0o022:", "                if True:", NEVER),
    ("never: --remove refuses submodules", "nemo_rl/deps/develop.py",
     '        if (checkout / ".gitmodules").exists() or (checkout / ".git" / "modules").exists():', "        if False:", NEVER),
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
     "            if path.is_symlink() and not path.exists():\n                path.unlink()",
     "            if path.is_symlink() and not path.exists():\n                pass", CUDA),
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
     "    fits = cuda_archs.check_node(bundle)  # refuses before anything is installed", "    fits = None", ARCHS),
    ("archs: pack records the archs", "nemo_rl/workers/bundles.py",
     '        cuda_archs.record(env, lockfile.load_toml(project / "uv.lock"), work)  # read from the built binaries',
     "        pass", ARCHS),
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
    ("develop: --onto refuses unsaved work", "nemo_rl/deps/develop.py", "    if unsaved:\n        raise NemoRLError(f\"{checkout} has {",
     "    if False:\n        raise NemoRLError(f\"{checkout} has {", f"{DEVELOP}::test_onto_refuses_a_checkout_with_unsaved_work"),
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
    ("derived: drops applied", "nemo_rl/forks/declared.py", "if _name(r) not in dropped | added.keys()}",
     "if _name(r) not in added.keys()}", DECLARED),
    ("derived: adds applied", "nemo_rl/forks/declared.py", "    merged = {**kept, **added}", "    merged = kept", DECLARED),
    ("derived: the fork's version", "nemo_rl/forks/declared.py", "return Entry(distribution, declares.version,",
     "return Entry(distribution, None,", DECLARED),
    ("derived: version compared", "nemo_rl/forks/declared.py", "        if expected != found:",
     '        if field != "version" and expected != found:', DECLARED),
    ("derived: requires-dist compared", "nemo_rl/forks/declared.py", "    if entry.requires_dist != derived.requires_dist:",
     "    if False:", DECLARED),
    ("derived: a drop needs its why", "nemo_rl/forks/declared.py", "or not isinstance(why, str) or not why.strip():",
     "or not isinstance(why, str):", DECLARED),
    ("derived: a name listed once", "nemo_rl/forks/declared.py", "            if name in seen:", "            if False:",
     DECLARED),
    ("derived: unnecessary drops", "nemo_rl/forks/declared.py", "if d.name not in declared]", "if False]", DECLARED),
    ("derived: checked offline", "nemo_rl/forks/records.py", "    return diffs + (declared_differences(project, fork) if metadata else [])",
     "    return diffs", f"{DERIVED} -k hand_edited_entry"),
    ("derived: declares recorded", "nemo_rl/forks/metadata_check.py", '                 "not recorded")]', '                 "not recorded")][:0]',
     f"{DERIVED} -k without_recorded"),
    ("derived: declares verified online", "nemo_rl/forks/records.py", "                  if fork_declares.get(key) != recorded.get(key)]",
     "                  if False]", f"{DERIVED} -k online_check_finds_declares"),
    ("derived: status says metadata stale", "nemo_rl/deps/status.py", '    elif metadata:\n        state = "metadata stale"',
     '    elif False:\n        state = "metadata stale"', f"{DERIVED} -k hand_edited_entry"),
    ("derived: deps patches writes the entry", "nemo_rl/deps/patches.py", "            if written:\n                _relock(",
     "            if False:\n                _relock(", f"{DERIVED} -k hand_edited_entry"),
    ("derived: bump lands the entry", "nemo_rl/deps/bump.py", "        lock_mode, entry_lines = land_entry(staging.path, new_fork, declares, lock_mode)",
     "        entry_lines = []", f"{BUMP} -k lands_the_version"),
    ("derived: bump relocks a changed entry", "nemo_rl/forks/bump_steps.py", "        uv.lock(staged, upgrade_package=fork.distribution)\n    except NemoRLError as exc:\n        raise NemoRLError(f\"uv cannot lock",
     "        pass\n    except NemoRLError as exc:\n        raise NemoRLError(f\"uv cannot lock", f"{BUMP} -k lands_the_version"),
    ("derived: refusal names the drop line", "nemo_rl/forks/metadata_check.py", '    lines = "\\n".join(f"    {declared.drop_line(name)}" for name in new)',
     '    lines = ""', f"{DERIVED} -k cannot_lock"),
    ("derived: unnecessary drops removed", "nemo_rl/forks/metadata_check.py", "    if unneeded:\n        drops =",
     "    if False:\n        drops =", f"{DERIVED} -k unnecessary"),
    # the installed fork against uv.lock and the recorded fork metadata
    ("installed: version against the lock", "nemo_rl/project/installed.py",
     "or installed_version == locked_version:", "or True:", DECLARED),
    ("installed: requirements against the records", "nemo_rl/project/installed.py", "        if have != want:",
     "        if False:", DECLARED),
    ("installed: a locked requirement missing", "nemo_rl/project/installed.py",
     "        if find_installed(req.name, path) is None:", "        if False:",
     DECLARED),
    ("doctor: installed version against the lock", "nemo_rl/doctor/report.py",
     'return ("installed differs", differs) if differs else ("ok", None)', 'return ("ok", None)', "tests/test_doctor.py"),
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
    ("fast: the backend's get_requires_for_build_wheel is installed", "nemo_rl/forks/fork_metadata.py",
     "        requires.extend(_checked(hooks.get_requires_for_build_wheel(), rev))",
     "        _checked(hooks.get_requires_for_build_wheel(), rev)",
     "tests/test_fork_metadata.py"),
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
    ("fast: patches export takes exactly DIST DIR", "nemo_rl/deps/cli.py", "found = self.EXPORT.parse_args(words[1:])",
     "found = self.EXPORT.parse_known_args(words[1:] + ['x', 'y'])[0]", "tests/test_cli.py"),
    ("fast: build requirements are PEP 508", "nemo_rl/forks/fork_metadata.py",
     "        parsed = [Requirement(r) for r in requirements]", "        parsed = []",
     "tests/test_fork_metadata.py"),
    ("fast: backend-path is a list of strings", "nemo_rl/forks/fork_metadata.py",
     "    if not isinstance(backend, str) or not (backend_path is None or (", "    if False and (backend_path is None or (",
     "tests/test_fork_metadata.py"),
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
     '        if (os.path.isabs(target) or landing == ".." or landing.startswith("../")', "        if (False", NEVER),
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



def run_pytest(copy: Path, selection: list[str], scratch: Path, timeout: float) -> Run:
    """pytest over `selection` with the code of `copy`, in its own process group (a timeout kills Ray too)."""
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
    try:
        returncode = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        returncode = None
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # what the run left behind (Ray's processes), or the run itself
        except ProcessLookupError:
            pass
        proc.wait()
    return classify(report.read_text() if report.exists() else None, returncode)


def verdict_of(copy: Path, file: str, mutated: str, tests: str, scratch: Path, timeout: float) -> tuple[str, str]:
    """The verdict on one mutation of `copy` (a checkout copy holding the original text): its tests with the
    mutation; when one fails, that test alone without the mutation, then alone with it once more."""
    target = copy / file
    text = target.read_text()
    target.write_text(mutated)
    with_mutation = run_pytest(copy, tests.split(), scratch / "mutated", timeout)
    if not with_mutation.failed:
        return judge(with_mutation)
    target.write_text(text)
    baseline = run_pytest(copy, [with_mutation.failed[0]], scratch / "baseline", timeout)
    if baseline.inconclusive or baseline.failed:
        return judge(with_mutation, baseline)
    target.write_text(mutated)
    return judge(with_mutation, baseline, run_pytest(copy, [with_mutation.failed[0]], scratch / "mutated", timeout))


def run_one(file: str, original: str, mutated: str, tests: str, timeout: float) -> tuple[str, str]:
    with tempfile.TemporaryDirectory(prefix="nemo-rl-mutation-") as tmp:
        copy = Path(tmp) / "repo"
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".git", "venvs", ".nemo-rl",
                                                                   "benchmark-results", "__pycache__"))
        text = (copy / file).read_text()
        if text.count(original) != 1:
            return "not applied", f"the original text occurs {text.count(original)} times"
        return verdict_of(copy, file, text.replace(original, mutated), tests, Path(tmp), timeout)


OUTCOMES = ("caught", "inconclusive", "survived", "flaky", "not applied")


# Runs whose tests time signals or start a Ray cluster get the machine to themselves: beside another run they
# time out on a busy machine and prove nothing.
ALONE = (RAY, INTERRUPTS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", action="append", default=[], help="only mutations whose name contains this "
                        "(repeat for any of several)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds one pytest run may take (default 3600)")
    parser.add_argument("--jobs", type=int, default=1, help="mutations run at once, each in its own copy (default 1); "
                        "those of the Ray and interruption tests always run alone")
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error("--jobs must be 1 or more")
    counts = dict.fromkeys(OUTCOMES, 0)
    selected = [m for m in MUTATIONS if not args.k or any(k in m[0] for k in args.k)]

    def one(mutation: tuple[str, str, str, str, str]) -> None:
        name, file, original, mutated, tests = mutation
        started = time.monotonic()
        outcome, detail = twice(functools.partial(run_one, file, original, mutated, tests, args.timeout))
        counts[outcome] += 1
        shown = f"caught by {detail}" if outcome == "caught" else f"{outcome.upper()} ({detail})"
        print(f"| {name} | {tests} | {shown.replace('|', '/')} | {time.monotonic() - started:.0f} |", flush=True)

    print("| check removed | tests | result | s |\n|---|---|---|---|")
    alone = [m for m in selected if any(t in m[4] for t in ALONE)]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for future in [pool.submit(one, m) for m in selected if m not in alone]:
            future.result()
    for mutation in alone:
        one(mutation)
    total = sum(counts.values())
    print(f"\n{total} mutation(s): " + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES if counts[o] or o != "not applied"))
    return 0 if total and counts["caught"] == total else 1


if __name__ == "__main__":
    sys.exit(main())
