"""Turn the USS dialogues (Sun et al., SIGIR 2021) into a pulse_ml session table with text.

One row per dialogue of the four English corpora (SGD, MWOZ, ReDial, CCPE): the corpus is the
``condition``, the dialogue-level satisfaction (the ``OVERALL`` line, 3-7 crowd annotators,
averaged) the ``rating``, and the text columns a ``text`` feature reads:

* ``user_text`` -- the user's turns joined with newlines (one turn per line);
* ``system_text`` -- the system's turns joined the same way;
* ``user_message_count``, ``system_message_count`` -- turns per side;
* ``corpus`` -- the corpus again, as a categorical feature.

The turn-level satisfaction annotations in the files are *not* copied: they are judgments of
the same annotators as the label and would leak it.

Case studies are two disjoint pairs of corpora: ``sgd_vs_mwoz`` and ``redial_vs_ccpe``. With
``--label-share 0.1`` a seeded 10% of the dialogues keep their rating and the rest become
unlabeled (sparse ratings as in production); the hidden rating stays in ``rating_hidden``, and
``<table>.ground_truth.json`` beside the table holds each case study's effect on all labels
(treatment minus control mean rating, the format the simulator writes), so
``pulse-ml audit reference=truth`` checks the intervals against it.

Usage:
    python examples/uss/prepare.py --out /tmp/uss-home/uss_sessions.parquet
    python examples/uss/prepare.py --label-share 0.1 --seed 0 --out /tmp/uss_10pct.parquet
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
DEFAULT_INPUT = (HERE.parents[1] / ".." / "shared" / "data" / "real"
                 / "uss-user-satisfaction-simulation").resolve()
CORPORA = ("SGD", "MWOZ", "ReDial", "CCPE")
CASE_STUDIES = {"SGD": "sgd_vs_mwoz", "MWOZ": "sgd_vs_mwoz",
                "ReDial": "redial_vs_ccpe", "CCPE": "redial_vs_ccpe"}
ARMS = {"sgd_vs_mwoz": ("MWOZ", "SGD"),  # (control, treatment), as in case_study/*.yaml
        "redial_vs_ccpe": ("CCPE", "ReDial")}


def read_turns(path: Path, corpus: str) -> pd.DataFrame:
    """One row per line of a USS file: ``dialogue`` (0-based), ``role``, ``text``, ``sat``.

    Dialogues are separated by blank lines; the last line of each is the ``OVERALL`` rating.
    """
    raw = pd.read_csv(path, sep="\t", header=None, names=["role", "text", "action", "sat"],
                      dtype=str, quoting=csv.QUOTE_NONE, skip_blank_lines=False,
                      keep_default_na=False, na_values=[], encoding="utf-8")
    blank = raw["role"].str.strip().eq("") & raw["text"].fillna("").eq("")
    dialogue = blank.cumsum()
    turns = raw.loc[~blank].assign(dialogue=dialogue[~blank])
    turns["dialogue"] = pd.factorize(turns["dialogue"])[0]
    turns["corpus"] = corpus
    return turns[["corpus", "dialogue", "role", "text", "sat"]].reset_index(drop=True)


def dialogues(turns: pd.DataFrame) -> pd.DataFrame:
    """Aggregate turns into one row per dialogue (vectorized groupby, no per-dialogue loop)."""
    overall = turns["role"].eq("USER") & turns["text"].eq("OVERALL")
    keys = ["corpus", "dialogue"]
    votes = turns.loc[overall, keys + ["sat"]].copy()
    scores = votes["sat"].str.split(",").explode()
    scores = pd.to_numeric(scores, errors="coerce").dropna()
    per = scores.groupby(level=0).agg(["mean", "size"])
    votes = votes.join(per).drop(columns="sat")
    said = turns.loc[~overall]
    out = votes.set_index(keys)
    for role, side in (("USER", "user"), ("SYSTEM", "system")):
        part = said[said["role"].eq(role)].groupby(keys, sort=False)["text"]
        out[f"{side}_text"] = part.agg("\n".join)
        out[f"{side}_message_count"] = part.size()
    out = out.reset_index()
    return pd.DataFrame({
        "corpus": out["corpus"].to_numpy(),
        "dialogue": out["dialogue"].to_numpy(),
        "rating": out["mean"].to_numpy(float),
        "n_ratings": out["size"].to_numpy(int),
        "user_text": out["user_text"].fillna("").to_numpy(),
        "system_text": out["system_text"].fillna("").to_numpy(),
        "user_message_count": out["user_message_count"].fillna(0).to_numpy(int),
        "system_message_count": out["system_message_count"].fillna(0).to_numpy(int),
    })


def build_table(folder: Path, corpora=CORPORA, label_share: float | None = None,
                seed: int = 0) -> pd.DataFrame:
    """The session table of the USS corpora in ``folder``.

    Args:
        folder: Folder with ``SGD.txt``, ``MWOZ.txt``, ``ReDial.txt``, ``CCPE.txt``.
        corpora: Which corpora to read.
        label_share: Keep this share of ratings (seeded draw per corpus); None keeps all.
        seed: Seed of the draw.
    """
    rows = pd.concat([dialogues(read_turns(folder / f"{c}.txt", c)) for c in corpora],
                     ignore_index=True)
    sid = rows["corpus"].str.lower() + "-" + rows["dialogue"].map("{:04d}".format)
    table = pd.DataFrame({
        "session_id": sid,
        "user_id": sid,  # no user ids in USS: each dialogue counts as its own user
        "case_study": rows["corpus"].map(CASE_STUDIES).fillna(""),
        "condition": rows["corpus"],
        "rating": rows["rating"],
        "n_ratings": rows["n_ratings"],
        "corpus": rows["corpus"],
        "user_message_count": rows["user_message_count"],
        "system_message_count": rows["system_message_count"],
        "user_text": rows["user_text"],
        "system_text": rows["system_text"],
    })
    if label_share is not None:
        keep = label_mask(table["corpus"], label_share, seed)
        table["rating_hidden"] = table["rating"]
        table.loc[~keep, "rating"] = np.nan
        table.loc[~keep, "n_ratings"] = 0
    return table


def label_mask(corpus: pd.Series, share: float, seed: int) -> np.ndarray:
    """Which dialogues keep their rating: a seeded ``share`` of each corpus.

    Raises:
        ValueError: if ``share`` is not in (0, 1].
    """
    if not 0.0 < share <= 1.0:
        raise ValueError(f"--label-share {share}: use a share in (0, 1].")
    u = np.random.default_rng(seed).random(len(corpus))
    # the same share in every corpus: rank the draws within each corpus
    rank = pd.Series(u, index=corpus.index).groupby(corpus).rank(pct=True)
    return (rank <= share).to_numpy()


def ground_truth(table: pd.DataFrame) -> dict:
    """Each case study's effect on all labels, in the ``ground_truth.json`` format.

    The effect is the treatment minus the control mean of every dialogue's rating
    (``rating_hidden`` when labels were hidden, else ``rating``); ``se`` is its standard error
    as a sample (sd with ddof 1). Case studies whose two arms are not both in ``table`` are
    left out. ``pulse-ml audit reference=truth`` reads ``effects[<case study>]["effect"]``.
    """
    y = table["rating_hidden" if "rating_hidden" in table else "rating"].to_numpy(float)
    cond = table["condition"].to_numpy()
    effects = {}
    for name, (control, treatment) in ARMS.items():
        yc, yt = y[cond == control], y[cond == treatment]
        yc, yt = yc[np.isfinite(yc)], yt[np.isfinite(yt)]
        if len(yc) < 2 or len(yt) < 2:
            continue
        effects[name] = {
            "control": control, "treatment": treatment,
            "effect": float(yt.mean() - yc.mean()),
            "se": float(np.sqrt(yt.var(ddof=1) / len(yt) + yc.var(ddof=1) / len(yc))),
            "n_control": int(len(yc)), "n_treatment": int(len(yt)),
        }
    return {"source": "USS, mean of every dialogue's rating per corpus (all labels)",
            "effects": effects}


def write_table(table: pd.DataFrame, out: Path) -> Path:
    """Write ``table`` (.csv or .parquet) and ``<stem>.ground_truth.json`` beside it (atomically).

    Returns:
        The path of ``<stem>.ground_truth.json`` (read by infer and ``audit reference=truth``;
        named after the table so another table in the folder never picks it up).
    """
    from pulse_ml.env.atomic import atomic_file, write_text

    with atomic_file(out) as tmp:
        if out.suffix == ".csv":
            table.to_csv(tmp, index=False)
        else:
            table.to_parquet(tmp, index=False)
    return write_text(out.with_name(f"{out.stem}.ground_truth.json"),
                      json.dumps(ground_truth(table), indent=2) + "\n")


def summary(table: pd.DataFrame) -> str:
    """Dialogues, labeled dialogues and mean rating per case study and corpus."""
    view = table.assign(labeled=table["rating"].notna()).groupby(
        ["case_study", "condition"]).agg(dialogues=("session_id", "size"),
                                         labeled=("labeled", "sum"),
                                         mean_rating=("rating", "mean"),
                                         mean_user_turns=("user_message_count", "mean"))
    return view.round(3).to_string()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, default=DEFAULT_INPUT,
                        help="folder with the USS .txt files (default: the shared copy)")
    parser.add_argument("--out", type=Path, required=True, help="session table (.parquet/.csv)")
    parser.add_argument("--label-share", type=float, default=None,
                        help="keep this share of ratings (e.g. 0.1); the rest become unlabeled")
    parser.add_argument("--seed", type=int, default=0, help="seed of --label-share")
    args = parser.parse_args(argv)
    missing = [c for c in CORPORA if not (args.input / f"{c}.txt").is_file()]
    if missing:
        print(f"error: {args.input} lacks {', '.join(c + '.txt' for c in missing)} "
              "(pass --input path/to/uss-user-satisfaction-simulation)", file=sys.stderr)
        return 2
    try:
        table = build_table(args.input, label_share=args.label_share, seed=args.seed)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from pulse_ml.errors import PulseError

    try:
        truth = write_table(table, args.out)
    except PulseError as exc:  # disk full, folder not writable: one line, nothing half-written
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary(table))
    print(f"written: {args.out} ({len(table)} dialogues, "
          f"{int(table['rating'].notna().sum())} rated) and {truth} (all-label effects)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
