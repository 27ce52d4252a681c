"""Turn the ConvAI2 wild-evaluation chats into a pulse_ml session table.

One row per chat: the bot is the ``condition``, the human volunteer the ``user_id``, the 1-5
end-of-chat score the ``rating`` (empty when the volunteer gave none), and transcript features
computed with vectorized pandas (no per-chat Python loop):

* ``user_message_count``, ``bot_message_count`` -- turns per side;
* ``thumbs_up``, ``thumbs_down`` -- per-turn feedback the volunteer gave to bot messages;
* ``profile_guess`` -- ``match`` / ``mismatch`` / ``none``: whether the volunteer guessed the
  bot's persona at the end of the chat (asked in the same end-of-chat form as the rating);
* ``mean_user_words``, ``mean_bot_words`` -- mean message length in words (0 without messages);
* ``bot_repeat_share`` -- share of bot messages that repeat an earlier bot message of the chat;
* ``user_sentiment`` / ``user_sentiment_score`` -- a lexicon score of the user's messages with
  the hand-written word lists in ``sentiment_words.yaml`` (no model, nothing downloaded);
* ``duration_min`` -- minutes from the first to the last message;
* ``user_text``, ``bot_text`` -- each side's messages joined by newlines (``text`` features of
  ``features_text.yaml``).

Each chat has one bot, so a chat can belong to one case study only: the bots are split into
disjoint pairs (``--pairs``), and each chat of a pair's two bots gets that pair's case study.
Chats of bots in no pair keep an empty ``case_study`` (they still train the model).

Usage:
    python examples/convai2/prepare.py --out /tmp/convai2-home/convai2_sessions.parquet
    python examples/convai2/prepare.py --sample 500 --seed 0 --out sub.parquet
    python examples/convai2/prepare.py --pairs "Bot 002:Bot 009,Bot 006:Bot 011" --out alt.parquet
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

HERE = Path(__file__).resolve().parent
DEFAULT_INPUT = (HERE.parents[1] / ".." / "shared" / "data" / "real" / "convai2-wild-evaluation"
                 / "data_volunteers.json").resolve()
DEFAULT_LEXICON = HERE / "sentiment_words.yaml"
DEFAULT_PAIRS = "Bot 002:Bot 006,Bot 009:Bot 011"
TOKEN = re.compile(r"[a-z']+|[:;]-?[()dp]|[\u2600-\u27bf\U0001f300-\U0001faff]")


def parse_pairs(text: str) -> list[tuple[str, str]]:
    """Parse ``"A:B,C:D"`` into disjoint (control, treatment) bot pairs.

    Raises:
        ValueError: if a pair is malformed or a bot appears in two pairs (a chat could then
            belong to two case studies).
    """
    pairs = []
    for item in (p.strip() for p in text.split(",") if p.strip()):
        control, sep, treatment = (s.strip() for s in item.partition(":"))
        if not sep or not control or not treatment or control == treatment:
            raise ValueError(f"--pairs: '{item}' is not 'control bot:treatment bot'.")
        pairs.append((control, treatment))
    bots = [b for pair in pairs for b in pair]
    reused = sorted({b for b in bots if bots.count(b) > 1})
    if reused:
        raise ValueError(f"--pairs: {', '.join(reused)} appear(s) in more than one pair; each "
                         "chat has one bot, so pairs must be disjoint. Write one table per "
                         "pairing instead (several runs of prepare.py).")
    return pairs


def case_study_name(control: str, treatment: str) -> str:
    """``Bot 002``, ``Bot 006`` -> ``bot002_vs_bot006``."""
    def slug(bot: str) -> str:
        return re.sub(r"[^a-z0-9]+", "", bot.lower())

    return f"{slug(control)}_vs_{slug(treatment)}"


def load_lexicon(path: Path) -> tuple[frozenset[str], frozenset[str]]:
    """Positive and negative tokens from a ``{positive: [...], negative: [...]}`` YAML file."""
    node = yaml.safe_load(path.read_text(encoding="utf-8"))
    return (frozenset(str(w).lower() for w in node["positive"]),
            frozenset(str(w).lower() for w in node["negative"]))


def read_chats(path: Path, sample: int | None, seed: int) -> pd.DataFrame:
    """One row per chat with a stable ``session_id`` (position in the file).

    Args:
        path: ConvAI2 JSON file (a list of dialogue records).
        sample: Keep this many chats drawn at random (None = all).
        seed: Seed of the random draw.
    """
    chats = pd.DataFrame(json.loads(path.read_text(encoding="utf-8")))
    chats.insert(0, "session_id", [f"convai2-{i:04d}" for i in range(len(chats))])
    if sample is not None and sample < len(chats):
        keep = np.sort(np.random.default_rng(seed).choice(len(chats), sample, replace=False))
        chats = chats.iloc[keep]
    return chats.reset_index(drop=True)


def explode_turns(chats: pd.DataFrame) -> pd.DataFrame:
    """One row per message: ``row`` (chat position), ``is_user``, ``text``, ``score``."""
    turns = chats["dialog"].explode().dropna()
    frame = pd.DataFrame(turns.tolist(), index=turns.index)
    return pd.DataFrame({
        "row": frame.index.to_numpy(),
        "is_user": (frame["sender_class"] == "Human").to_numpy(),
        "text": frame["text"].fillna("").astype(str).to_numpy(),
        "score": pd.to_numeric(frame["evaluation_score"], errors="coerce").to_numpy(),
    })


def turn_features(turns: pd.DataFrame, n_chats: int, lexicon) -> pd.DataFrame:
    """Aggregate message-level signals per chat (rows 0..n_chats-1)."""
    positive, negative = lexicon
    user, bot = turns[turns["is_user"]], turns[~turns["is_user"]]
    rows = pd.RangeIndex(n_chats)

    def per_chat(values: pd.Series, how: str) -> pd.Series:
        return values.groupby(values.index).agg(how).reindex(rows, fill_value=0)

    out = pd.DataFrame(index=rows)
    out["user_message_count"] = per_chat(user.set_index("row")["is_user"], "size")
    out["bot_message_count"] = per_chat(bot.set_index("row")["is_user"], "size")
    score = bot.set_index("row")["score"]
    out["thumbs_up"] = per_chat(score.eq(1).astype(int), "sum")
    out["thumbs_down"] = per_chat(score.eq(0).astype(int), "sum")
    words = turns["text"].str.count(r"\S+")
    out["mean_user_words"] = per_chat(words[turns["is_user"]].set_axis(user["row"]), "mean")
    out["mean_bot_words"] = per_chat(words[~turns["is_user"]].set_axis(bot["row"]), "mean")
    said = pd.DataFrame({"row": bot["row"].to_numpy(),
                         "key": bot["text"].str.lower().str.strip().to_numpy()})
    out["bot_repeat_share"] = per_chat(said.duplicated().astype(float).set_axis(bot["row"]),
                                       "mean")
    tokens = user.assign(tok=user["text"].str.lower().str.findall(TOKEN.pattern)).explode("tok")
    hits = tokens.set_index("row")["tok"]
    pos = per_chat(hits.isin(positive).astype(int), "sum")
    neg = per_chat(hits.isin(negative).astype(int), "sum")
    out["user_sentiment_score"] = (pos - neg) / (pos + neg + 1)
    out["user_sentiment"] = np.select([pos > neg, neg > pos], ["positive", "negative"],
                                      "neutral")
    return out


def build_table(chats: pd.DataFrame, pairs: list[tuple[str, str]], lexicon) -> pd.DataFrame:
    """The session table: contract columns, then the features."""
    bots = pd.json_normalize(chats["participant2_id"].tolist())["user_id"].astype(str)
    users = pd.json_normalize(chats["participant1_id"].tolist())["user_id"].astype(str)
    study_of = {b: case_study_name(c, t) for c, t in pairs for b in (c, t)}
    rating = pd.to_numeric(chats["eval_score"], errors="coerce")
    guess = chats["profile_match"].astype(str).str.strip()
    start = pd.to_datetime(chats["start_time"], format="ISO8601")
    end = pd.to_datetime(chats["end_time"], format="ISO8601")
    table = pd.DataFrame({
        "session_id": chats["session_id"],
        "user_id": users,
        "case_study": bots.map(study_of).fillna(""),
        "condition": bots,
        "rating": rating,
        "n_ratings": rating.notna().astype(int),
        "profile_guess": np.select([guess.eq("1"), guess.eq("0")], ["match", "mismatch"],
                                   "none"),
        "duration_min": ((end - start).dt.total_seconds() / 60).clip(lower=0),
        # when the chat started (UTC: the file's times have no offset): orders each user's
        # chats for the user_history feature (features_history.yaml)
        "started_at": start.dt.tz_localize("UTC") if start.dt.tz is None else start,
    })
    turns = explode_turns(chats)
    feats = turn_features(turns, len(chats), lexicon)
    return pd.concat([table, feats, text_columns(turns, len(chats))], axis=1)


def text_columns(turns: pd.DataFrame, n_chats: int) -> pd.DataFrame:
    """``user_text`` / ``bot_text``: each side's messages joined by newlines ("" without any)."""
    out = pd.DataFrame(index=pd.RangeIndex(n_chats))
    for side, mask in (("user_text", turns["is_user"]), ("bot_text", ~turns["is_user"])):
        joined = turns[mask].groupby("row")["text"].agg("\n".join)
        out[side] = joined.reindex(out.index).fillna("").to_numpy(dtype=object)
    return out


