"""docs/integrations.md: each example of examples/integrations/ is on the
page as it is in its file, and runs as written, in a pool of its own
($CXLP_POOL), which is destroyed afterwards."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from cxl_dataloader import CXLError, CXLMemoryPool

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {"megatron_gpt.py": "megatron.core", "lightning_fit.py": "lightning",
            "hf_trainer.py": "transformers", "torchtitan_loader.py": "torchdata"}


def test_every_example_is_on_the_page() -> None:
    page = (ROOT / "docs" / "integrations.md").read_text()
    assert sorted(p.name for p in (ROOT / "examples" / "integrations").glob("*.py")) == sorted(EXAMPLES)
    for name in EXAMPLES:
        assert "```python\n" + (ROOT / "examples" / "integrations" / name).read_text() + "```" in page


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_runs(name: str, tmp_path: Path) -> None:
    pytest.importorskip(EXAMPLES[name])
    pool = f"pyt-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, CXLP_POOL=pool, OMP_NUM_THREADS="1", TMPDIR=str(tmp_path))
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    try:
        r = subprocess.run([sys.executable, str(ROOT / "examples" / "integrations" / name)],
                           capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    finally:
        try:
            CXLMemoryPool.destroy(pool)
        except CXLError:
            pass
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "steps" in r.stdout or "torch.Size" in r.stdout
