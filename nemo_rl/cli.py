"""The `nemo-rl` command: registers the verbs, finds the project once, maps errors to exit codes."""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from nemo_rl import __version__, interrupt, process, values, verbose
from nemo_rl.errors import Interrupted, NemoRLError, command, from_elsewhere

if TYPE_CHECKING:
    from nemo_rl.project.model import Project

# OS errors about the user's files, not a fault in nemo-rl: exit 1 with the path.
USER_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENOTDIR, errno.EISDIR,
               errno.EEXIST, errno.ENOENT}


class Group(Protocol):
    HELP: str
    DESCRIPTION: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...


class Verb(Group, Protocol):
    def run(self, project: Any, args: argparse.Namespace) -> int: ...


def _add(subparsers: argparse._SubParsersAction, name: str, module: Group) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(name, help=module.HELP, description=module.DESCRIPTION)
    module.add_arguments(parser)
    return parser


def _verbs(subparsers: argparse._SubParsersAction, **verbs: Verb) -> None:
    for name, verb in verbs.items():
        _add(subparsers, name, verb).set_defaults(handler=verb.run)


def _group(subparsers: argparse._SubParsersAction, name: str, group: Group) -> argparse._SubParsersAction:
    return _add(subparsers, name, group).add_subparsers(dest="verb", required=True, metavar="VERB")


def build_parser() -> argparse.ArgumentParser:
    # runs on a node with the standard library alone: verbs import heavy modules in their handlers
    from nemo_rl import deps, envs, toolchain
    from nemo_rl.deps import bump, develop, patches, recover, status, upstream
    from nemo_rl.deps import verify as deps_verify
    from nemo_rl.doctor import command as doctor
    from nemo_rl.envs import build, pack, prune
    from nemo_rl.envs import list as envs_list
    from nemo_rl.envs import verify as envs_verify
    from nemo_rl.toolchain import cuda, watch

    parser = argparse.ArgumentParser(
        prog="nemo-rl",
        description="nemo-rl: post-training for LLMs; environment checks and fork-pin tooling.",
        epilog="exit codes: 0 ok, 1 an expected failure (the message says what to do), 2 bad arguments, "
        "3 a bug in nemo-rl (--verbose shows the traceback), 130 interrupted (143 SIGTERM, 129 SIGHUP)",
    )
    parser.add_argument("--version", action="version", version=f"nemo-rl {__version__}")
    verbose.add(parser, top=True)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _verbs(commands, doctor=doctor)
    _verbs(_group(commands, "deps", deps), status=status, bump=bump, verify=deps_verify, develop=develop,
           upstream=upstream, recover=recover, patches=patches)
    _verbs(_group(commands, "envs", envs), list=envs_list, build=build, verify=envs_verify, prune=prune, pack=pack)
    _verbs(_group(commands, "toolchain", toolchain), cuda=cuda, watch=watch)
    return parser


def _os_error_message(exc: OSError) -> str | None:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # guard: full-disk-the-cli-says-to-free-space
        return _full_message(exc)
    if exc.errno not in USER_ERRNOS or not exc.filename:
        return None
    return (f"cannot use {exc.filename}: {exc.strerror}\n  what to do: check that the path exists, is a file or "
            "directory as needed, and that you may write there")


def _full_message(exc: OSError) -> str:
    todo = "(or raise the quota; `df -h` shows which is full), then run again"
    if not exc.filename:  # guard: full-disk-an-enospc-naming-no-file-is
        return f"a write failed: {exc.strerror}\n  what to do: free space where the command writes {todo}"
    name = os.fsdecode(exc.filename)
    if not os.path.isabs(name):
        return f"cannot write {name}: {exc.strerror}\n  what to do: free space where it goes {todo}"
    directory = next((p for p in Path(name).parents if p.is_dir()), Path("/"))  # guard: full-disk-the-cli-names-a-directory-that
    return (f"cannot write {name}: {exc.strerror}\n  what to do: free space on the filesystem of {directory} "
            f"({command('df -h {d}', d=directory)} shows it; or raise the quota), then run again")


def _project(args: argparse.Namespace) -> Project | None:
    from nemo_rl.project.model import Project

    if args.project is None and not getattr(args, "project_required", True):
        return None
    return Project.find(args.project)


def _interrupted(signum: int) -> int:
    process.end_all()
    done = interrupt.completed_steps()
    print(f"interrupted after these steps were complete: {'; '.join(done)}" if done else
          "interrupted; nothing was changed by an unfinished step", file=sys.stderr)
    return 128 + signum


def after_late_signal(code: int) -> int:
    """The exit code once the command has returned: a signal after main's last check still interrupts."""
    signum = interrupt.received()
    return code if signum is None or code == 128 + signum else _interrupted(signum)  # guard: interrupt-a-late-signal-is-answered


def main(argv: list[str] | None = None) -> int:
    """Run one command; 0 ok, 1 expected failure, 2 bad arguments, 3 unexpected error, 128+N on signal N."""
    args = root = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        interrupt.check()  # guard: interrupt-a-signal-before-the-verb-stops
        project = _project(args)
        root = project.root if project else None
        code = args.handler(project, args)
        interrupt.check()  # guard: interrupt-a-signal-after-the-last
        return code
    except BrokenPipeError:
        # the reader left (`| head -1`): nothing failed; /dev/null keeps the final flush from raising again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt as exc:
        return _interrupted(exc.signum if isinstance(exc, Interrupted) else signal.SIGINT)
    except Exception as exc:
        if (signum := interrupt.received()) is not None:  # guard: interrupt-an-error-after-a-signal-exits; a child died of the same signal
            return _interrupted(signum)
        if isinstance(exc, NemoRLError):
            remedy = from_elsewhere(exc.remedy, root)
            said = f"{exc.what}\n  what to do: {remedy}" if remedy else exc.what
            print(f"error: {values.printable(said, lines=True)}", file=sys.stderr)  # guard: terminal-error-messages-show-escapes
            return exc.exit_code
        message = _os_error_message(exc) if isinstance(exc, OSError) else None
        if message:
            done = interrupt.completed_steps()  # guard: full-disk-a-failed-print-names-what-had
            print(f"error: {values.printable(message, lines=True)}"  # guard: terminal-a-file-s-oserror-shows-escapes
                  + (f"\n  these steps were complete before it: {'; '.join(done)}" if done else ""), file=sys.stderr)
            return 1
        if args is None or args.verbose:
            traceback.print_exc()
        print(f"unexpected error: {type(exc).__name__}: {values.printable(str(exc))}\n"  # guard: terminal-an-unexpected-error-shows
              "  this is a bug in nemo-rl; run again with --verbose and report the traceback", file=sys.stderr)
        return 3
