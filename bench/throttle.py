"""A disk held at a steady read rate: the kernel's block throttle.

This VM's disk drifts by 20-30% within minutes. A benchmark that compares
a loader against a bound (or a simulation against a measurement) can hold
the disk under its files at a rate below its worst, so that the bound
holds still: a cgroup with cgroup v2 io.max rbps (or cgroup v1
blkio.throttle.read_bps_device) on the whole disk, which the benchmark's
process joins. The throttle forgives a reader a short idle spell within
its time slice (it may read ahead of the rate by up to a slice's bytes),
which a disk does not. Root only.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path


def parse_size(s: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)


def disk_of(path: Path) -> str:
    """MAJ:MIN of the whole disk under path (the throttle applies to disks)."""
    st = os.stat(path)
    mm = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    sysdev = Path(f"/sys/dev/block/{mm}")
    if not sysdev.exists():
        raise SystemExit(f"--dir {path}: its file system ({mm}) is not on a block device; "
                         "use --home-rate off or another --dir")
    if (sysdev / "partition").exists():  # the parent disk
        mm = (sysdev.resolve().parent / "dev").read_text().strip()
    return mm


class Throttle:
    """A cgroup whose reads of one disk are held at a rate (the kernel's
    block throttle); processes join it with join(pid)."""

    def __init__(self, dev: str, rate: int) -> None:
        name = f"cxlp-simval-{uuid.uuid4().hex[:6]}"
        v2 = Path("/sys/fs/cgroup/cgroup.controllers")
        if v2.exists() and "io" in v2.read_text().split():
            sub = Path("/sys/fs/cgroup/cgroup.subtree_control")
            if "io" not in sub.read_text().split():
                sub.write_text("+io")
            self.dir = Path("/sys/fs/cgroup") / name
            self.dir.mkdir()
            (self.dir / "io.max").write_text(f"{dev} rbps={rate}")
            self.kind = "cgroup v2 io.max"
        elif Path("/sys/fs/cgroup/blkio").is_dir():
            self.dir = Path("/sys/fs/cgroup/blkio") / name
            self.dir.mkdir()
            (self.dir / "blkio.throttle.read_bps_device").write_text(f"{dev} {rate}")
            self.kind = "cgroup v1 blkio.throttle.read_bps_device"
        else:
            raise SystemExit("--home-rate: no cgroup io (v2) or blkio (v1) controller mounted; "
                             "use --home-rate off")
        self.dev, self.rate = dev, rate

    def join(self) -> None:
        """This process (and what it starts after) reads under the rate."""
        (self.dir / "cgroup.procs").write_text(str(os.getpid()))

    def close(self) -> None:
        """This process back to the root cgroup, and the cgroup gone (once
        the processes that joined it have ended)."""
        try:
            (self.dir.parent / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            pass
        try:
            self.dir.rmdir()
        except OSError:
            pass
