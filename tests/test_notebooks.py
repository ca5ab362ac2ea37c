"""Every notebook under notebooks/ runs without error and is committed clean: no outputs, no
execution counts, no absolute paths; walkthrough.ipynb matches scripts/make_notebook.py."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KERNEL = "traceduck-tests"
CELL_TIMEOUT_S = 120

# An absolute path: POSIX (/home/me/x, /data/y) after a quote, space or bracket, a Windows drive,
# or a home-relative one.
ABSOLUTE_PATH = re.compile(r"""(?:^|[\s"'(\[=])/(?:[\w.-]+/)+|\b[A-Za-z]:\\\\|~/""", re.MULTILINE)


def test_notebooks_exist():
    assert "walkthrough.ipynb" in [p.name for p in NOTEBOOKS]


@pytest.fixture
def kernel_env(tmp_path, monkeypatch):
    """A kernelspec that runs this interpreter, found before any user-installed `python3`."""
    spec_dir = tmp_path / "jupyter" / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "traceduck tests", "language": "python",
    }))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.delenv("TRACEDUCK_GPU_TRACE", raising=False)  # the walkthrough reads it
    return KERNEL


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, kernel_env):
    nbformat = require("nbformat")
    NotebookClient = require("nbclient").NotebookClient
    for module in ("ipykernel", "matplotlib", "pandas"):  # the kernel's, and the walkthrough's
        require(module)
    nb = nbformat.read(path, as_version=4)
    # Executed in memory from the notebook's directory; nothing is written back.
    NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name=kernel_env,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    if path.name == "walkthrough.ipynb":
        images = [o for o in outputs if "image/png" in o.get("data", {})]
        # step time, top ops, one step's timeline; the roofline and the time series of the shared H100 trace when present
        gpu_trace = ROOT.parent / "shared" / "traces" / "public" / "AMD-AGI__TraceLens" / "tests" / "traces" / "h100"
        assert len(images) == 3 + 2 * (gpu_trace / "gaunernst_bert-small-uncased__1016001.json.gz").is_file()  # roofline, time series


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_committed_clean(path):
    text = path.read_text()
    nb = json.loads(text)
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [], f"cell {i} has outputs"
            assert cell["execution_count"] is None, f"cell {i} has an execution count"
        assert "execution" not in cell.get("metadata", {}), f"cell {i} has execution timings"
    assert set(nb["metadata"]) <= {"kernelspec", "language_info"}
    assert not ABSOLUTE_PATH.findall(text)
    for machine in {str(Path.home()), str(ROOT), sys.prefix, socket.gethostname()}:
        if len(machine) > 1:
            assert machine not in text


def test_absolute_path_pattern():
    found = ABSOLUTE_PATH.findall('x = "/home/me/a.json"\nPath("C:\\\\data")\nopen("~/t.json")\n')
    assert [m.strip('"(') for m in found] == ["/home/me/", "C:\\\\", "~/"]
    assert not ABSOLUTE_PATH.findall('Path("..") / "samples"\ns.dur_ns / 1e6\n"samples/buggy.json.gz"')


def test_walkthrough_matches_its_generator():
    nbformat = require("nbformat")
    spec = importlib.util.spec_from_file_location("make_notebook", ROOT / "scripts" / "make_notebook.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    committed = json.loads((ROOT / "notebooks" / "walkthrough.ipynb").read_text())
    assert json.loads(nbformat.writes(module.build())) == committed, \
        "notebooks/walkthrough.ipynb is stale: run `python scripts/make_notebook.py`"


def test_walkthrough_uses_only_the_public_api():
    import traceduck

    nb = json.loads((ROOT / "notebooks" / "walkthrough.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert re.findall(r"^[ \t]*(?:from|import)[ \t]+traceduck\b.*$", code, re.M) == ["import traceduck"]
    used = set(re.findall(r"\btraceduck\.(\w+)", code))
    assert used and used <= set(traceduck.__all__), used
    assert "db.report(" in code and "db.diff(" in code


def readme_notebook_commands() -> list[str]:
    """The shell commands README gives to execute the walkthrough (its sh block after 'Notebook:')."""
    text = (ROOT / "README.md").read_text()
    block = text[text.index("Notebook: "):].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_readme_notebook_command_needs_only_the_notebook_extra():
    """`pip install '.[notebook]'` brings what the README's command runs (nbconvert was missing)."""
    import tomllib

    install, *run = readme_notebook_commands()
    assert install == "pip install '.[notebook]'"
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["notebook"]
    names = {re.match(r"[\w.-]+", req).group(0).lower() for req in extra}
    assert run and all(line.startswith("jupyter nbconvert ") for line in run)
    assert {"nbconvert", "ipykernel", "pandas", "matplotlib"} <= names


@pytest.mark.slow
def test_readme_notebook_command_runs(tmp_path, kernel_env):
    """The README's command, run as written from the repository (the executed copy to a temporary
    directory, not the repository), on this environment's kernel."""
    require("nbconvert")
    (command,) = readme_notebook_commands()[1:]
    argv = shlex.split(command)
    argv[argv.index("--output-dir") + 1] = str(tmp_path / "executed")
    jupyter = Path(sys.executable).with_name("jupyter")
    p = subprocess.run([str(jupyter), *argv[1:], f"--ExecutePreprocessor.kernel_name={kernel_env}"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    nb = json.loads((tmp_path / "executed" / "walkthrough.ipynb").read_text())
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    assert outputs and not [o for o in outputs if o["output_type"] == "error"]
