"""``chroma run`` on 127.0.0.1 for tests: the session's server (``conftest.chroma_url``) and
the tests that stop and restart one of their own (``reliability/test_fast_get.py``)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest


def free_port() -> int:
    """A port of 127.0.0.1 free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_heartbeat(url: str, timeout: float = 60.0) -> bool:
    """Whether the server at ``url`` answers its heartbeat within ``timeout`` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1)
            return True
        except OSError:
            time.sleep(0.3)
    return False


def start(path: str, port: int) -> subprocess.Popen[bytes]:
    """``chroma run --path path`` on ``port``, once it answers (the test fails if it does not)."""
    beside = Path(sys.executable).parent / "chroma"
    exe = str(beside) if beside.exists() else shutil.which("chroma")
    if exe is None:
        pytest.fail("the chroma CLI is not installed (pip install chromadb)")
    proc = subprocess.Popen(
        [exe, "run", "--path", path, "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if not wait_heartbeat(f"http://127.0.0.1:{port}"):
        stop(proc)
        pytest.fail("chroma run did not start within 60 s")
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server of :func:`start` and wait for it."""
    proc.terminate()
    proc.wait(timeout=30)
