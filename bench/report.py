"""The machine a benchmark ran on, and the LoCoMo figures as text."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from bench.machine import machine_info


def machine() -> dict[str, Any]:
    return machine_info()


def now_utc() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def render_locomo(report: dict[str, Any]) -> str:
    """Per category and overall (1–4), the profiles side by side; adversarial (5) apart."""
    m = report.get("machine", {})
    ds = report["dataset"]
    cfg = report["config"]
    ing = report["ingest"]
    ev = ds["evidence"]
    lines = [
        f"LoCoMo retrieval — {report.get('date', '')}",
        f"machine: {m.get('cpus')} cpus ({m.get('cpu', m.get('machine', '?'))}), "
        f"{m.get('memory_gib', '?')} GiB, {m.get('os', m.get('platform', '?'))}, Python {m.get('python')}",
        f"config:  k={cfg['k']}, embedder {cfg['embedder']} ({cfg['embedding_model']}), LLM none, "
        f"{cfg['storage']}, data dir {cfg['data_dir']}, profiles {', '.join(cfg['profiles'])}",
        f"data:    {ds['path']} (sha256 {ds['sha256'][:12]}…): {ds['conversations']} conversation(s), "
        f"{ds['turns']} turns ({ds['skipped_turns']} skipped), {ds['questions']} questions "
        f"({ds['skipped_questions']} skipped), undated sessions {ds['undated_sessions']}",
        f"evidence: {ev['strings']} strings: {ev['clean']} clean, {ev['repaired']} repaired, "
        f"{ev['unparseable']} unparseable (dropped); ids dropped: {ev['unknown_ids']} unknown, "
        f"{ev['duplicate_ids']} duplicate; questions left without evidence (unscored): "
        f"{ev['questions_without_evidence']}"
        + (
            " (" + ", ".join(f"cat {k}: {v}" for k, v in ds["unscored_questions"].items()) + ")"
            if ds["unscored_questions"]
            else ""
        ),
        f"ingest:  {'reused ' if ing.get('reused') else ''}{ing.get('notes', '?')} notes → "
        f"{ing.get('nodes', '?')} nodes; noting {ing.get('noting_s', '?')} s, patrol {ing.get('patrol_s', '?')} s",
        "",
    ]
    profiles: dict[str, Any] = report["profiles"]
    first = next(iter(profiles.values()))
    ks = list(first["overall"]["recall"])
    header = (
        f"{'category':<16} {'n':>4}  {'profile':<9}"
        + "".join(f" {'R@' + k:>6}" for k in ks)
        + "".join(f" {'H@' + k:>6}" for k in ks)
        + f" {'S@' + ks[-1]:>6} {'p50 ms':>7} {'p95 ms':>7}"
    )
    lines += [header, "-" * len(header)]
    keys = [k for k in first["categories"] if k != "5"]
    rows = [(k, "categories") for k in keys if k in ("1", "2", "3", "4")]
    rows.append(("overall", "overall"))
    rows += [(k, "categories") for k in keys if k not in ("1", "2", "3", "4")]
    if "5" in first["categories"]:
        rows.append(("5", "categories"))
    for key, where in rows:
        for i, (name, p) in enumerate(profiles.items()):
            g = p["overall"] if where == "overall" else p["categories"].get(key)
            if g is None:
                continue
            label = g["label"] if i == 0 else ""
            n = str(g["questions"]) if i == 0 else ""
            lines.append(
                f"{label:<16} {n:>4}  {name:<9}"
                + "".join(f" {g['recall'][k]:>6.3f}" for k in ks)
                + "".join(f" {g['hit'][k]:>6.3f}" for k in ks)
                + f" {g['session_recall'][ks[-1]]:>6.3f}"
                + f" {g['latency_ms']['p50']:>7.1f} {g['latency_ms']['p95']:>7.1f}"
            )
        if key == "4" or where == "overall":
            lines.append("")
    lines.append(
        "R@k recall@k (share of a question's evidence turns in the top k), H@k hit@k, "
        f"S@{ks[-1]} session recall; overall = categories 1-4; 5 (adversarial) never counts in it."
    )
    return "\n".join(lines)
