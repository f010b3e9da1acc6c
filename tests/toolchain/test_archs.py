"""The GPU architectures CUDA code holds and is built for (nemo_rl/toolchain/archs.py): read from a binary's
fatbins (a hand-made ELF; an extension a real nvcc compiles for sm_80, which skips without a CUDA 12 nvcc) or from
cuobjdump, declared by NVTE_CUDA_ARCHS, and the builder's toolchain."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import elf_with, fatbin

from nemo_rl import toolchain
from nemo_rl.errors import NemoRLError
from nemo_rl.process import run
from nemo_rl.toolchain import archs

ROOT = Path(__file__).resolve().parents[2]


def test_the_toolchain_imports_nothing_of_the_workers():
    """The workers read what the toolchain records: the toolchain sits below them."""
    code = ("import importlib, pkgutil, sys, nemo_rl.toolchain as package; "
            "[importlib.import_module(f'nemo_rl.toolchain.{m.name}') for m in pkgutil.iter_modules(package.__path__)]; "
            "print(sorted(m for m in sys.modules if m.startswith('nemo_rl.workers')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_fatbin_parser_reads_cubins_and_ptx_of_every_container(tmp_path):
    lib = tmp_path / "ext.so"
    lib.write_bytes(elf_with(fatbin([(archs.CUBIN, 80), (archs.PTX, 90)]) + b"\0" * 8
                             + fatbin([(archs.CUBIN, 90)])))
    assert archs.fatbin_archs(lib) == archs.Archs((80, 90), (90,))
    plain = tmp_path / "plain.so"
    plain.write_bytes(elf_with(b"\0" * 16, b".text"))
    assert archs.fatbin_archs(plain) is None  # no device code
    (tmp_path / "not-elf.so").write_bytes(b"#!/bin/sh\n")
    assert archs.fatbin_archs(tmp_path / "not-elf.so") is None


def test_which_gpus_an_extension_runs_on():
    sm80 = archs.Archs((80,), ())
    assert archs.runs_on(sm80, 80) and archs.runs_on(sm80, 86)  # same major, newer minor
    assert not archs.runs_on(sm80, 90) and not archs.runs_on(sm80, 75)
    assert archs.runs_on(archs.Archs((), (80,)), 90)  # PTX is JIT-compiled for newer GPUs
    assert archs.list_elf_archs("ELF file    1: x.1.sm_80.cubin\nELF file    2: x.2.sm_90a.cubin\n") == (80, 90)
    assert archs.declared_archs({"NVTE_CUDA_ARCHS": "90;80"}) == (80, 90)
    assert archs.declared_archs({}, "12.4") == (70, 80, 89, 90)
    assert archs.declared_archs({}, "12.8") == (70, 80, 89, 90, 100, 120)


@pytest.mark.nvcc
def test_the_archs_read_from_the_binary_are_cuobjdumps(sm80_extension):
    assert archs.fatbin_archs(sm80_extension) == archs.Archs((80,), ())
    listed = run([toolchain.find_nvcc().parent / "cuobjdump", "--list-elf", sm80_extension]).stdout
    assert archs.list_elf_archs(listed) == (80,)


def _elf(fatbin: bytes, section_size: int | None = None) -> bytes:
    """A minimal ELF64 with a .nv_fatbin section holding `fatbin` (its size as the header says)."""
    names = b"\0.nv_fatbin\0.shstrtab\0"
    fat_off, str_off = 64, 64 + len(fatbin)
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x28, str_off + len(names))
    struct.pack_into("<HHH", header, 0x3A, 64, 3, 2)
    sections = b"\0" * 64
    sections += struct.pack("<IIQQQQ", 1, 1, 0, 0, fat_off, len(fatbin) if section_size is None else section_size)
    sections += b"\0" * 24 + struct.pack("<IIQQQQ", 12, 3, 0, 0, str_off, len(names)) + b"\0" * 24
    return bytes(header) + fatbin + names + sections


@pytest.mark.parametrize("case", ["a header that does not move on", "entries past the section", "a huge section"])
def test_a_crafted_extension_neither_hangs_nor_crashes_the_pack(tmp_path, case):
    """A pull request that adds a source-built dependency carrying a crafted .so: a NemoRLError naming it."""
    fatbin = {"a header that does not move on": struct.pack("<IHHQ", archs.FATBIN_MAGIC, 1, 0, 0),
              "entries past the section": struct.pack("<IHHQ", archs.FATBIN_MAGIC, 1, 16, 1000),
              "a huge section": b"\0" * 16}[case]
    path = tmp_path / "crafted.so"
    path.write_bytes(_elf(fatbin, 1 << 62 if case == "a huge section" else None))
    with pytest.raises(NemoRLError, match="cannot read the device code of .*crafted.so"):
        archs.fatbin_archs(path)


def test_the_host_compilers_are_read_from_the_extension(tmp_path):
    """What built the extension, not what the builder has now: the ELF .comment lines of its objects."""
    lib = tmp_path / "ext.so"
    lib.write_bytes(elf_with(b"GCC: (Debian 12.2.0-14) 12.2.0\0GCC: (Debian 12.2.0-14) 12.2.0\0", b".comment"))
    assert archs.host_compilers(lib) == ("GCC: (Debian 12.2.0-14) 12.2.0",)
    (tmp_path / "not-elf.so").write_bytes(b"#!/bin/sh\n")
    assert archs.host_compilers(tmp_path / "not-elf.so") == ()


def test_a_compiler_launcher_in_cxx_is_a_command_line(monkeypatch):
    """CXX="ccache g++" is a launcher and a compiler: run as such, never as one program named "ccache g++"."""
    gxx, launcher = shutil.which("g++"), shutil.which("env")
    if not (gxx and launcher):
        pytest.skip("needs g++ and env on PATH")
    monkeypatch.delenv("NVCC_CCBIN", raising=False)
    monkeypatch.setenv("CXX", f"{launcher} g++")
    assert archs.host_compiler_command() == [launcher, "g++"]
    assert archs.toolchain_record()["host_compiler_at_pack"].startswith("g++")
    monkeypatch.setenv("CXX", "'unbalanced")
    assert archs.host_compiler_command()[-1].endswith("c++")