def summary(table: pd.DataFrame) -> str:
    """Chats, labeled chats and mean rating per case study and bot."""
    view = table.assign(labeled=table["rating"].notna()).groupby(
        ["case_study", "condition"]).agg(chats=("session_id", "size"),
                                         labeled=("labeled", "sum"),
                                         mean_rating=("rating", "mean"))
    return view.round(3).to_string()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, default=DEFAULT_INPUT,
                        help="ConvAI2 JSON file (default: the shared data_volunteers.json)")
    parser.add_argument("--out", type=Path, required=True, help="session table (.parquet/.csv)")
    parser.add_argument("--pairs", default=DEFAULT_PAIRS,
                        help=f"disjoint 'control:treatment' bot pairs (default '{DEFAULT_PAIRS}')")
    parser.add_argument("--lexicon", type=Path, default=DEFAULT_LEXICON)
    parser.add_argument("--sample", type=int, default=None, help="keep N chats at random")
    parser.add_argument("--seed", type=int, default=0, help="seed of --sample")
    args = parser.parse_args(argv)
    if not args.input.is_file():
        print(f"error: {args.input} does not exist (pass --input path/to/data_volunteers.json)",
              file=sys.stderr)
        return 2
    try:
        pairs = parse_pairs(args.pairs)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    table = build_table(read_chats(args.input, args.sample, args.seed), pairs,
                        load_lexicon(args.lexicon))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.out.suffix == ".csv":
        table.to_csv(args.out, index=False)
    else:
        table.to_parquet(args.out, index=False)
    print(summary(table))
    print(f"written: {args.out} ({len(table)} chats, {int(table['rating'].notna().sum())} rated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
