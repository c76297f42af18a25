"""Task rows written to disk as a dataset: what ``faithgrpo data`` writes for TRL's CLI and verl.

``trl`` format: one ``train.jsonl`` with TRL's columns (``prompt`` as chat messages, ``answer``,
``problem``, ``entry``, ``task``, ``id``), which ``datasets.load_dataset(DIR)`` and
``trl grpo --dataset_name DIR`` read. ``verl`` format: ``train.parquet`` with verl's columns
(``data_source``, ``prompt``, ``ability``, ``reward_model: {style, ground_truth}``, ``extra_info``
carrying ``problem`` / ``entry``), for ``faithgrpo.integrations.verl.compute_score``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["FORMATS", "export_rows"]

FORMATS = ("trl", "verl")


def _verl_row(row: dict[str, Any], index: int) -> dict[str, Any]:
    return {
        "data_source": row["task"],
        "prompt": row["prompt"],
        "ability": "causal_reasoning" if row.get("problem") else "reasoning",
        "reward_model": {"style": "rule", "ground_truth": row.get("answer") or ""},
        "extra_info": {"index": index, "problem": row.get("problem") or "", "entry": row.get("entry") or ""},
    }


def export_rows(rows: list[dict[str, Any]], out: str | Path, fmt: str = "trl") -> Path:
    """Write ``rows`` (`faithgrpo.eval.report.adapters.task_rows` rows) into ``out``; return the file.

    Raises:
        ValueError: an unknown format, or ``out`` is an existing file.
    """
    import datasets

    if fmt not in FORMATS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} is a file: pass a folder")
    out.mkdir(parents=True, exist_ok=True)
    if fmt == "trl":
        path = out / "train.jsonl"
        clean = [{k: ("" if v is None else v) for k, v in row.items()} for row in rows]
        datasets.Dataset.from_list(clean).to_json(path, lines=True, force_ascii=False)
    else:
        path = out / "train.parquet"
        datasets.Dataset.from_list([_verl_row(r, i) for i, r in enumerate(rows)]).to_parquet(path)
    return path
