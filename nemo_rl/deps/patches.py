"""`nemo-rl deps patches`: make, check and export the records of each fork's downstream commits."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from nemo_rl import deps, git, uv
from nemo_rl.errors import NemoRLError, UsageError, command, from_elsewhere
from nemo_rl.project import journal, landing, lockfile, state_dir, uv_inputs
from nemo_rl.project.model import Project

HELP = "generate or check patches/<dist>/ records; export a fork's patch series"
USAGE = "nemo-rl deps patches [DIST] [--check [--offline]]\n       nemo-rl deps patches export DIST DIR"
EXPORT = "Write the fork's patch series (git format-patch) into DIR: `git am` onto the upstream base gives the pin."
DESCRIPTION = ("Regenerate the records of DIST (default: every fork) from the fork and its upstream; --check: fail on "
               "drift; --check --offline: against pyproject.toml and uv.lock only. export: " + EXPORT)


class _Refused(Exception):
    pass


class _Form(argparse.ArgumentParser):
    def __init__(self, named: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.named = named

    def error(self, message: str):  # type: ignore[override]
        raise _Refused(self.named + message)  # guard: fast-patches-refuses-extra-words


class _Words(argparse.Action):
    def __init__(self, option_strings, dest, records: _Form, export: _Form, **kwargs) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.records, self.export = records, export

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        # every word after `--` is a word, `-x` too
        dashes = bool(values) and values[0].startswith("-")
        words = values[1:] if values[:1] == ["--"] else list(values)
        form = self.export if words[:1] == ["export"] else self.records
        words = words[1:] if form is self.export else words
        try:
            form.parse_args(["--", *words] if dashes else words, namespace)  # guard: fast-patches-takes-words-after
        except _Refused as exc:
            parser.error(str(exc))


def _options(parser: argparse.ArgumentParser, shown: bool = True) -> None:
    deps.common(parser)
    for option, text in (("--check", "fail on drift instead of writing"),
                         ("--offline", "with --check: no fetch, validate the records only")):
        parser.add_argument(option, action="store_true", help=text if shown else argparse.SUPPRESS)
    if shown:
        deps.writes(parser)
    else:
        parser.add_argument("--no-wait", action="store_true", help=argparse.SUPPRESS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = USAGE
    _options(parser)
    records = _Form("", prog=parser.prog, usage=USAGE, description=DESCRIPTION)
    _options(records)
    records.add_argument("distribution", metavar="DIST", nargs="?", help=argparse.SUPPRESS)
    export = _Form("patches export DIST DIR: ", prog=f"{parser.prog} export", description=EXPORT)
    _options(export, shown=False)  # guard: fast-patches-takes-options-anywhere
    export.add_argument("export", metavar="DIST", help=deps.DIST_HELP)
    export.add_argument("export_dir", metavar="DIR", type=Path,  # guard: fast-patches-export-takes-exactly-dist
                        help="where the patch files go (made when missing)")
    words = parser.add_argument("words", nargs=argparse.PARSER, action=_Words, records=records, export=export,
                                default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    words.required = False
    parser.set_defaults(distribution=None, export=None, export_dir=None)


def _export(project: Project, distribution: str, directory: Path) -> int:
    from nemo_rl.forks import fork_cache

    fork = project.fork(distribution)
    repo = fork_cache.fetched(fork, fork.rev)
    base = git.merge_base(repo, fork.rev, fork_cache.UPSTREAM_REF.format(branch=fork.upstream_branch))
    directory.mkdir(parents=True, exist_ok=True)
    written = git.format_patch(repo, f"{base}..{fork.rev}", directory.resolve())
    for path in written:
        print(path)
    print(f"wrote {len(written)} patch(es) to {directory}; apply onto {base} with "
          f"{command('git am {d}/*.patch', d=directory)}")
    return 0


def _relock(staged: Path, fork: lockfile.Fork, before, after) -> None:
    from nemo_rl.forks import metadata_check

    try:
        uv.lock(staged, upgrade_package=fork.distribution)
    except NemoRLError as exc:
        raise NemoRLError(f"uv cannot lock {fork.distribution}'s entry derived from the fork at {fork.rev[:12]}: "
                          f"{exc.what.splitlines()[0]}", metadata_check.refusal_remedy(before, after)) from exc


def _write_base(pyproject: Path, distribution: str, base: str) -> None:
    import tomlkit

    doc = tomlkit.parse(lockfile.read_text(pyproject))
    doc["tool"]["nemo-rl"]["forks"][distribution]["base"] = base
    state_dir.write_atomic(pyproject, tomlkit.dumps(doc))


def _generate(root: Path, forks: list[lockfile.Fork]) -> int:
    from nemo_rl.forks import declared, fork_cache, metadata_check, records

    left = []
    for fork in forks:
        project = Project.read(root)
        records.records_dir(root, fork.distribution)  # guard: deps-patches-refuses-linked-records
        repo = fork_cache.fetched(fork, fork.rev)
        base, recs = records.compute(repo, fork)
        # what the fork declares at the pin is recorded with it (every fork: the offline check compares uv.lock with
        # it), and a derived entry is derived from it
        declares = records.declares_at(project, repo, fork, fork.rev)
        derives = metadata_check.derives(project, fork.distribution)
        relative = records.relative_dir(fork.distribution)
        was_locked = fork.distribution in project.packages
        uv_inputs.require_stageable(root, project.uv_table, "deps patches")
        with landing.Staging(root, ["pyproject.toml", "uv.lock"], [relative], uv.SETTINGS_FILES) as staging:
            staged = staging.path / relative
            index, noted = records.build(staged, records.read_index(staged), fork, fork.rev, base, recs, declares)
            records.write(staged, index, noted)
            if fork.base and fork.base != base:  # guard: fixes-deps-patches-writes-the-base-it-records
                _write_base(staging.path / "pyproject.toml", fork.distribution, base)
                print(f"{fork.distribution}: base in [tool.nemo-rl.forks.{fork.distribution}] {fork.base[:12]} -> "
                      f"{base[:12]}")
            before, written, unneeded = metadata_check.rewrite_pyproject(Project.read(staging.path),
                                                                         fork.distribution, declares) \
                if derives else (None, None, [])
            rewritten = Project.read(staging.path)
            # a uv.lock edited by hand keeps its lie through `uv lock`: only relocking the fork rewrites it
            relocked = not written and not metadata_check.lock_follows(rewritten, fork, declares)  # guard: no-entry-deps-patches-relocks-a-hand
            if written or relocked:  # guard: derived-deps-patches-relocks-a-hand
                uv.require_relock(f"nemo-rl deps patches {shlex.quote(fork.distribution)} --project "
                                  f"{shlex.quote(str(root))}")
                _relock(staging.path, fork, before, written or metadata_check.entry(rewritten, fork.distribution)
                        or declared.derive(fork.distribution, declares, metadata_check.deltas(rewritten,
                                                                                              fork.distribution)))
                if rewritten.lock_bytes is not None:  # guard: deps-patches-checks-the-relock-s-lock-options
                    uv.require_same_options(rewritten.lock, Project.read(staging.path).lock, "`deps patches`")
                staging.keep_mode("uv.lock")
            staging.land()
        print(f"{fork.distribution}: {len(recs)} downstream commit(s) over {base[:12]} -> {root / relative}")
        if written:
            print(f"  [[tool.uv.dependency-metadata]] {fork.distribution} rewritten from the fork at {fork.rev[:12]}, "
                  "uv.lock relocked:")
            print("\n".join(metadata_check.entry_changes(before, written)))
        elif relocked and not was_locked:
            print(f"  {fork.distribution} was not in uv.lock: locked")
        elif relocked:
            said = ("its [[tool.uv.dependency-metadata]] entry locks" if derives else
                    f"the fork declares at {fork.rev[:12]} ({records.index_name(fork.distribution)} [declares])")
            print(f"  uv.lock's {fork.distribution} was not the one {said}: relocked")
        for name in unneeded:
            print(f"  removed the drop of {name} from [tool.nemo-rl.forks.{fork.distribution}] (no longer declared)")
        remaining = metadata_check.problems(Project.read(root), fork, records.read_index(root / relative))
        for problem in remaining:
            print(f"  - {records.Difference(*problem)}")
        if remaining:
            left.append(fork.distribution)
    for dist in left:
        print(f"{dist}: uv.lock still disagrees with the fork after relocking; fix: remove or widen the override "
              "named above, or run `uv lock --upgrade-package <package>` for each, then "
              "`nemo-rl deps patches --check --offline`")
    return 1 if left else 0


def run(project: Project, args: argparse.Namespace) -> int:
    from nemo_rl.forks import metadata_check, records

    if args.export and (args.check or args.offline):  # guard: fast-patches-export-refuses-check
        raise UsageError("`deps patches export` takes no --check or --offline",
                         "run `nemo-rl deps patches --check [--offline]` and the export as two commands")
    if args.export:
        return _export(project, args.export, args.export_dir)
    if args.offline and not args.check:
        raise UsageError("--offline only applies to --check", "add --check, or drop --offline")
    all_forks = list(project.forks)
    forks = [project.fork(args.distribution)] if args.distribution else all_forks
    if not args.check:
        with state_dir.project_lock(project.root, wait=not args.no_wait):
            journal.refuse_cut_short(project.root, locked=True)  # guard: patches-refuses-over-a-landing-cut-short
            # read again under the lock: a bump that landed while we waited changed the pins
            held = Project.read(project.root)
            return _generate(project.root, [held.fork(f.distribution) for f in forks])
    failed: list[str] = []
    not_regular: list[tuple[str, str]] = []  # (dist, record): `deps patches` refuses to write over one
    unexplained: list[str] = []
    overridden: list[str] = []
    interrupted: list[str] = []
    locked = project.packages  # uv.lock refused first, whatever the forks
    cuts = journal.cut_short(project.root)
    for fork in forks:
        cut = next((c for c in cuts if c.touches(records.relative_dir(fork.distribution))), None)
        if cut is not None:  # guard: the-offline-check-over-a-landing-cut
            print(f"{fork.distribution}: landing interrupted")
            print(f"  - {cut.unreadable}" if cut.unreadable is not None else
                  f"  - a landing of {', '.join(cut.moves)} was cut short ({cut.staging} is left; moved: "
                  f"{', '.join(cut.moved) or 'nothing'})")
            interrupted.append(fork.distribution)
            continue
        problems = records.check_offline(project, fork, locked)
        if not args.offline:
            problems += records.check_online(project, fork)
        not_regular += [(fork.distribution, name) for name in records.not_regular(problems)]
        if any(p.field == "why" for p in problems):  # guard: drift-the-why-note-is-a-hand-edit
            unexplained.append(fork.distribution)  # regenerating keeps the note: only a hand edit writes it
        if any(p.field != "why" for p in problems):
            failed.append(fork.distribution)
            # relocking keeps what an override forces: regenerating cannot fix it, editing the override does
            overridden += [fork.distribution] if any("override-dependencies" in str(p) for p in problems) else []
        print(f"{fork.distribution}: {'ok' if not problems else 'DRIFT'}")
        for problem in problems:
            print(f"  - {problem}")
    orphans = records.orphans(project, all_forks) if not args.distribution else []
    for orphan in orphans:
        print(f"  - {orphan}")

    def fix(text: str) -> None:
        print(f"fix: {from_elsewhere(text, project.root)}")

    for dist in overridden:
        fix(f"{dist}: remove or widen the [tool.uv] override-dependencies entry named above, then run `uv lock`")
    for dist, name in not_regular:
        fix(f"{dist}: {records.not_regular_fix(dist, name)}")
    for dist in failed:
        also = ("it also writes the derived [[tool.uv.dependency-metadata]] entry and relocks"  # guard: fix-deps-patches-names-the-entry-only
                if metadata_check.derives(project, dist) else "it also relocks the fork")
        fix(f"{deps.REGENERATE.format(dist=dist)} ({also}); or `nemo-rl deps bump {dist} --branch <branch>`")
    for dist in unexplained:
        fix(f"{dist}: replace the placeholder `why` with what the fork adds and why: "
            f"{command('$EDITOR {index}', index=records.index_name(dist))}")
    for orphan in orphans:
        fix(records.orphan_fix(orphan))
    if interrupted:
        fix(f"{', '.join(interrupted)}: run `nemo-rl deps recover`, then `nemo-rl deps patches --check` again")
    return 1 if failed or unexplained or orphans or interrupted else 0
