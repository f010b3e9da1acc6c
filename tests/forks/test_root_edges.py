"""The project's own locked edges to a fork (forks/root_edges.py): deleted from uv.lock or given a marker by hand,
they fail the offline check and `deps patches` relocks. Fixture forks and real uv."""

from __future__ import annotations

from fakes import block, derived_world, offline, patches


def test_the_projects_own_locked_edge_to_a_fork_edited_by_hand_fails_ci_and_deps_patches_relocks(world, capsys):
    """uv checks neither the project's locked edges to a fork nor their markers: deleted, or given a marker false on
    one Python no sample names, `uv sync --locked --extra mcore` installs no megatron-core."""
    derived_world(world)
    lock = world.project / "uv.lock"
    good = lock.read_text()
    start, end = block(good, "fixture-project")
    edge = '    { name = "megatron-core" },\n'
    assert good[start:end].count(edge) == 1, good[start:end]
    for edited, said in ((good[start:end].replace(edge, ""), "megatron-core among them"),
                         (good[start:end].replace(edge, edge.replace(
                             " }", ", marker = \"python_full_version != 'v3.11.7'\" }")), "edited by hand")):
        lock.write_text(good[:start] + edited + good[end:])
        rc, out = offline(world, capsys)
        assert rc == 1 and "[[package]] fixture-project optional-dependencies mcore" in out and said in out, out
        rc, out = patches(world, capsys)
        assert rc == 0 and "relocked" in out, out
        assert lock.read_text() == good
        assert offline(world, capsys)[0] == 0
