"""Where a fork's derived entry, uv.lock and patches/<dist>/index.toml's [declares] disagree, offline."""

from __future__ import annotations

from nemo_rl.forks import declared, locked_fork, root_edges
from nemo_rl.forks.record_files import Index, index_name
from nemo_rl.project import lockfile
from nemo_rl.project.model import Project

Problem = tuple[str, str, str, str]


def deltas(project: Project, distribution: str) -> declared.Deltas:
    return declared.deltas_from_table(project.fork_tables.get(distribution, {}), distribution)


def entry(project: Project, distribution: str) -> declared.Entry | None:
    return declared.entry_from_tables(project.uv_table.get("dependency-metadata", []), distribution)


def recorded(index: Index | None, distribution: str) -> declared.Declares | None:
    where = index_name(distribution)
    return declared.declares_from_table(index.declares, where, distribution) if index is not None else None


def derives(project: Project, distribution: str) -> bool:
    return declared.derives(entry(project, distribution), deltas(project, distribution))


def derived(project: Project, distribution: str) -> declared.Deltas | None:
    """The drop/add lists when the fork's entry is derived; None when uv locks the fork's own metadata."""
    found = declared.deltas_from_table(project.fork_tables.get(distribution, {}), distribution)
    entries = project.uv_table.get("dependency-metadata", [])  # not through entry(): the worker path stays short
    return found if declared.derives(declared.entry_from_tables(entries, distribution), found) else None


def problems(project: Project, fork: lockfile.Fork, index: Index | None) -> list[Problem]:
    """Where pyproject's entry or uv.lock's fork is not what [declares] at the pin says."""
    if index is None or index.pinned != fork.rev:
        return []
    dist = fork.distribution
    declares = recorded(index, dist)
    rel = index_name(dist)
    if declares is None:
        return [(rel, "declares", f"what {dist} declares at {fork.rev[:12]}", "not recorded")]  # guard: derived-declares-recorded
    stale = [] if declares.commit == fork.rev else [
        (rel, "declares commit", f"{fork.rev} (the pin)", declares.commit or "not recorded")]
    stale += [("uv.lock", field, f"{expected} ([package.metadata] requires-dist)", found) for field, expected, found
              in root_edges.differences(project.lock, dist)] if project.lock_bytes is not None else []
    if not derives(project, dist):
        # a hand edit of uv.lock stands through `uv lock --check`: uv does not rebuild a git package's metadata
        own = declared.Entry(dist, declares.version, declares.requires_python, declares.requires_dist)
        return stale + ([("uv.lock", f"[[package]] {dist} {field}", f"{expected} ({rel} [declares])", found)
                         for field, expected, found in locked_fork.locked_differences(
                             project.lock, own, False, declares.extras)]
                        if project.lock_bytes is not None else [])
    found_deltas = deltas(project, dist)
    derived = declared.derive(dist, declares, found_deltas)
    where = f"[[tool.uv.dependency-metadata]] {dist}"
    result = stale + [("pyproject.toml", f"{where} {field}", f"{expected} (derived from {rel} [declares])", found)
                      for field, expected, found in declared.differences(entry(project, dist), derived)]
    result += [("pyproject.toml", f"[tool.nemo-rl.forks.{dist}] drop {name}",
                f"a requirement {dist} declares at {fork.rev[:12]}",
                "not declared by the fork: remove the drop")
               for name in declared.unnecessary_drops(declares, found_deltas)]
    if project.lock_bytes is not None:  # guard: lock-the-ci-check-sees-a-hand-edited
        result += [("uv.lock", f"[[package]] {dist} {field}", f"{expected} (the derived entry)", found)
                   for field, expected, found in locked_fork.locked_differences(project.lock, derived)]
    return result


def lock_follows(project: Project, fork: lockfile.Fork, declares: declared.Declares) -> bool:
    """Whether uv.lock locks the fork from its source as `declares` and the derived entry say."""
    derived = declared.derive(fork.distribution, declares, deltas(project, fork.distribution))
    if project.lock_bytes is None:
        return True
    package = project.packages.get(fork.distribution)
    lock = project.lock
    return not (package and package.other_source(fork)) and not locked_fork.locked_differences(  # guard: source-deps-patches-relocks-it
        lock, derived, derives(project, fork.distribution), declares.extras) and not root_edges.differences(
        lock, fork.distribution)


def rewrite_pyproject(project: Project, distribution: str, declares: declared.Declares
                  ) -> tuple[declared.Entry | None, declared.Entry | None, list[str]]:
    """Write the derived entry into pyproject.toml and remove unneeded drops: (before, after or None, drops removed)."""
    import tomlkit

    from nemo_rl.project.state_dir import write_atomic

    before = entry(project, distribution)
    path = project.pyproject_path
    doc = tomlkit.parse(lockfile.decoded(project.pyproject_bytes, path))
    derived, changed, unneeded = declared.write_derived(doc, distribution, declares, deltas(project, distribution))
    if changed or unneeded:
        write_atomic(path, tomlkit.dumps(doc))
    return before, derived if changed else None, unneeded


def entry_changes(before: declared.Entry | None, after: declared.Entry) -> list[str]:
    old = before or declared.Entry(after.name, None, None, ())
    lines = [f"    {field}: {a} -> {b}" for field, a, b in (("version", old.version, after.version),
                                                           ("requires-python", old.requires_python,
                                                            after.requires_python)) if a != b]
    old_lines, new_lines = set(old.requires_dist), set(after.requires_dist)
    lines += [f"    + {r}" for r in after.requires_dist if r not in old_lines]
    lines += [f"    - {r}" for r in old.requires_dist if r not in new_lines]
    return lines


def refusal_remedy(before: declared.Entry | None, after: declared.Entry) -> str:
    """The fix when uv cannot lock a derived entry: the lines that drop what the fork added."""
    old = {declared._name(r) for r in (before.requires_dist if before else ())}
    new = list(dict.fromkeys(n for n in map(declared._name, after.requires_dist) if n not in old))  # guard: fast-a-refused-lock-s-remedy-names-only
    if not new:
        return (f"uv's message above names the requirement it cannot meet: bound it in `add = [...]` of "
                f"[tool.nemo-rl.forks.{after.name}] (or drop it there), then run the command again")
    lines = "\n".join(f"    {declared.drop_line(name)}" for name in new)  # guard: derived-refusal-names-the-drop-line
    return (f"if the fork does not need them, add to `drop = [...]` in [tool.nemo-rl.forks.{after.name}]:\n"
            f"{lines}\nthen run the command again; otherwise read uv's message above")
