"""Embedding throughput: Norax's OnnxMiniLMEmbedder vs Chroma's ONNXMiniLM_L6_V2.

Both run the same all-MiniLM-L6-v2 ONNX files from ``../shared/models`` on the same texts:
the first N dialogue turns of LoCoMo (``../shared/data/locomo/locomo10_dev.json``), i.e.
short chat messages. Norax pads each batch to its longest text; Chroma pads every text to
256 tokens. Each embedder is warmed up once, then timed over ``--repeats`` full passes; the
best and median passes (wall clock) are reported with the process CPU time per text (less
sensitive to other load on the machine) and the minimum cosine between the two outputs.
Run from the repository root after ``pip install -e .``::

    python benchmarks/embedders.py --n 1000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from norax_core.embedders import MODEL_DIR_ENV, OnnxMiniLMEmbedder

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def load_turns(path: Path, n: int) -> list[str]:
    """The first ``n`` turn texts of the LoCoMo conversations, in order."""
    turns: list[str] = []
    for sample in json.loads(path.read_text()):
        conversation = sample["conversation"]
        sessions = sorted(
            (k for k in conversation if k.startswith("session_") and k[8:].isdigit()),
            key=lambda k: int(k[8:]),
        )
        for key in sessions:
            turns.extend(turn["text"] for turn in conversation[key])
    return turns[:n]


def time_passes(
    embed: Callable[[list[str]], np.ndarray], texts: list[str], repeats: int
) -> tuple[list[float], list[float], np.ndarray]:
    """Wall-clock and process CPU seconds of each full pass, and the last output."""
    out = embed(texts[:32])  # warm-up: session creation, first allocations
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        out = embed(texts)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return wall, cpu, out


def report(label: str, n: int, wall: Sequence[float], cpu: Sequence[float]) -> None:
    best, median = min(wall), statistics.median(wall)
    print(
        f"{label:<26} best {n / best:7.1f} texts/s   median {n / median:7.1f} texts/s"
        f"   CPU {1000 * statistics.median(cpu) / n:6.2f} ms/text"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="number of texts")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--model-dir",
        type=Path,
        default=Path(os.environ.get(MODEL_DIR_ENV) or SHARED / "models" / "all-MiniLM-L6-v2"),
    )
    parser.add_argument(
        "--data", type=Path, default=SHARED / "data" / "locomo" / "locomo10_dev.json"
    )
    args = parser.parse_args()

    texts = load_turns(args.data, args.n)
    ours = OnnxMiniLMEmbedder(args.model_dir, batch_size=args.batch_size)
    tokenizer = Tokenizer.from_file(str(args.model_dir / "onnx" / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=256)
    tokens = [len(e.ids) for e in tokenizer.encode_batch(texts)]
    print(
        f"{len(texts)} LoCoMo turns, word pieces per text: median {statistics.median(tokens):.0f},"
        f" max {max(tokens)}; {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"
    )

    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    chroma = ONNXMiniLM_L6_V2(preferred_providers=["CPUExecutionProvider"])
    chroma.DOWNLOAD_PATH = args.model_dir  # reads <DOWNLOAD_PATH>/onnx/, nothing downloads

    ours_wall, ours_cpu, ours_out = time_passes(ours.embed, texts, args.repeats)
    chroma_wall, chroma_cpu, chroma_raw = time_passes(
        lambda t: np.asarray(chroma(t)), texts, args.repeats
    )
    report("norax OnnxMiniLMEmbedder", len(texts), ours_wall, ours_cpu)
    report("chroma ONNXMiniLM_L6_V2", len(texts), chroma_wall, chroma_cpu)
    speedup = statistics.median(chroma_wall) / statistics.median(ours_wall)
    cosine = (ours_out * chroma_raw.astype(np.float32)).sum(axis=1).min()
    print(f"speed-up (median) x{speedup:.1f}; min cosine between the two outputs {cosine:.6f}")


if __name__ == "__main__":
    main()
